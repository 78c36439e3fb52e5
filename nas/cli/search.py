"""``nas search --supernet RUN --objective mes --target 100 --device iphone12``: search a trained supernet."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging

from nas.cli.common import (
    add_budget_args,
    add_common,
    add_price_size_arg,
    add_quantize_arg,
    emit,
    nonneg_int,
    positive_int,
    request_from_args,
)
from nas.search.command_choices import DEFAULT_STRATEGY
from nas.search.strategy import strategy_names

log = logging.getLogger(__name__)

#: Flags of earlier versions that set a strategy's option: flag -> option key.
OPTION_ALIASES = {
    "trials": "evaluations",
    "evaluate_top": "evaluate_top",
    "explore": "explore",
    "storage": "storage",
    "study_name": "study_name",
}


def add_parser(sub) -> None:
    """Register the ``nas search`` subcommand on ``sub``."""
    p = sub.add_parser(
        "search",
        help="search a trained supernet for the most accurate sub-network at an MES, latency or size target",
        description="Runs a search strategy on the supernet's sub-networks (scored with its weights, BatchNorm "
        "recalibrated), measures the score's noise, scores the best candidates again at a higher fidelity "
        "and chooses by that score. Strategies: evolution (constrained evolution in a budget band), greedy "
        "(greedy slimming, EfficientFormerV2 alg. 1), optuna (NSGA-II), random (random search in the band); "
        "each has options set with --set key=value (docs/reference/cli.md lists them). Evaluations run "
        "in-process (--workers 0) or on Ray.",
    )
    p.add_argument("--supernet", required=True, help="run folder of `nas train-supernet`")
    add_budget_args(p, several_targets=True)
    add_price_size_arg(p, resumed="search", flag="--img-size")
    p.add_argument("--space", help="check that the supernet's space is this one")
    p.add_argument("--run", help="search run folder (default: runs/search-OBJECTIVE-TARGET)")
    p.add_argument("--workers", type=nonneg_int, default=0, help="Ray workers (0: evaluate in this process)")
    p.add_argument("--ray-address", help="join an existing Ray cluster instead of starting one")
    p.add_argument("--bn-calib-batches", type=positive_int, help="override the supernet recipe's")
    p.add_argument(
        "--search-images",
        type=positive_int,
        help="score every sub-network on this many images of the search split (a fixed, class-balanced, "
        "seeded subset; default: all of it)",
    )
    p.add_argument(
        "--strategy",
        default=DEFAULT_STRATEGY,
        choices=strategy_names(),
        help=f"how to search (default {DEFAULT_STRATEGY}): evolution, constrained evolution in the band of the "
        "target; greedy, greedy slimming from the largest sub-network (the papers' algorithm); optuna, NSGA-II "
        "over accuracy and the objective; random, the most accurate of uniform samples in the band",
    )
    p.add_argument(
        "--set",
        dest="options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set an option of the strategy (repeatable), e.g. --set evaluations=300 --set predictor=true; "
        "evolution: evaluations, population, parents, mutation, crossover, tolerance, include, predictor, "
        "screen, explore; greedy: evaluate_top, explore; optuna: evaluations, population, storage, study_name; "
        "random: evaluations, tolerance",
    )
    # Deprecated: earlier versions' flags for strategy options (a warning says the --set form); not in the help.
    p.add_argument("--trials", type=positive_int, help=argparse.SUPPRESS)
    p.add_argument("--evaluate-top", type=nonneg_int, help=argparse.SUPPRESS)
    p.add_argument("--explore", type=nonneg_int, help=argparse.SUPPRESS)
    p.add_argument("--storage", help=argparse.SUPPRESS)
    p.add_argument("--study-name", help=argparse.SUPPRESS)
    p.add_argument(
        "--finalists",
        type=nonneg_int,
        default=4,
        help="best candidates scored again on every image of the search split with more calibration images; "
        "the best of them is chosen (default 4; 0: the strategy's own choice)",
    )
    p.add_argument(
        "--final-draws", type=positive_int, default=2, help="calibration draws per finalist score (default 2)"
    )
    p.add_argument(
        "--final-calib-batches",
        type=positive_int,
        help="calibration batches of a finalist's score (default: twice the search's)",
    )
    p.add_argument(
        "--final-images", type=positive_int, help="images a finalist is scored on (default: the whole search split)"
    )
    p.add_argument(
        "--noise-networks",
        type=nonneg_int,
        default=3,
        help="best candidates scored at other draws of calibration and scored images to measure the score's "
        "noise (default 3)",
    )
    p.add_argument("--noise-draws", type=positive_int, default=2, help="other draws per noise network (default 2)")
    add_quantize_arg(
        p,
        flag="--final-quantize",
        help="int8: the finalists are scored quantized (PT2E int8 after their BatchNorm recalibration, on the same "
        "images), so the choice counts what quantization costs each; pair with an int8 table (--device xnnpack-int8)",
    )
    p.add_argument("--resume", action="store_true", help="continue the search in --run")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas search`` and print its result; return the exit code."""
    from nas.core.errors import NasError
    from nas.search.engine import SearchRequest, search
    from nas.search.finalists import FinalScoring
    from nas.search.objective import Objective
    from nas.search.strategy import get_strategy, parse_assignments

    targets = tuple(args.target)
    objective = Objective(args.objective, targets[0])
    run_dir = args.run or f"runs/search-{objective.name}-{'-'.join(f'{t:g}' for t in targets)}"
    options = parse_assignments(args.options)
    known = {f for f in get_strategy(args.strategy).options.__dataclass_fields__}
    for flag, key in OPTION_ALIASES.items():
        value = getattr(args, flag)
        if value is None:
            continue
        if key not in known:
            raise NasError(
                f"--{flag.replace('_', '-')} is not an option of strategy {args.strategy}; its options: "
                f"{', '.join(sorted(known))}"
            )
        log.warning("--%s is deprecated: use --set %s=%s", flag.replace("_", "-"), key, value)
        options.setdefault(key, value)
    final = request_from_args(FinalScoring, args)  # every field of FinalScoring is a flag of the same name
    request = request_from_args(
        SearchRequest, args, objective=objective, run=run_dir, options=options, final=final, targets=targets
    )
    if len(set(targets)) > 1:
        from nas.search.engine import search_family

        family = search_family(request)
        emit(family, args.json, _family_lines(family, run_dir))
        return 0
    result = search(dataclasses.replace(request, targets=()))
    data = result.to_dict()
    emit(data, args.json, [*result.summary_lines(), *_cost_lines(data)])
    return 0


def command_line(config: dict, run: str) -> list:
    """The ``nas search`` command that runs a search again from its recorded ``config.yaml``: its
    options as ``--set`` (searches of earlier versions: their flags, and greedy without finalists)."""
    argv = ["nas", "search", "--supernet", config["supernet"], "--objective", config["objective"]]
    argv += ["--target", *(config.get("targets") or [config["target"]]), "--device", config["device"]]
    argv += ["--img-size", config["img_size"]] if config.get("img_size") else []
    keys = ("bn_calib_batches", "search_images")
    argv += [x for k in keys if config.get(k) is not None for x in (f"--{k.replace('_', '-')}", config[k])]
    if config.get("strategy_options") is None and config.get("strategy", "greedy") != "greedy":
        argv += ["--strategy", config["strategy"], "--set", f"evaluations={config['trials']}"]
    elif config.get("strategy_options") is None:
        screen = [f"{k}={config[k]}" for k in ("evaluate_top", "explore") if config.get(k) is not None]
        argv += ["--strategy", "greedy", *(x for s in screen for x in ("--set", s)), "--finalists", 0]
        argv += ["--noise-networks", 0]
    else:
        argv += ["--strategy", config["strategy"]]
        for key, value in config["strategy_options"].items():
            text = json.dumps(value) if isinstance(value, (list, bool)) or value is None else value
            argv += ["--set", f"{key}={text}"]
        final = (config.get("final_scoring") or {}).items()
        argv += [x for k, v in final if v is not None for x in (f"--{k.replace('_', '-')}", v)]
    return [*argv, "--run", run, "--seed", config["seed"]]


def _family_lines(family: dict, run: str) -> list[str]:
    """What ``nas search`` prints of a family: one line per target, the evaluations and where things are."""
    lines = [f"family       {run} ({family['strategy']}: {family['evaluations']} sub-networks scored in all)"]
    for m in family["members"]:
        lat = "-" if m.get("latency_ms") is None else f"{m['latency_ms']:.3f} ms"
        lines.append(
            f"  {family['objective']} {m['target']:g}: {run}@{m['target']:g}  top-1 {100 * m['accuracy']:.2f}% "
            f"(supernet)  params {m['params'] / 1e6:.3f} M  latency {lat}  digest {m['digest']}  "
            f"({m['new_evaluations']} new evaluations)"
        )
    lines.append(f"wrote        {run}/family.md, family.png, result.json; each target's search in {run}/targets/")
    if family.get("latency_source"):
        lines.append(f"latency      {family['latency_source']}")
    return lines


def _cost_lines(result: dict) -> list[str]:
    """The chosen sub-network's parameters, latency (with its interval) and MES, and the latency's source."""
    lat = f"{result['latency_ms']:.3f} ms" if result["latency_ms"] is not None else "-"
    if result.get("latency_interval_ms"):
        lo, hi = result["latency_interval_ms"]
        lat += f" ({lo:.3f}–{hi:.3f})"
    mes = f"{result['mes']:.1f}" if result["mes"] is not None else "-"
    lines = [f"params       {result['params'] / 1e6:.3f} M   latency {lat}   MES {mes}"]
    if result["latency_source"]:
        lines.append(f"latency      {result['latency_source']}")
    if result.get("img_size"):
        lines.append(
            f"resolution   cost priced at {result['img_size']} px; the supernet trained and scores at "
            f"{result.get('train_img_size') or '?'} px"
        )
    return lines
