"""``nas sample``: random sub-networks that meet a budget (the papers' random baseline)."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from nas.cli.common import (
    add_common,
    emit,
    fraction,
    image_size,
    positive_float,
    positive_int,
)
from nas.core.typed_yaml import dump_yaml, write_text_atomic
from nas.search.settings import OBJECTIVES


def add_parser(sub) -> None:
    """Register the ``nas sample`` subcommand on ``sub``."""
    p = sub.add_parser(
        "sample",
        help="random sub-networks within a budget",
        description="Draws sub-networks uniformly from the space and keeps those whose MES, latency "
        "or parameters lie within --tolerance of the target (on the side that meets it); "
        "writes them as arch YAMLs.",
    )
    p.add_argument("--space", required=True)
    p.add_argument("--objective", required=True, help=f"one of {', '.join(OBJECTIVES)}")
    p.add_argument("--target", type=positive_float, required=True)
    p.add_argument("--device", help="latency table device (needed for mes and latency)")
    p.add_argument("--img-size", type=image_size, default=224)
    p.add_argument(
        "--num-classes",
        type=positive_int,
        default=1000,
        help="classifier outputs the parameters are counted with (default 1000; 10 for CIFAR-10)",
    )
    p.add_argument("-n", type=positive_int, default=5, help="how many (default 5)")
    p.add_argument("--tolerance", type=fraction, default=0.05, help="relative band around the target (default 0.05)")
    p.add_argument("--out", required=True, help="folder for the arch YAMLs")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas sample``: write ``-n`` random sub-networks within the budget as arch YAMLs (with the
    ``config.yaml`` they were priced with) and print their costs; return the exit code."""
    from nas.latency import LatencyTable
    from nas.search.objective import Objective, cost_function, require_table
    from nas.search.sample import sample_within_budget
    from nas.space_files import load_space

    space = load_space(args.space)
    objective = Objective(args.objective, args.target)
    require_table(objective.name, args.device)
    table = LatencyTable.load(args.device, space, args.img_size) if args.device else None
    cost = cost_function(table, args.img_size, args.num_classes)
    archs = sample_within_budget(space, args.n, objective, cost, random.Random(args.seed), args.tolerance)
    out = Path(args.out)
    # How the files were priced, so `nas profile` prices them the same way.
    write_text_atomic(
        out / "config.yaml",
        dump_yaml(
            {
                "command": "sample",
                "space": space.name,
                "objective": objective.name,
                "target": objective.target,
                "device": args.device,
                "img_size": args.img_size,
                "num_classes": args.num_classes,
                "tolerance": args.tolerance,
                "seed": args.seed,
            }
        ),
    )
    rows, lines = [], [f"{'file':<28}{'params (M)':>11}{'latency ms':>12}{'MES':>8}"]
    for i, arch in enumerate(archs):
        path = arch.save(out / f"random-{i}.yaml")
        c = cost(arch)
        rows.append({"file": str(path), **c.to_dict(), "arch": arch.to_dict()})
        lat = f"{c.latency_ms:.3f}" if c.latency_ms is not None else "-"
        m = f"{c.mes:.1f}" if c.mes is not None else "-"
        lines.append(f"{path.name:<28}{c.params / 1e6:>11.3f}{lat:>12}{m:>8}")
    if table is not None:
        lines.append(f"latency: {table.describe_source()}")
    emit(
        {"objective": objective.name, "target": objective.target, "tolerance": args.tolerance, "archs": rows},
        args.json,
        lines,
    )
    return 0
