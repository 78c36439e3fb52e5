"""``nas data ACTION``: prepare a data set ahead of training (``check``: decode every image once;
``pack``: WebDataset shards of an image folder)."""

from __future__ import annotations

import argparse
import sys

from nas.cli.common import add_common, emit, positive_int


def add_processes(parser, what: str) -> None:
    """``--processes N``: the processes that decode images (a Ray run's ``--workers`` are Ray workers; the
    recipe's ``loader_workers`` the DataLoader's). ``--workers``, its former name, still works, unlisted."""
    parser.add_argument(
        "--processes",
        dest="workers",
        metavar="N",
        type=positive_int,
        help=f"processes {what} images (default: every available core)",
    )
    parser.add_argument("--workers", dest="workers", type=positive_int, help=argparse.SUPPRESS)


def add_parser(sub) -> None:
    """Register ``nas data`` and its subcommands on ``sub``."""
    p = sub.add_parser(
        "data",
        help="check a data folder, or pack it into shards, ahead of training",
        description="Work on a data set before training on it.",
    )
    actions = p.add_subparsers(dest="data_command", metavar="ACTION", parser_class=type(p), required=True)
    check = actions.add_parser(
        "check",
        help="decode every image once and report what the folder (or shard folder) holds",
        description="Decodes every image of DATA/train and DATA/val (or test) in worker processes and "
        "prints the images per split and class, their sizes and modes, and every corrupt file. What "
        "decoded is kept in a manifest ($NAS_DATA_CACHE, else ~/.cache/nas/data-check), so training "
        "commands and later checks decode only new or changed files. A shard folder (nas data pack) is "
        "checked a shard per process and its clean verdict kept by the shards' fingerprint; a corrupt "
        "member is named by shard and member. Exit code 2 when an image is corrupt.",
    )
    check.add_argument(
        "data", metavar="DATA", help="image folder with train/<class>/* (and val/ or test/), or a shard folder"
    )
    add_processes(check, "decoding")
    add_common(check, draws=False)
    check.set_defaults(handler=run_check)
    pack = actions.add_parser(
        "pack",
        help="write an image folder as WebDataset tar shards (for --data on nodes without a shared file system)",
        description="Writes DATA/train/<class>/* (and DATA/val or DATA/test) as OUT/train-000000.tar ..., "
        "OUT/val-000000.tar ... and OUT/shards.json (classes, each shard's count and size, the folder's "
        "fingerprint) and OUT/members.npz (where each image lies in its tar). Images keep their encoded "
        "bytes; training images are written in a seeded shuffled order. Every command takes OUT as --data "
        "and gets the folder's results; the trainers stream it unless --shard-reading index. Every image is "
        "decoded first (the folder's check manifest is reused): a corrupt one is refused, or skipped with "
        "--skip-corrupt.",
    )
    pack.add_argument("data", metavar="DATA", help="image folder with train/<class>/* (and val/ or test/)")
    pack.add_argument("--out", required=True, metavar="SHARDS", help="shard folder to write (new, empty or a pack)")
    pack.add_argument(
        "--shard-size", type=positive_int, default=1000, help="images per shard (default: 1000, ~110 MB of ImageNet)"
    )
    pack.add_argument(
        "--skip-corrupt",
        action="store_true",
        help="leave out images that do not decode, with a warning naming each (default: refuse the folder)",
    )
    add_processes(pack, "checking")
    add_common(pack)
    pack.set_defaults(handler=run_pack)


def run_check(args: argparse.Namespace) -> int:
    """Run ``nas data check``: check the folder, print its summary; exit code 2 if a file is corrupt."""
    from nas.data.inspect import check_folder
    from nas.data.shard_index import is_shard_folder

    report = check_folder(args.data, args.workers)
    lines = [f"{report['data']}  (fingerprint {report['fingerprint']})"]
    for split, summary in report["splits"].items():
        per_class, width, height = summary["images_per_class"], summary["width"], summary["height"]
        lines.append(
            f"  {split}: {summary['images']} images in {summary['classes']} classes "
            f"({per_class['min']}-{per_class['max']} per class, median {per_class['median']}), "
            f"{summary['bytes'] / 2**20:.0f} MB"
        )
        if width:
            lines.append(
                f"    size: width {width['min']}-{width['max']} (median {width['median']}), "
                f"height {height['min']}-{height['max']} (median {height['median']})"
            )
            lines.append("    modes: " + ", ".join(f"{mode} {n}" for mode, n in summary["modes"].items()))
    lines.append(
        f"  checked {report['checked']} images now ({report['images_per_s']:.0f} images/s, "
        f"{report['workers']} processes), {report['reused']} unchanged since an earlier check; "
        f"manifest {report['manifest']}"
    )
    lines += [f"  corrupt: {c['path']}: {c['error']}" for c in report["corrupt"]]
    emit(report, args.json, lines)
    if report["corrupt"]:
        fix = "pack the shards again from an intact folder" if is_shard_folder(args.data) else "remove or replace them"
        sys.stderr.write(f"nas: error: {len(report['corrupt'])} corrupt images (listed above); {fix}\n")
        return 2
    return 0


def run_pack(args: argparse.Namespace) -> int:
    """Run ``nas data pack``: write DATA's shards into --out and print what was written; return the exit code."""
    from nas.data.pack import pack

    index = pack(
        args.data,
        args.out,
        shard_size=args.shard_size,
        seed=args.seed,
        skip_corrupt=args.skip_corrupt,
        workers=args.workers,
    )
    lines = [f"shards       {args.out}  ({len(index['classes'])} classes)"]
    for split, shards in index["splits"].items():
        images = sum(s["samples"] for s in shards)
        mb = sum(s["bytes"] for s in shards) / 2**20
        lines.append(f"{split:<12} {images} images in {len(shards)} shards ({mb:.1f} MB)")
    lines.append(f"source       {index['source']} (fingerprint {index['source_fingerprint']})")
    lines += [f"skipped      {path} (does not decode)" for path in index["skipped"]]
    emit({"out": args.out, **index}, args.json, lines)
    return 0
