"""``nas report RUN``: one self-contained HTML page of a run folder (supernet, training, search,
comparison or demo)."""

from __future__ import annotations

import argparse
from pathlib import Path

from nas.cli.common import add_common, emit


def add_parser(sub) -> None:
    """Register the ``nas report`` subcommand on ``sub``."""
    p = sub.add_parser(
        "report",
        help="one self-contained HTML page of a run folder",
        description="Writes RUN/report.html: the config, curves, search trajectory, Pareto front, "
        "comparison table and every latency with its source; plots are inline images, "
        "so the page opens offline.",
    )
    p.add_argument("run", metavar="RUN", help="a run folder of nas train-supernet, train, search, compare or demo")
    p.add_argument("--out", help="HTML file (default: RUN/report.html)")
    add_common(p, draws=False)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas report``: write the HTML page of the run folder and print its path; return the exit code."""
    from nas.reports.html import run_kind, write_report

    path = write_report(args.run, args.out)
    emit({"report": str(path), "kind": run_kind(Path(args.run))}, args.json, [f"wrote {path}"])
    return 0
