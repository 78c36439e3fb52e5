"""Entry point of the ``nas`` console script."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap

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
from nas.runs.malloc import retain_freed_memory

# `nas --help` lists the commands in these groups, in this order (demo first: what a new user tries).
COMMAND_GROUPS = (
    ("start here", (demo,)),
    ("latency tables", (profile, build_table, check_table, export_blocks, import_table)),
    ("supernet and search", (data, train_supernet, search, sample)),
    ("training and studies", (train, compare, headroom, rank_check)),
    ("export", (export,)),
    ("tools", (space, report)),
)
SUBCOMMANDS = tuple(module for _, modules in COMMAND_GROUPS for module in modules)


def build_parser() -> OneLineErrorParser:
    """The ``nas`` argument parser, with every module of ``SUBCOMMANDS`` registered; its help lists them by
    :data:`COMMAND_GROUPS`."""
    parser = OneLineErrorParser(
        prog="nas",
        usage="nas [-h] [-v | -q] COMMAND ...",
        description="Latency-aware architecture search for mobile vision transformers "
        "(EfficientFormer, EfficientFormerV2 and SwiftFormer supernets; a search to an MES, latency or size "
        "target, constrained evolution by default or greedy slimming; training, comparison and export of the result).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_verbosity(parser, default=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineErrorParser, prog="nas")
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    helps = {action.dest: action.help for action in sub._choices_actions}
    names = {module: name for module, name in zip(SUBCOMMANDS, sub.choices)}
    width = max(len(name) for name in sub.choices) + 2
    lines = ["commands (nas COMMAND --help for its options):"]
    for title, modules in COMMAND_GROUPS:
        lines.append(f"  {title}:")
        lines += [f"    {names[m]:<{width}}{helps.get(names[m]) or ''}" for m in modules]
    parser.epilog = "\n".join(lines)
    parser.description = textwrap.fill(parser.description, 79)  # the raw formatter keeps the epilog's layout
    sub.help = argparse.SUPPRESS  # listed by group in the epilog instead of one flat list
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
        retain_freed_memory()  # before the command's first large tensor (nas.runs.malloc)
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
