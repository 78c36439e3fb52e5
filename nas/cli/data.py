"""``nas data VERB``: prepare a data set ahead of training (``pack``: WebDataset shards of an image folder)."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, emit, positive_int


def add_parser(sub) -> None:
    """Register the ``nas data`` subcommand group (verb ``pack``) on ``sub``."""
    p = sub.add_parser("data", help="prepare a data set: pack an image folder into shards")
    verbs = p.add_subparsers(dest="data_command", metavar="VERB")
    pack = verbs.add_parser(
        "pack",
        help="write an image folder as WebDataset tar shards (for --data on nodes without a shared file system)",
        description="Writes DATA/train/<class>/* (and DATA/val or DATA/test) as OUT/train-000000.tar ..., "
        "OUT/val-000000.tar ... and OUT/shards.json (classes, each shard's count and size, the folder's "
        "fingerprint). Images keep their encoded bytes; training images are written in a seeded "
        "shuffled order. `nas train-supernet` and `nas train` take OUT as --data; commands that read "
        "images by index (search, compare, rank-check) need the folder.",
    )
    pack.add_argument("data", metavar="DATA", help="image folder with train/<class>/* (and val/ or test/)")
    pack.add_argument("--out", required=True, metavar="SHARDS", help="shard folder to write (new, empty or a pack)")
    pack.add_argument(
        "--shard-size", type=positive_int, default=1000, help="images per shard (default: 1000, ~110 MB of ImageNet)"
    )
    add_common(pack)
    pack.set_defaults(handler=run_pack)


def run_pack(args: argparse.Namespace) -> int:
    """Run ``nas data pack``: write DATA's shards into --out and print what was written; return the exit code."""
    from nas.data.pack import pack

    index = pack(args.data, args.out, shard_size=args.shard_size, seed=args.seed)
    lines = [f"shards       {args.out}  ({len(index['classes'])} classes)"]
    for split, shards in index["splits"].items():
        images = sum(s["samples"] for s in shards)
        mb = sum(s["bytes"] for s in shards) / 2**20
        lines.append(f"{split:<12} {images} images in {len(shards)} shards ({mb:.1f} MB)")
    lines.append(f"source       {index['source']} (fingerprint {index['source_fingerprint']})")
    emit({"out": args.out, **index}, args.json, lines)
    return 0
