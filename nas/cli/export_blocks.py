"""``nas export-blocks --device iphone12 --space S --out DIR``: Core ML files to time on a phone."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, emit, image_size, positive_int


def add_parser(sub) -> None:
    """Register the ``nas export-blocks`` subcommand on ``sub``."""
    p = sub.add_parser(
        "export-blocks",
        help="export every block as Core ML to time on a phone",
        description="Writes every reachable block of the space and every named member as a Core ML "
        "ML program (iOS 16), a manifest.json and a measurements.csv to fill in "
        "(see docs/how-to/measure-a-phone.md); then run `nas import-table`.",
    )
    p.add_argument("--device", required=True, help="iphone12 or iphone14")
    p.add_argument("--space", required=True, help="search space (name or YAML path)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--img-size", type=image_size, default=224, help="input side of the exported blocks")
    p.add_argument("--num-classes", type=positive_int, default=1000, help="classifier outputs of the exported networks")
    p.add_argument("--no-networks", action="store_true", help="blocks only, no whole named members")
    p.add_argument("--limit", type=positive_int, help="export only the first N blocks (a trial run)")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas export-blocks``: write the space's blocks (and named members) as Core ML files with
    a manifest and a CSV to fill in; return the exit code."""
    from nas.latency.onphone import export_blocks
    from nas.space_files import load_space

    manifest = export_blocks(
        args.device,
        load_space(args.space),
        args.out,
        args.img_size,
        args.num_classes,
        networks=not args.no_networks,
        limit=args.limit,
    )
    n_blocks = sum(item["kind"] == "block" for item in manifest["items"])
    n_nets = len(manifest["items"]) - n_blocks
    lines = [
        f"wrote {n_blocks} blocks and {n_nets} networks as Core ML to {args.out}",
        f"next: time them on the {args.device} (docs/how-to/measure-a-phone.md),",
        f"      fill {args.out}/measurements.csv, then",
        f"      nas import-table {args.out}/measurements.csv --manifest {args.out}/manifest.json",
    ]
    emit({"out": args.out, "blocks": n_blocks, "networks": n_nets}, args.json, lines)
    return 0
