"""``nas train-supernet FAMILY``: train a weight-sharing supernet (sandwich rule or Gumbel-softmax)."""

from __future__ import annotations

import argparse

from nas.cli.common import add_training_args, run_training, training_request_fields
from nas.core.errors import NasError
from nas.core.families import family_names, get_family


def add_parser(sub) -> None:
    """Register the ``nas train-supernet`` subcommand on ``sub``."""
    p = sub.add_parser(
        "train-supernet",
        help="train a supernet (resumable; runs under torchrun)",
        description="EfficientFormerV2 and SwiftFormer: sandwich rule with in-place distillation. "
        "EfficientFormer: Gumbel-softmax block choice with an annealed temperature. "
        "Without --data, scikit-learn's digits are used.",
    )
    p.add_argument("family", metavar="FAMILY", help=f"one of {', '.join(family_names())}")
    p.add_argument("--space", help="search space (default: the family's main space)")
    add_training_args(p, "runs/supernet-SPACE", supernet=True)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas train-supernet``: train FAMILY's supernet on its space and print the top-1 of its
    largest and smallest sub-networks (only on the main process of a torchrun job); return the exit code."""
    from nas.config.spaces import load_space
    from nas.train.supernet import SupernetTrainingRequest, train_supernet

    get_family(args.family)  # an unknown family is one line that lists the known
    space = load_space(args.space or args.family)
    if space.family != args.family:
        raise NasError(f"space {space.name!r} is a {space.family} space, not {args.family}")
    run_dir = args.run or f"runs/supernet-{space.name}"
    request = SupernetTrainingRequest(space, **training_request_fields(args, run_dir))
    epochs = request.recipe.epochs
    return run_training(
        train_supernet,
        request,
        args.json,
        "largest_top1",
        lambda result: [
            f"steps        {result['step']} ({epochs} epochs planned)",
            f"largest      top-1 {100 * result['largest_top1']:.1f}% on the search split "
            f"({result['search_split']} images)",
            f"smallest     top-1 {100 * result['smallest_top1']:.1f}%  (chance {100 * result['chance']:.1f}%; "
            "BatchNorm recalibrated)",
        ],
    )
