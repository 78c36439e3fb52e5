"""``nas rank-check --supernet RUN -n N``: the supernet's ranking of sub-networks against training them
from scratch, beside rankings that cost nothing."""

from __future__ import annotations

import argparse
import dataclasses

from nas.cli.common import add_price_size_arg, add_study_args, emit, nonneg_int, positive_int, study_request
from nas.config.recipe import load_recipe, recipe_from_args


def add_parser(sub) -> None:
    """Register the ``nas rank-check`` subcommand on ``sub``."""
    p = sub.add_parser(
        "rank-check",
        help="does the supernet rank sub-networks as training from scratch does?",
        description="Draws N sub-networks spread over the whole budget range, scores each with the "
        "supernet weights and trains each from scratch with a short recipe, and reports "
        "Kendall's tau, Spearman's rho (Fisher-z intervals) and top-k overlap for the "
        "supernet and for params, MACs, latency, SynFlow and gradient norm.",
    )
    p.add_argument(
        "--supernet",
        required=True,
        help="run folder of `nas train-supernet` (--bn-calib-batches sets "
        "its BatchNorm calibration; default: its recipe's)",
    )
    p.add_argument("-n", type=positive_int, default=20, help="sub-networks (default 20)")
    p.add_argument("--recipe", default="demo", help="short from-scratch recipe (name or YAML)")
    p.add_argument("--full-recipe", help="a longer recipe to check the short one on the first --full-n networks")
    p.add_argument("--full-n", type=nonneg_int, default=0, help="networks also trained with --full-recipe")
    p.add_argument("--data", help="image folder (default: the supernet's data)")
    p.add_argument("--device", help="latency table device (adds the latency ranking; spreads by latency)")
    add_price_size_arg(p, resumed="study")
    p.add_argument("--out", help="output folder (default: runs/rank-check-N)")
    p.add_argument(
        "--scratch-from",
        metavar="STUDY",
        nargs="+",
        help="reuse the from-scratch results of this finished study (same networks, recipes, data and "
        "seed; read from its plan.json and result.json) and score only --supernet: a supernet variant "
        "against the same ground truth; or of one or more finished comparisons (`nas compare` folders): "
        "every network they trained, with their recipe and seeds (-n and --recipe are theirs), and the "
        "supernet that scored them there as one more ranking",
    )
    add_study_args(p, "study")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas rank-check``: compare the supernet's and the free rankings of sub-networks with
    training them from scratch, and print the result; return the exit code."""
    from nas.studies.rankcheck import RankCheckRequest, rank_check, ranking_lines

    # --bn-calib-batches is the supernet's calibration; a fixed network's training never reads it, so
    # it stays the recipe's and a study with another calibration can reuse these trainings.
    recipe = dataclasses.replace(recipe_from_args(args), bn_calib_batches=load_recipe(args.recipe).bn_calib_batches)
    full = load_recipe(args.full_recipe) if args.full_recipe else None
    out = args.out or f"runs/rank-check-{args.n}"
    request = study_request(
        RankCheckRequest, args, recipe=recipe, out=out, full_recipe=full, bn_calib_batches=args.recipe_bn_calib_batches
    )
    result = rank_check(request)
    lines = [
        f"{result['n']} sub-networks of {result['space']}; rankings against from-scratch training:",
        *ranking_lines(result),
        f"wrote {out}/rank.md, rank.csv, result.json",
    ]
    emit(result, args.json, lines)
    return 0
