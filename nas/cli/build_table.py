"""``nas build-table --device D --space S``: a latency table, measured here or predicted for a phone."""

from __future__ import annotations

import argparse
import logging

from nas.cli.common import (
    add_busy_arg,
    add_common,
    add_device_arg,
    add_input_args,
    add_quantize_arg,
    emit,
    positive_int,
)
from nas.core.errors import NasError
from nas.latency import DEVICES

log = logging.getLogger(__name__)


def add_parser(sub) -> None:
    """Register the ``nas build-table`` subcommand on ``sub``."""
    p = sub.add_parser(
        "build-table",
        help="build a latency table for a device and space",
        description="Local devices (cpu, onnxruntime-cpu, cuda, xnnpack: ExecuTorch's XNNPACK backend, the "
        "kernels Android apps ship; xnnpack-int8: the same with every block quantized to int8) are measured "
        "block by block and calibrated end to end; phones (iphone12, iphone14, pixel6) get a table predicted "
        "by a cost model fitted to published latencies, labelled as such (an int8 phone has none: its table "
        "is timed on it, nas export-blocks --quantize int8).",
    )
    add_device_arg(p, list(DEVICES))
    p.add_argument("--space", required=True, help="search space (name or YAML path)")
    add_input_args(p, "input side the blocks are timed at", "classifier outputs of the priced head", 224, 1000)
    p.add_argument("--out", help="where to write the table (default: latency_tables/DEVICE/SPACE-SIZE.json)")
    p.add_argument("--threads", type=positive_int, default=1, help="CPU threads while timing (default: 1)")
    p.add_argument("--repeats", type=positive_int, default=20, help="minimum timed runs per block (default: 20)")
    add_busy_arg(p)
    redo = p.add_mutually_exclusive_group()
    redo.add_argument("--resume", action="store_true", help="finish a partial table left by an interrupted build")
    redo.add_argument(
        "--recalibrate",
        action="store_true",
        help="keep the block timings of a complete measured table (--out or the default path) and time its "
        "calibration and check networks again (for a table calibrated while the machine was busy)",
    )
    add_quantize_arg(
        p, "int8: the device's int8 twin (xnnpack -> xnnpack-int8): every block quantized before it is timed"
    )
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas build-table``: measure (local device) or predict (phone) the table, save it and print
    its header, source and error; return the exit code."""
    from nas.config.spaces import load_space
    from nas.latency import get_device
    from nas.latency.devices import quantized_device

    args.device = quantized_device(args.device, args.quantize)
    device = get_device(args.device)
    space = load_space(args.space)
    if device.kind == "local":
        from nas.latency.measure import MeasurementPlan, TimingConfig, build_measured_table

        timing = TimingConfig(min_repeats=args.repeats, threads=args.threads, busy_retries=args.busy_retries)
        plan = MeasurementPlan(timing, seed=args.seed)
        table = build_measured_table(
            args.device,
            space,
            args.img_size,
            args.num_classes,
            plan,
            out=args.out,
            resume=args.resume,
            recalibrate=args.recalibrate,
        )
    else:
        if args.recalibrate:
            raise NasError(f"--recalibrate refits a measured table; {args.device}'s table is predicted, not timed here")
        from nas.latency.predicted import build_predicted_table

        table = build_predicted_table(args.device, space, args.img_size, args.num_classes)
        table.save(args.out)
    h = table.header
    lines = [
        f"table        {table.path}",
        f"device       {h.device} ({h.runtime}, {h.dtype}, batch {h.batch}"
        + (f", {h.threads} threads)" if h.threads else ")"),
        f"source       {h.source}",
        f"entries      {len(table.entries)} block signatures of space {h.space} at {h.img_size}x{h.img_size}",
    ]
    if h.source == "predicted":
        e = h.error
        fam, one = e["leave_one_family_out"], e["leave_one_model_out"]
        lines.append(
            f"error        nested leave-one-family-out mean APE {100 * fam['mean']:.1f}% "
            f"(signed {100 * fam['signed_mean']:+.1f}%); leave-one-model-out {100 * one['mean']:.1f}% "
            f"(signed {100 * one['signed_mean']:+.1f}%); {e['n_models']} published models; "
            f"MACs-proportional baseline {100 * e['macs_only_loo_mean']:.1f}%"
        )
        iv = e["interval"]
        lines.append(
            f"interval     {100 * iv['level']:.0f}%: x{iv['low_factor']:.2f} to x{iv['high_factor']:.2f} "
            f"of a prediction (held-out coverage {100 * iv['coverage_held_out']:.0f}%)"
        )
    else:
        cal = h.method["calibration"]
        lines.append(
            f"calibration  scale {cal['scale']:.3f}, offset {cal['offset_ms']:.3f} ms "
            f"(uncalibrated median APE {100 * cal['uncalibrated_median_ape']:.1f}%)"
        )
        lines.append(
            f"error        median APE vs end to end {100 * h.error['value']:.1f}% "
            f"on {len(h.error['checked_on'])} networks (max {100 * h.error['max']:.1f}%)"
        )
        outside = h.method.get("operators_outside_xnnpack")
        if outside is not None:
            lines.append(f"xnnpack      {outside_xnnpack_words(outside)}")
        from nas.latency.measure import busy_words

        busy = busy_words(h.method["busy_guard"]) if "busy_guard" in h.method else None
        if busy:
            lines.append(f"busy         {busy}")
    emit({"path": str(table.path), "header": h.__dict__, "entries": len(table.entries)}, args.json, lines)
    return 0


def outside_xnnpack_words(outside: dict[str, dict[str, int]]) -> str:
    """``4 of 52 blocks run operators outside XNNPACK: aten_index_tensor (3 blocks), ...``: which
    operators of an ``xnnpack`` table's blocks fell back to ExecuTorch's portable kernels."""
    blocks_per_op: dict[str, int] = {}
    for ops in outside.values():
        for op in ops:
            blocks_per_op[op] = blocks_per_op.get(op, 0) + 1
    n = sum(bool(ops) for ops in outside.values())
    if not n:
        return f"every operator of the {len(outside)} blocks ran on XNNPACK"
    listed = ", ".join(f"{op} ({k} blocks)" for op, k in sorted(blocks_per_op.items(), key=lambda t: (-t[1], t[0])))
    return f"{n} of {len(outside)} blocks run operators on portable kernels, outside XNNPACK: {listed}"
