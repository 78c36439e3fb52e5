"""Entry point of the ``nas`` console script."""

from __future__ import annotations

import logging
import os
import sys

from nas.cli import (
    build_table,
    check_table,
    compare,
    data,
    demo,
    export,
    export_blocks,
    headroom,
    import_table,
    profile,
    rank_check,
    report,
    sample,
    search,
    space,
    train,
    train_supernet,
)
from nas.cli.common import OneLineErrorParser, add_verbosity
from nas.core.errors import NasError
from nas.malloc import retain_freed_memory

SUBCOMMANDS = (
    profile,
    space,
    build_table,
    check_table,
    export_blocks,
    import_table,
    data,
    train_supernet,
    search,
    sample,
    train,
    headroom,
    compare,
    rank_check,
    export,
    demo,
    report,
)


def build_parser() -> OneLineErrorParser:
    """The ``nas`` argument parser, with every module of ``SUBCOMMANDS`` registered."""
    parser = OneLineErrorParser(
        prog="nas",
        description="Latency-aware architecture search for mobile vision transformers "
        "(EfficientFormer, EfficientFormerV2 and SwiftFormer supernets; greedy slimming to an MES, "
        "latency or size target; training, comparison and export of the result).",
    )
    add_verbosity(parser, default=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineErrorParser)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``nas`` command line on ``argv`` (default: ``sys.argv[1:]``) and return the exit code;
    a :class:`NasError` is one line on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0 if args.command is None else 2
    args.progress = not args.quiet  # the progress a long command shows on stderr (its request's field)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR if args.quiet else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        retain_freed_memory()  # before the command's first large tensor (nas.malloc)
        return int(args.handler(args) or 0)
    except NasError as exc:
        sys.stderr.write(f"nas: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("nas: interrupted\n")
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
