"""``nas data``: prepare a data set ahead of training (``nas data check``)."""

from __future__ import annotations

import argparse
import sys

from nas.cli.common import add_common, emit, positive_int


def add_parser(sub) -> None:
    """Register ``nas data`` and its subcommands on ``sub``."""
    p = sub.add_parser(
        "data",
        help="check a data folder ahead of training",
        description="Work on a data set before training on it.",
    )
    actions = p.add_subparsers(dest="data_command", metavar="ACTION", parser_class=type(p), required=True)
    check = actions.add_parser(
        "check",
        help="decode every image once and report what the folder holds",
        description="Decodes every image of DATA/train and DATA/val (or test) in worker processes and "
        "prints the images per split and class, their sizes and modes, and every corrupt file. What "
        "decoded is kept in a manifest ($NAS_DATA_CACHE, else ~/.cache/nas/data-check), so training "
        "commands and later checks decode only new or changed files. Exit code 2 when a file is corrupt.",
    )
    check.add_argument("data", metavar="DATA", help="image folder with train/<class>/* (and val/ or test/)")
    check.add_argument("--workers", type=positive_int, help="processes decoding images (default: every available core)")
    add_common(check)
    check.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Run ``nas data check``: check the folder, print its summary; exit code 2 if a file is corrupt."""
    from nas.data.inspect import check_folder

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
        sys.stderr.write(
            f"nas: error: {len(report['corrupt'])} corrupt images (listed above); remove or replace them\n"
        )
        return 2
    return 0
