"""``nas export ARCH --format onnx|coreml|executorch --out PATH``: a deployable file of a fixed architecture."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, add_input_args, add_quantize_arg, emit, positive_int


def add_parser(sub) -> None:
    """Register the ``nas export`` subcommand on ``sub``."""
    p = sub.add_parser(
        "export",
        help="export an architecture to ONNX, Core ML or ExecuTorch",
        description="ONNX is checked against PyTorch with ONNX Runtime (max abs difference <= 1e-4); "
        "Core ML is an ML program for iOS 16; ExecuTorch is a .pte program lowered to XNNPACK (Android's "
        "CPU backend), checked against PyTorch in the runtime here (max abs difference <= 1e-4).",
    )
    p.add_argument(
        "arch",
        metavar="ARCH",
        nargs="?",
        help="a named member or an arch YAML (default: the architecture a --checkpoint from nas train records)",
    )
    p.add_argument("--format", required=True, choices=("onnx", "coreml", "executorch"), help="file format")
    p.add_argument("--out", required=True, help="output file (.onnx, .pte) or folder (.mlpackage)")
    p.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="trained weights: a nas train run folder or its checkpoint.pt, or a state dict (default: freshly "
        "initialised from --seed); its architecture, input size and class count are the defaults",
    )
    p.add_argument("--space", help="search space the ARCH belongs to")
    add_input_args(
        p,
        "input side of the exported network (default: the checkpoint's, else 224)",
        "classifier outputs (default: the checkpoint's, else 1000)",
    )
    q = p.add_argument_group("int8 (docs/how-to/ship-int8.md)")
    add_quantize_arg(
        q,
        "int8: for executorch, static int8 weights and activations (PT2E, XNNPACK's quantizer) calibrated on "
        "--calibration; for coreml, 8-bit weights (coremltools' linear quantization)",
    )
    q.add_argument(
        "--calibration",
        metavar="DATA",
        help="an image folder (train/ and val/ or test/, as --data) or shard folder: its training images calibrate "
        "the int8 network (needed for executorch), its validation images score the float and the int8 network",
    )
    q.add_argument(
        "--calibration-images",
        type=positive_int,
        default=256,
        help="training images that set the int8 activation ranges (default: 256)",
    )
    q.add_argument(
        "--eval-images",
        type=positive_int,
        help="validation images the float and int8 top-1 are measured on (default: all)",
    )
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas export``: write ARCH as an ONNX or ExecuTorch file (checked against PyTorch) or a Core ML
    package; return the exit code."""
    from nas.config.spaces import find_space
    from nas.core.errors import NasError
    from nas.export import export
    from nas.quantize import Int8Export

    if args.quantize is None and args.calibration:
        raise NasError("--calibration is read only with --quantize int8")
    int8 = None
    if args.quantize:
        int8 = Int8Export(args.calibration, args.calibration_images, args.eval_images, args.seed)
    label, arch = "the checkpoint's architecture", None
    if args.arch:
        label, arch = find_space(args.arch, args.space).resolve(args.arch)
    result = export(arch, args.format, args.out, args.img_size, args.num_classes, args.checkpoint, args.seed, int8)
    shape = f"{result['img_size']}x{result['img_size']} input, {result['num_classes']} classes"
    lines = [f"wrote {result['path']} ({label}, {args.format}{', int8' if int8 else ''}, {shape})"]
    if int8 is not None:
        lines += int8_lines(args.format, result["int8"])
    elif args.format == "onnx":
        lines.append(f"ONNX Runtime vs PyTorch: max abs difference {result['max_abs_diff']:.2e}")
    elif args.format == "executorch":
        fallback = result["operators"]["fallback"]
        lines.append(f"ExecuTorch {result['executorch']} vs PyTorch: max abs difference {result['max_abs_diff']:.2e}")
        lines.append(
            "outside XNNPACK (portable kernels): "
            + (", ".join(f"{op} x{n}" for op, n in fallback.items()) if fallback else "nothing")
        )
    emit(result, args.json, lines)
    return 0


def int8_lines(fmt: str, report: dict) -> list[str]:
    """What an int8 export says: how it was quantized, the runtime check, what stayed outside int8, and the
    float and int8 top-1 when data was given."""
    lines = [f"quantized    {report['scheme']}"]
    if fmt == "executorch":
        lines.append(
            f"runtime      ExecuTorch {report['executorch']} vs the int8 network in PyTorch on "
            f"{report['checked_on_images']} images: max difference {100 * report['max_relative_diff']:.2f}% of the "
            f"largest logit ({report['max_abs_diff']:.2e})"
        )
        fallback, floats = report["operators"]["fallback"], report["stayed_float"]
        lines.append(
            "outside      XNNPACK (portable kernels): "
            + (", ".join(f"{op} x{n}" for op, n in fallback.items()) if fallback else "nothing")
        )
        lines.append(
            "float        operators left in float: "
            + (", ".join(f"{op} x{n}" for op, n in floats.items()) if floats else "none")
        )
    else:
        lines.append(f"weights      {report['int8_weights']} weights 8-bit in the Core ML program")
    accuracy = report.get("accuracy")
    if accuracy is None:
        lines.append("accuracy     not measured (give --calibration DATA to score the float and int8 networks)")
    else:
        drop = 100 * (accuracy["float_top1"] - accuracy["int8_top1"])
        lines.append(
            f"top-1        float {100 * accuracy['float_top1']:.2f}%, int8 {100 * accuracy['int8_top1']:.2f}% "
            f"(int8 - float {-drop:+.2f} points) on {accuracy['images']}; int8 scored by {accuracy['int8_scored_by']}"
        )
    return lines
