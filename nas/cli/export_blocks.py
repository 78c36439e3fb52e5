"""``nas export-blocks --device iphone12|pixel6 --space S --out DIR``: files to time on a phone."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, add_input_args, add_quantize_arg, emit, positive_int


def add_parser(sub) -> None:
    """Register the ``nas export-blocks`` subcommand on ``sub``."""
    p = sub.add_parser(
        "export-blocks",
        help="export every block as Core ML or ExecuTorch to time on a phone",
        description="Writes every reachable block of the space and every named member as a file the "
        "phone's runtime loads: a Core ML ML program (iOS 16) for an iPhone, an ExecuTorch program lowered "
        "to XNNPACK for an Android phone (with the operators XNNPACK left to portable kernels, and an adb "
        "script that times them all); plus a manifest.json and a measurements.csv to fill in "
        "(docs/how-to/measure-a-phone.md, docs/how-to/measure-an-android-phone.md); then run `nas import-table`.",
    )
    p.add_argument(
        "--device",
        required=True,
        metavar="{iphone12,iphone14,pixel6,pixel6-int8}",
        help="iphone12, iphone14 (Core ML) or pixel6 (ExecuTorch; pixel6-int8 or --quantize int8: quantized)",
    )
    p.add_argument(
        "--runtime",
        choices=("coreml", "executorch"),
        help="the phone's runtime (default: the device's own; an iPhone is timed through Core ML, pixel6 "
        "through ExecuTorch)",
    )
    p.add_argument("--space", required=True, help="search space (name or YAML path)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--run",
        metavar="PATH",
        help="a run folder or checkpoint (nas train or train-supernet) whose input size and class count the "
        "blocks and networks take",
    )
    add_input_args(
        p,
        "input side of the exported blocks (default: --run's, else 224)",
        "classifier outputs of the exported networks (default: --run's, else 1000)",
    )
    add_quantize_arg(
        p,
        "int8: every block and network quantized (PT2E, XNNPACK's quantizer), for pixel6: the table imported "
        "from its timings is pixel6-int8's",
    )
    p.add_argument("--no-networks", action="store_true", help="blocks only, no whole named members")
    p.add_argument("--limit", type=positive_int, help="export only the first N blocks (a trial run)")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas export-blocks``: write the space's blocks (and named members) as the phone runtime's
    files with a manifest and a CSV to fill in; return the exit code."""
    from nas.cli.build_table import outside_xnnpack_words
    from nas.config.spaces import load_space
    from nas.export import recorded_shape, shape_from
    from nas.latency.devices import quantized_device
    from nas.latency.onphone import BlockExport, export_blocks, export_runtime

    args.device = quantized_device(args.device, args.quantize)
    runtime = export_runtime(args.device, args.runtime)  # a wrong pair fails before the space loads
    args.img_size, args.num_classes = shape_from(
        recorded_shape(args.run) if args.run else None, args.img_size, args.num_classes
    )
    export = BlockExport(args.img_size, args.num_classes, not args.no_networks, args.limit, runtime, args.seed)
    manifest = export_blocks(args.device, load_space(args.space), args.out, export)
    blocks = [item for item in manifest["items"] if item["kind"] == "block"]
    n_nets = len(manifest["items"]) - len(blocks)
    result = {"out": args.out, "runtime": runtime, "blocks": len(blocks), "networks": n_nets}
    if runtime == "coreml":
        lines = [
            f"wrote {len(blocks)} blocks and {n_nets} networks as Core ML to {args.out}",
            f"next: time them on the {args.device} (docs/how-to/measure-a-phone.md),",
            f"      fill {args.out}/measurements.csv, then",
            f"      nas import-table {args.out}/measurements.csv --manifest {args.out}/manifest.json",
        ]
    else:
        outside = {item["key"]: item["operators"]["fallback"] for item in blocks}
        result["operators_outside_xnnpack"] = outside
        int8 = " int8" if "quantization" in manifest else ""
        lines = [
            f"wrote {len(blocks)} blocks and {n_nets} networks as{int8} ExecuTorch XNNPACK programs to {args.out} "
            f"(device {args.device})",
            f"xnnpack: {outside_xnnpack_words(outside)}",
            f"next: RUNNER=path/to/executor_runner bash {args.out}/time_on_android.sh > timings.log",
            "      (docs/how-to/measure-an-android-phone.md), then",
            f"      nas import-table timings.log --manifest {args.out}/manifest.json",
        ]
    emit(result, args.json, lines)
    return 0
