"""``nas compare --searched ARCH.yaml --random N``: the searched network against random ones of its budget."""

from __future__ import annotations

import argparse
from pathlib import Path

from nas.cli.common import (
    add_price_size_arg,
    add_study_args,
    add_tolerance_arg,
    emit,
    nonneg_int,
    positive_float,
    positive_int,
    study_request,
)
from nas.core.typed_yaml import read_yaml
from nas.search.command_choices import OBJECTIVES


def add_parser(sub) -> None:
    """Register the ``nas compare`` subcommand on ``sub``."""
    p = sub.add_parser(
        "compare",
        help="train the searched net and random ones of its budget from scratch",
        description="Draws N random sub-networks within --tolerance of the searched network's "
        "budget (as nas sample), trains every network from scratch with the same "
        "recipe and seed (in this process or on Ray workers), and writes compare.md, "
        "compare.csv and compare.png. When ARCH.yaml was written by nas search, its "
        "objective, device, supernet and data are the defaults.",
    )
    p.add_argument(
        "--searched",
        required=True,
        metavar="ARCH",
        help="the searched arch YAML, a named member or a family search's member RUN@TARGET",
    )
    p.add_argument(
        "--random",
        type=nonneg_int,
        help="random sub-networks (default 5, or all of --random-from's); drawn from a seed of the searched "
        "network's digest and --seed, so each comparison draws its own",
    )
    p.add_argument(
        "--random-from",
        metavar="COMPARE_DIR",
        help="reuse that comparison's random networks (the first --random of them) instead of drawing new ones; "
        "each must meet this searched network's budget within --tolerance. Comparisons that share draws are "
        "not independent results",
    )
    p.add_argument(
        "--baseline",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME",
        help="also train these named networks (members of the space, e.g. efficientformerv2_s1, or arch YAMLs) "
        "the same way, with the same seeds, and test the searched network against each (Welch); one outside "
        "the band is marked with its cost. With baselines, --random 0 trains no random networks",
    )
    p.add_argument(
        "--reuse-trainings",
        nargs="+",
        action="extend",
        default=[],
        metavar="COMPARE_DIR",
        help="copy the finished trainings of these comparisons that this one would repeat (the same network, "
        "recipe, data and seed: a training is deterministic given those), e.g. a baseline trained for another "
        "supernet seed",
    )
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=1,
        help="train every network with this many seeds (--seed, --seed + 1, ...); the table gives mean "
        "and std, the summary intervals and p-values of the searched network's margins (default 1)",
    )
    p.add_argument("--space", help="search space (default: the search run's, or found from ARCH)")
    p.add_argument(
        "--objective",
        metavar="{" + ",".join(OBJECTIVES) + "}",
        help=f"budget to match: one of {', '.join(OBJECTIVES)} (default: the search's, or mes)",
    )
    p.add_argument("--device", help="latency table device (default: the search's)")
    add_price_size_arg(p, "the size the supernet trained at, else the recipe's img_size", resumed="comparison")
    p.add_argument(
        "--target",
        type=positive_float,
        help="the budget's value in the objective's unit (MES, milliseconds, or a parameter count), which the "
        "searched network must meet (default: the searched network's own); "
        "with the search's target, comparisons of two networks searched to it draw in one band and share "
        "their random networks (--random-from)",
    )
    add_tolerance_arg(p)
    p.add_argument("--recipe", default="demo", help="recipe name in search_configs/recipes/ or a YAML path")
    p.add_argument("--data", help="image folder (default: the data of the search's supernet; else digits)")
    p.add_argument(
        "--supernet",
        help="also score every network with this supernet run's weights, as the search "
        "did (default: the search's supernet; 'none' to skip); --bn-calib-batches "
        "(default: the search's) sets its BatchNorm calibration",
    )
    p.add_argument("--out", help="output folder (default: runs/compare-<searched digest>)")
    add_study_args(p, "comparison")
    p.set_defaults(handler=run)


def search_defaults(arch_path: str) -> dict:
    """objective, device, img_size, supernet, BatchNorm calibration and data of the ``nas search``
    run that wrote ``arch_path`` (nothing when it was not written by one)."""
    from nas.runs.config import SearchRunConfig, read_run_config, run_config_from

    config_path = Path(arch_path).parent / "config.yaml"
    if not config_path.exists():
        return {}
    raw = read_yaml(config_path, "search config") or {}
    if not isinstance(raw, dict) or raw.get("command") != "search":
        return {}
    saved = run_config_from(raw, config_path, SearchRunConfig)
    defaults = {
        k: getattr(saved, k)
        for k in ("objective", "device", "img_size", "supernet", "bn_calib_batches")
        if getattr(saved, k) is not None
    }
    supernet_config = Path(saved.supernet) / "config.yaml"
    if supernet_config.exists():
        defaults["data"] = read_run_config(supernet_config).data
    return defaults


def compare_request(args: argparse.Namespace):
    """The :class:`nas.studies.compare.CompareRequest` of a parsed ``nas compare`` command line, with the
    defaults of the search that wrote ``--searched`` (``docs/results/studies/trainings_elsewhere.py`` plans
    a comparison's trainings from the same request)."""
    from nas.config.spaces import find_space
    from nas.search.family import member_arch_path
    from nas.studies.compare import CompareRequest

    args.searched = member_arch_path(args.searched)  # a family member, RUN@TARGET
    space = find_space(args.searched, args.space)
    label, arch = space.resolve(args.searched)
    defaults = search_defaults(args.searched)
    supernet = args.supernet or defaults.get("supernet")
    return study_request(
        CompareRequest,
        args,
        searched=arch,
        space=space,
        out=args.out or f"runs/compare-{arch.digest}",
        n_random=args.random if args.random is not None else (None if args.random_from else 5),
        data=args.data if args.data is not None else defaults.get("data"),
        objective=args.objective or defaults.get("objective", "mes"),
        device=args.device or defaults.get("device"),
        supernet=None if supernet in (None, "none") else supernet,
        # Fixed networks need no BatchNorm calibration; the recipe's flag serves the supernet scores.
        bn_calib_batches=args.recipe_bn_calib_batches or defaults.get("bn_calib_batches"),
        searched_label=label,
        baselines=tuple(space.resolve(member_arch_path(name)) for name in args.baseline),
        reuse_trainings=tuple(args.reuse_trainings),
    )


def run(args: argparse.Namespace) -> int:
    """Run ``nas compare``: train the searched network and random ones of its budget from scratch and
    print the table and summary; return the exit code."""
    from nas.reports.comparison import summary_line, table_lines
    from nas.studies.compare import compare

    request = compare_request(args)
    out = request.out
    result = compare(request)
    o = result["objective"]
    whose = "--target" if result.get("target_given") else "the searched network's"
    lines = [
        f"budget: {o['name']} {o['target']:.4g} ({whose})",
        *table_lines(result["rows"]),
        summary_line(result),
    ]
    lines += [f"{key}: {text}" for key, text in result["sources"].items()]
    lines.append(f"wrote {out}/compare.md, compare.csv, compare.png")
    emit(result, args.json, lines)
    return 0
