"""``nas sample``: random sub-networks that meet a budget (the papers' random baseline)."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from nas.cli.common import add_budget_args, add_common, add_input_args, emit, positive_int
from nas.core.atomic_files import write_text_atomic
from nas.core.typed_yaml import dump_yaml


def add_parser(sub) -> None:
    """Register the ``nas sample`` subcommand on ``sub``."""
    p = sub.add_parser(
        "sample",
        help="random sub-networks within a budget",
        description="Draws sub-networks uniformly from the space and keeps those whose MES, latency "
        "or parameters lie within --tolerance of the target (on the side that meets it); "
        "writes them as arch YAMLs.",
    )
    p.add_argument("--space", help="search space (default: the --supernet run's; one of the two is needed)")
    add_budget_args(p, band=True)
    p.add_argument(
        "--supernet",
        help="run folder of `nas train-supernet`: sample its space, priced as `nas search` prices it (at the "
        "size it trained at, with its number of classes)",
    )
    p.add_argument(
        "--recipe",
        help="the recipe the samples will be trained with (name or YAML path): they are priced at its img_size "
        "when there is no --supernet",
    )
    add_input_args(
        p,
        "input size MES, MACs and latency are priced at (default: the size the --supernet trained at, "
        "else the --recipe's img_size, else 224)",
        "classifier outputs the parameters are counted with (default: the --supernet's, else 1000; 10 for CIFAR-10)",
    )
    p.add_argument("-n", type=positive_int, default=5, help="how many (default 5)")
    p.add_argument("--out", required=True, help="folder for the arch YAMLs")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas sample``: write ``-n`` random sub-networks within the budget as arch YAMLs (with the
    ``config.yaml`` they were priced with) and print their costs; return the exit code."""
    from nas.config.recipe import load_recipe
    from nas.config.spaces import load_space
    from nas.core.errors import NasError
    from nas.latency.predicted import keep, table_for
    from nas.search.input_size import input_size_words, price_size, warn_if_apart
    from nas.search.objective import Objective, cost_function, require_table
    from nas.search.sample import sample_within_budget
    from nas.search.supernet_run import SupernetRun

    if not (args.space or args.supernet):
        raise NasError("nas sample needs --space or --supernet (whose space it samples)")
    objective = Objective(args.objective, args.target)
    require_table(objective.name, args.device)
    pricing = SupernetRun.read(args.supernet) if args.supernet else None  # its space, training size, classes
    space = load_space(args.space) if args.space else pricing.space
    if pricing is not None and space.name != pricing.space.name:
        raise NasError(f"--space {args.space} does not match the supernet run's space {pricing.space.name}")
    recipe_size = load_recipe(args.recipe).img_size if args.recipe else None
    # Priced where the supernet trained (as its search prices), else where the samples will train.
    img_size = price_size(args.img_size, trained=pricing.img_size if pricing else recipe_size)
    trained = recipe_size if recipe_size is not None else (pricing.img_size if pricing else None)
    warn_if_apart(img_size, trained, "the networks train", "the sample")
    num_classes = args.num_classes or (pricing.num_classes if pricing else 1000)
    table = table_for(args.device, space, img_size) if args.device else None
    cost = cost_function(table, img_size, num_classes)
    archs = sample_within_budget(space, args.n, objective, cost, random.Random(args.seed), args.tolerance)
    table = keep(table) if table is not None else None  # a table predicted just now is saved once all is checked
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
                "img_size": img_size,  # cost priced at
                "train_img_size": trained,  # the networks train at (None: not known here)
                "num_classes": num_classes,
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
    lines.append(
        "resolution: "
        + (
            input_size_words(img_size, trained, "trained")
            if trained is not None
            else f"cost priced at {img_size} px"
            + ("" if args.img_size else " (the default: neither --supernet nor --recipe says the training size)")
        )
    )
    emit(
        {
            "objective": objective.name,
            "target": objective.target,
            "tolerance": args.tolerance,
            "img_size": img_size,
            "train_img_size": trained,
            "archs": rows,
        },
        args.json,
        lines,
    )
    return 0
