"""Argument-parser pieces shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_common(parser: argparse.ArgumentParser, json_output: bool = True) -> None:
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def emit(result: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    """Print a command's result: JSON for machines, aligned text for people."""
    if as_json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(lines) + "\n")


def add_training_args(parser: argparse.ArgumentParser, default_run: str) -> None:
    """The options every training command shares (``nas train-supernet``, ``nas train``)."""
    from nas.recipe import add_recipe_overrides

    parser.add_argument("--recipe", default="demo", help="recipe name in search_configs/recipes/ or a YAML path")
    parser.add_argument("--data", help="image folder with train/<class>/* (and val/ or test/); "
                                       "default: scikit-learn's digits")
    parser.add_argument("--run", help=f"run folder (default: {default_run})")
    parser.add_argument("--resume", action="store_true", help="continue the run in --run from its checkpoint")
    parser.add_argument("--max-steps", type=int, help="stop after this many steps (the schedule still spans --epochs)")
    add_recipe_overrides(parser)
    add_common(parser)
