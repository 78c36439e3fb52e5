"""``nas import-table CSV --manifest M``: an ``imported`` table from timings taken on a phone."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, emit


def add_parser(sub) -> None:
    """Register the ``nas import-table`` subcommand on ``sub``."""
    p = sub.add_parser(
        "import-table",
        help="make a table from timings measured on a phone",
        description="Reads the CSV (id,latency_ms) filled in on the phone, or the output of the adb script "
        "(time_on_android.sh, ExecuTorch's executor_runner), for the blocks and networks "
        "of a `nas export-blocks` manifest and writes an `imported` latency table; "
        "with --refit the network timings calibrate the phone predictor (few-shot: a scale for 1-2 "
        "networks, a * prior + b * MACs + c for 3 or more).",
    )
    p.add_argument(
        "csv",
        metavar="TIMINGS",
        help="measurements.csv with the latency_ms column filled in, or the log time_on_android.sh printed",
    )
    p.add_argument("--manifest", required=True, help="manifest.json written by nas export-blocks")
    p.add_argument("--out", help="table path (default: latency_tables/DEVICE/SPACE-SIZE.json)")
    p.add_argument(
        "--refit",
        action="store_true",
        help="calibrate the predictor to the network timings; with only networks timed (no block), the "
        "calibrated predicted table is the device's table",
    )
    add_common(p, draws=False)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas import-table``: write an ``imported`` table from the phone timings in CSV (and refit
    the predictor with ``--refit``); return the exit code."""
    from nas.latency.onphone import import_table

    table, refitted = import_table(args.csv, args.manifest, args.out, args.refit)
    lines, result = [], {}
    if table is not None:
        lines += [
            f"table        {table.path}",
            f"source       {table.describe_source()}",
            f"entries      {len(table.entries)}",
        ]
        result = {"path": str(table.path), "error": table.header.error}
    if refitted is not None:
        e = refitted.header.error
        cal = e["calibration"]
        loo = cal["leave_one_out"]
        lines.append(
            f"refit        {refitted.path}: calibrated on {cal['k']} timed networks ({cal['method']}); "
            + (
                f"leave-one-out mean APE over them {100 * loo['mean']:.1f}%"
                if isinstance(loo, dict)
                else "error not estimated (fewer than 3 networks)"
            )
        )
        result["refit"] = {"path": str(refitted.path), "error": e}
    emit(result, args.json, lines)
    return 0
