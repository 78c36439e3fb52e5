"""``nas check-table --device cpu --space S``: a table's sums against end-to-end measurements."""

from __future__ import annotations

import argparse

from nas.cli.common import add_busy_arg, add_common, add_device_arg, emit, image_size, nonneg_int, positive_int
from nas.core.errors import NasError
from nas.latency.devices import local_devices


def add_parser(sub) -> None:
    """Register the ``nas check-table`` subcommand on ``sub``."""
    p = sub.add_parser(
        "check-table",
        help="check a local table against end-to-end latency",
        description="Times the named members and a few random sub-networks end to end and "
        "compares them with the table's sums (median absolute percentage error).",
    )
    add_device_arg(p, local_devices(), "a local device:")
    p.add_argument("--space", required=True, help="search space (name or YAML path)")
    p.add_argument("--img-size", type=image_size, default=224, help="input side the networks are timed at")
    p.add_argument("--table", help="table file (default: the device's table for the space)")
    p.add_argument(
        "--random", type=nonneg_int, default=4, help="random sub-networks besides the named ones (default 4)"
    )
    p.add_argument("--repeats", type=positive_int, default=20, help="timed runs per network")
    add_busy_arg(p)
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas check-table``: time the named members and random sub-networks end to end and print
    the table's error on each; return the exit code."""
    from nas.config.spaces import load_space
    from nas.latency import LatencyTable, get_device
    from nas.latency.measure import (
        Timer,
        TimingConfig,
        check_archs,
        check_table,
        median_ape,
    )

    device = get_device(args.device)
    if device.kind != "local":
        raise NasError(
            f"{args.device} cannot be timed here ({device.description}); its table's error is the "
            "predictor's leave-one-model-out error shown by `nas build-table`"
        )
    space = load_space(args.space)
    table = LatencyTable.load(args.device, space, args.img_size, path=args.table)
    timing = TimingConfig(min_repeats=args.repeats, threads=table.header.threads or 1, busy_retries=args.busy_retries)
    timer = Timer(args.device, timing)
    rows = check_table(table, space, timer, check_archs(space, args.random, args.seed + 100))
    med = median_ape(rows)
    mean = sum(r.ape for r in rows) / len(rows)
    lines = [f"{'network':<28}{'table ms':>10}{'measured ms':>13}{'error':>9}"]
    lines += [f"{r.name:<28}{r.table_ms:>10.3f}{r.measured_ms:>13.3f}{100 * r.ape:>8.1f}%" for r in rows]
    lines.append(
        f"median absolute percentage error {100 * med:.1f}% (mean {100 * mean:.1f}%) over {len(rows)} networks "
        f"({table.describe_source()})"
    )
    busy = timer.busy_words()
    if busy:
        lines.append(f"busy machine: {busy}")
    emit(
        {
            "table": str(table.path),
            "median_ape": med,
            "mean_ape": mean,
            "rows": [dict(r.__dict__, ape=r.ape) for r in rows],
            "busy_guard": timer.busy_record(),
        },
        args.json,
        lines,
    )
    return 0
