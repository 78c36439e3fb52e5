"""Argument-parser pieces shared by the subcommands.

Building the parsers loads none of the engine (no torch, timm or numpy), so ``nas --help`` answers at
once: what a parser shows comes from light modules (:mod:`nas.config.recipe`, :mod:`nas.config.folder`,
:mod:`nas.search.command_choices`, ``nas.latency.devices``), and every subcommand imports the library in
its handler.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from typing import Any, NoReturn

from nas.config.recipe import MIN_IMG_SIZE, add_recipe_overrides, recipe_from_args
from nas.search.command_choices import OBJECTIVES


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_verbosity(parser: argparse.ArgumentParser, default: Any = argparse.SUPPRESS) -> None:
    """``-v`` (log at INFO) and ``-q`` (no progress, errors only), before or after the subcommand: a
    subcommand's parser adds them with no default, so they keep what was given before it."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_true", default=default, help="log what it does at INFO level")
    group.add_argument("-q", "--quiet", action="store_true", default=default, help="show no progress, log errors only")


def add_common(parser: argparse.ArgumentParser, json_output: bool = True, draws: bool = True) -> None:
    """Add ``--seed``, ``-v`` and ``-q`` and, with ``json_output``, ``--json`` to ``parser``.

    A command that ``draws`` nothing (a report, a profile, a listing) still takes ``--seed``, as every
    command does, so scripts that pass it everywhere keep working, but its help does not show it."""
    add_verbosity(parser)
    parser.add_argument(
        "--seed",
        type=nonneg_int,
        default=0,
        help="random seed, 0 or more (default: 0)" if draws else argparse.SUPPRESS,
    )
    if json_output:
        parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    parse.__name__ = what.replace(" ", "_")  # argparse names the type in its messages
    return parse


def _float_in(low: float, high: float | None, what: str, low_open: bool = True, high_open: bool = True):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        inside = (
            math.isfinite(value)
            and (value > low if low_open else value >= low)
            and (high is None or (value < high if high_open else value <= high))
        )
        if not inside:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value

    parse.__name__ = what.replace(" ", "_")
    return parse


positive_int = _int_at_least(1, "a positive integer")
nonneg_int = _int_at_least(0, "an integer of 0 or more")
image_size = _int_at_least(MIN_IMG_SIZE, f"an image size of at least {MIN_IMG_SIZE}")
positive_float = _float_in(0.0, None, "a positive number")
fraction = _float_in(0.0, 1.0, "a number between 0 and 1 (exclusive)")


def emit(result: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    """Print a command's result: JSON for machines, aligned text for people."""
    if as_json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(lines) + "\n")


def add_training_args(parser: argparse.ArgumentParser, default_run: str, supernet: bool = False) -> None:
    """The options every training command shares (``nas train-supernet``, ``nas train``); the
    supernet-only recipe fields with ``supernet``."""
    parser.add_argument("--recipe", default="demo", help="recipe name in search_configs/recipes/ or a YAML path")
    parser.add_argument(
        "--data",
        help="image folder with train/<class>/* (and val/ or test/), or a shard folder written by `nas data pack`; "
        "default: scikit-learn's digits",
    )
    parser.add_argument("--run", help=f"run folder (default: {default_run})")
    parser.add_argument("--resume", action="store_true", help="continue the run in --run from its checkpoint")
    parser.add_argument(
        "--init",
        metavar="PATH",
        help="start from released weights (a timm state dict or checkpoint); "
        "classifier heads of another class count are re-initialised",
    )
    parser.add_argument(
        "--max-steps", type=positive_int, help="stop after this many steps (the schedule still spans --epochs)"
    )
    add_recipe_overrides(parser, supernet)
    add_common(parser)


def add_device_arg(parser: argparse.ArgumentParser, devices: list[str], what: str = "one of") -> None:
    """A required ``--device`` among ``devices`` (names from ``nas.latency.devices``), listed in the usage
    and the help (``what`` opens the list: "one of", "a local device:")."""
    parser.add_argument(
        "--device", required=True, metavar="{" + ",".join(devices) + "}", help=f"{what} {', '.join(devices)}"
    )


def add_price_size_arg(
    parser: argparse.ArgumentParser,
    default: str = "the size the supernet trained at",
    resumed: str | None = None,
    flag: str = "--price-size",
) -> None:
    """The input size a command prices MES, MACs and latency at (``flag``; a study's ``--img-size`` is
    the size its networks train at); ``resumed`` names what keeps the size it recorded when resumed."""
    kept = f"; a resumed {resumed} keeps the size it recorded" if resumed else ""
    trains = "; --img-size is the size the networks train at" if flag == "--price-size" else ""
    parser.add_argument(
        flag, type=image_size, help=f"input size MES, MACs and latency are priced at (default: {default}{kept}{trains})"
    )


def add_input_args(
    parser: argparse.ArgumentParser,
    img_help: str,
    classes_help: str,
    img_default: int | None = None,
    classes_default: int | None = None,
) -> None:
    """``--img-size`` and ``--num-classes``: the input side and the classifier outputs of what the command
    builds, exports, times or prices (each command's help says its default and where it comes from)."""
    parser.add_argument("--img-size", type=image_size, default=img_default, help=img_help)
    parser.add_argument("--num-classes", type=positive_int, default=classes_default, help=classes_help)


#: What ``--quantize`` and ``--final-quantize`` accept (``nas.quantize.QUANTIZATIONS``, not imported: the
#: parsers load no torch).
QUANTIZE_CHOICES = ("int8",)


def add_busy_arg(parser: argparse.ArgumentParser) -> None:
    """The busy guard of a command that times on this machine (nas.latency.measure.Timer)."""
    parser.add_argument(
        "--busy-retries",
        type=nonneg_int,
        default=3,
        help="time a block or network again (20 s later, up to this many times) while a reference program "
        "runs over 1.25x its fastest time, the machine busy with other work (default: 3; 0: no guard)",
    )


def add_quantize_arg(parser: argparse.ArgumentParser, help: str, flag: str = "--quantize") -> None:  # noqa: A002
    """The int8 switch of a command that builds, exports or scores networks (docs/how-to/ship-int8.md)."""
    parser.add_argument(flag, choices=QUANTIZE_CHOICES, help=help)


def run_training(train: Any, request: Any, json_output: bool, scored: str, summary: Any) -> int:
    """``train(request)`` (a :class:`nas.train.loop.TrainingRequest`), then its run folder and the lines
    ``summary(result)`` (or the result as JSON) on the main process of a torchrun job, the one whose result
    holds the ``scored`` key (the others' results do not: they print nothing). Returns the exit code."""
    result = train(request)
    if scored in result:
        emit(result, json_output, [f"run          {request.run}", *summary(result)])
    return 0


def request_from_args(request_type: type, args: argparse.Namespace, **given: Any) -> Any:
    """A ``request_type`` dataclass (a command's request) with the ``given`` fields as passed and every
    other field read from the option of the same name; a field no option names keeps its default.

    A command passes by keyword only the fields whose option is named otherwise or needs building
    (a space loaded from its name, a recipe with its overrides), so a new option reaches its request
    by its name alone, as :class:`nas.search.finalists.FinalScoring`'s flags do."""
    named = {f.name for f in dataclasses.fields(request_type) if f.init} - given.keys()
    return request_type(**{name: getattr(args, name) for name in named if hasattr(args, name)}, **given)


def training_request_fields(args: argparse.Namespace, run: str) -> dict[str, Any]:
    """The fields of a :class:`nas.train.loop.TrainingRequest` that :func:`add_training_args`'s options
    set, for ``run`` (the run folder the command chose)."""
    return {
        "recipe": recipe_from_args(args),
        "data": args.data,
        "run": run,
        "seed": args.seed,
        "resume": args.resume,
        "max_steps": args.max_steps,
        "init": args.init,
        "progress": getattr(args, "progress", True),  # -q: no progress
    }


#: What a budget's target is, in each objective's unit (every command that takes --target says it).
TARGET_UNITS = (
    "in the objective's unit: MES to reach, milliseconds (latency) or a parameter count such as 5e6 (params) "
    "to get under"
)


def add_budget_args(parser: argparse.ArgumentParser, several_targets: bool = False, band: bool = False) -> None:
    """The budget a command searches or draws at (``search``, ``sample``, ``headroom``): the objective, its
    target (``several_targets``: one or more, a family search), the device whose latency table prices it
    and, with ``band``, the band around the target it draws in (``--tolerance``)."""
    parser.add_argument(
        "--objective", required=True, metavar="{" + ",".join(OBJECTIVES) + "}", help=f"one of {', '.join(OBJECTIVES)}"
    )
    if several_targets:
        parser.add_argument(
            "--target",
            type=positive_float,
            nargs="+",
            required=True,
            metavar="T",
            help=f"{TARGET_UNITS}; several targets search a family, one network per target from one run "
            "(runs/NAME/targets/T/; name a member RUN@T)",
        )
    else:
        parser.add_argument(
            "--target",
            type=positive_float,
            required=True,
            help=TARGET_UNITS,
        )
    parser.add_argument("--device", help="latency table device (needed for mes and latency)")
    if band:
        add_tolerance_arg(parser)


def add_tolerance_arg(parser: argparse.ArgumentParser) -> None:
    """``--tolerance``: the relative band around the target that random networks are drawn in."""
    parser.add_argument(
        "--tolerance", type=fraction, default=0.05, help="relative band around the target (default 0.05)"
    )


def add_study_args(parser: argparse.ArgumentParser, what: str) -> None:
    """The options of the studies that train many networks (``compare``, ``headroom``, ``rank-check``):
    where they train (Ray workers, threads, a cluster to join), ``--resume`` of the ``what``,
    ``--max-steps``, the recipe's overrides and the options every command has."""
    parser.add_argument(
        "--workers",
        type=nonneg_int,
        default=0,
        help="Ray workers training in parallel (default 0: one after another in this process)",
    )
    parser.add_argument("--threads-per-worker", type=positive_int, default=1, help="torch threads per Ray worker")
    parser.add_argument("--ray-address", help="join an existing Ray cluster instead of starting one")
    parser.add_argument("--resume", action="store_true", help=f"continue the {what} in --out")
    parser.add_argument("--max-steps", type=positive_int, help="stop every training after this many steps (smoke runs)")
    add_recipe_overrides(parser)
    add_common(parser)


def study_request(request_type: type, args: argparse.Namespace, **given: Any) -> Any:
    """A study's request (:func:`request_from_args`) with what :func:`add_study_args`'s commands read
    alike: the recipe with its overrides (unless ``given``), the recipe's name as the user gave it, the
    size the networks are priced at (``--price-size``) and where they train."""
    from nas.studies.trainings import TrainingPool

    if "recipe" not in given:
        given["recipe"] = recipe_from_args(args)
    pool = TrainingPool(args.workers, args.ray_address, args.threads_per_worker)
    return request_from_args(
        request_type, args, img_size=args.price_size, pool=pool, recipe_name=str(args.recipe), **given
    )
