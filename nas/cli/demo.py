"""``nas demo``: table, supernet, search, and searched vs random trained from scratch, on built-in data."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from nas.cli.common import add_common, emit, nonneg_int, positive_int
from nas.config.recipe import DEMO_SUPERNET_EPOCHS, DEMO_TRAIN_EPOCHS


def add_parser(sub) -> None:
    """Register the ``nas demo`` subcommand on ``sub``."""
    p = sub.add_parser(
        "demo",
        help="the whole pipeline on scikit-learn's digits, in minutes",
        description="Uses (or builds) the predicted iPhone 12 table of the efficientformerv2-tiny "
        "space, trains a supernet on scikit-learn's digits, searches to an MES target "
        "halfway between its largest and smallest sub-networks, trains the searched "
        "network and random ones of the same MES from scratch, and prints the "
        "comparison. Running it again continues an interrupted demo.",
    )
    p.add_argument("--run", default="runs/demo", help="output folder (default runs/demo)")
    p.add_argument("--random", type=positive_int, default=3, help="random sub-networks to compare with (default 3)")
    p.add_argument(
        "--supernet-epochs",
        type=positive_int,
        default=DEMO_SUPERNET_EPOCHS,
        help=f"supernet epochs (default {DEMO_SUPERNET_EPOCHS})",
    )
    p.add_argument(
        "--train-epochs",
        type=positive_int,
        default=DEMO_TRAIN_EPOCHS,
        help=f"epochs per network trained from scratch (default {DEMO_TRAIN_EPOCHS})",
    )
    p.add_argument(
        "--target-fraction",
        type=float,
        default=0.5,
        help="MES target as a fraction of the way from the largest sub-network's MES to the smallest's (default 0.5)",
    )
    p.add_argument(
        "--workers",
        type=nonneg_int,
        default=0,
        help="evaluate sub-networks and train the compared networks on this many Ray workers",
    )
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas demo``: the whole pipeline on scikit-learn's digits, announcing each stage and printing
    the comparison; return the exit code."""
    from nas.config.recipe import load_recipe
    from nas.reports.comparison import summary_line, table_lines
    from nas.studies.demo import DemoRequest, demo

    recipe = load_recipe("demo")

    def stage(text: str) -> None:
        if not args.json:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    request = DemoRequest(
        run=args.run,
        seed=args.seed,
        supernet_recipe=dataclasses.replace(recipe, epochs=args.supernet_epochs),
        train_recipe=dataclasses.replace(recipe, epochs=args.train_epochs),
        n_random=args.random,
        workers=args.workers,
        target_fraction=args.target_fraction,
        progress=getattr(args, "progress", True),
    )
    result = demo(request, on_stage=stage)
    sup, found, comparison = result["supernet"], result["search"], result["comparison"]
    seconds = result["seconds"]
    lines = [
        "",
        f"supernet   largest {100 * sup['largest_top1']:.1f}%, smallest {100 * sup['smallest_top1']:.1f}% top-1 "
        f"(supernet weights, BN recalibrated, on the search split)",
        f"search     MES {found['mes']:.1f} >= target {result['target_mes']:g} in {found['steps']} steps "
        f"({found['evaluations']} sub-networks evaluated); "
        f"supernet top-1 {100 * found['search_accuracy']:.1f}% on the search split",
        "",
        "trained from scratch:",
        *table_lines(comparison["rows"]),
        summary_line(comparison),
        "",
        "where the numbers come from:",
        *[f"  {key}: {text}" for key, text in comparison["sources"].items()],
        "",
        f"time       {seconds['total']:.0f} s (table {seconds['table']:.0f}, supernet {seconds['supernet']:.0f}, "
        f"search {seconds['search']:.0f}, compare {seconds['compare']:.0f}); outputs in {result['run']}/",
    ]
    emit(result, args.json, lines)
    return 0
