"""``nas train ARCH``: train a fixed architecture from scratch (resumable; runs under torchrun)."""

from __future__ import annotations

import argparse
from pathlib import Path

from nas.cli.common import add_training_args, run_training, training_request_fields


def add_parser(sub) -> None:
    """Register the ``nas train`` subcommand on ``sub``."""
    p = sub.add_parser(
        "train",
        help="train a named member or a searched arch from scratch",
        description="Trains the static network of ARCH (a named member such as efficientformerv2_s0, "
        "or an arch YAML written by nas search) from random initialisation with the "
        "recipe, on the loop supernet training uses. Scores top-1 on the val/ (or test/) "
        "folder, or on the search split when there is none. Without --data, "
        "scikit-learn's digits are used.",
    )
    p.add_argument("arch", metavar="ARCH", help="a named member, an arch YAML or a family search's member RUN@TARGET")
    p.add_argument("--space", help="search space the ARCH belongs to (default: found from ARCH)")
    add_training_args(p, "runs/train-ARCH")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas train``: train ARCH from scratch and print its top-1 (only on the main process of a
    torchrun job); return the exit code."""
    from nas.config.spaces import find_space
    from nas.search.family import member_arch_path
    from nas.train.fixed import FixedTrainingRequest, train_fixed

    args.arch = member_arch_path(args.arch)  # a family member, RUN@TARGET
    space = find_space(args.arch, args.space)
    label, arch = space.resolve(args.arch)
    run_dir = args.run or f"runs/train-{Path(label).stem if label.endswith(('.yaml', '.yml')) else label}"
    request = FixedTrainingRequest(arch, label=label, space=space.name, **training_request_fields(args, run_dir))
    recipe = request.recipe

    def summary(result: dict) -> list[str]:
        lines = [
            f"arch         {label}  (digest {arch.digest}, space {space.name})",
            f"steps        {result['step']} ({recipe.epochs} epochs planned, {result['train_images']} training images)",
            f"params       {result['params'] / 1e6:.3f} M   MACs {result['macs'] / 1e6:.1f} M "
            f"at {recipe.img_size}x{recipe.img_size}, {result['num_classes']} classes",
            f"top-1        {100 * result['top1']:.2f}% on {result['val']} ({result['val_images']} images; "
            f"chance {100 * result['chance']:.1f}%)",
        ]
        if "top1_ema" in result:
            lines.append(f"top-1 (EMA)  {100 * result['top1_ema']:.2f}%")
        return lines

    return run_training(train_fixed, request, args.json, "top1", summary)
