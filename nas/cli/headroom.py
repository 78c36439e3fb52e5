"""``nas headroom --space S --objective O --target T``: before a comparison, does its band leave room?"""

from __future__ import annotations

import argparse

from nas.cli.common import add_budget_args, add_price_size_arg, add_study_args, emit, positive_int, study_request


def add_parser(sub) -> None:
    """Register the ``nas headroom`` subcommand on ``sub``."""
    p = sub.add_parser(
        "headroom",
        help="pilot: is there room in a budget band for a search to beat random networks?",
        description="Draws a few random sub-networks in the band of --target (as nas compare does), trains "
        "each with two or more seeds on the recipe and data, and compares the band's spread (std of the "
        "networks' mean top-1) with the seed noise (pooled std within a network): at 1.5 or more there is "
        "room for a searched network to show a win; below, train longer, widen the band or change the "
        "target. Writes headroom.md and result.json; `nas compare --random-from OUT` reuses its networks "
        "and the trainings that match (docs/how-to/headroom.md).",
    )
    p.add_argument("--space", required=True, help="search space (name or YAML path)")
    add_budget_args(p, band=True)
    p.add_argument("--networks", type=positive_int, default=4, help="random networks to draw (default 4)")
    p.add_argument("--seeds", type=positive_int, default=2, help="training seeds per network (default 2)")
    p.add_argument(
        "--planned-random",
        type=positive_int,
        default=5,
        help="random networks the comparison to come will train: the margin it needs (default 5)",
    )
    add_price_size_arg(p, "the recipe's img_size")
    p.add_argument("--recipe", default="demo", help="recipe name in search_configs/recipes/ or a YAML path")
    p.add_argument("--data", help="image folder (default: scikit-learn's digits)")
    p.add_argument("--out", required=True, help="the pilot's folder")
    add_study_args(p, "pilot")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas headroom``: train the pilot's networks and print the spread, the noise and the verdict;
    return the exit code."""
    from nas.config.spaces import load_space
    from nas.studies.headroom import HeadroomRequest, headroom, report_lines

    request = study_request(HeadroomRequest, args, space=load_space(args.space))
    result = headroom(request)
    emit(result, args.json, [*report_lines(result), f"wrote {args.out}/headroom.md"])
    return 0
