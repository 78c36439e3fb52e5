"""``nas export ARCH --format onnx|coreml|executorch --out PATH``: a deployable file of a fixed architecture."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, emit, image_size, positive_int


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
    p.add_argument(
        "--img-size", type=image_size, help="input side of the exported network (default: the checkpoint's, else 224)"
    )
    p.add_argument("--num-classes", type=positive_int, help="classifier outputs (default: the checkpoint's, else 1000)")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas export``: write ARCH as an ONNX or ExecuTorch file (checked against PyTorch) or a Core ML
    package; return the exit code."""
    from nas.config.spaces import find_space
    from nas.export import export

    label, arch = "the checkpoint's architecture", None
    if args.arch:
        label, arch = find_space(args.arch, args.space).resolve(args.arch)
    result = export(arch, args.format, args.out, args.img_size, args.num_classes, args.checkpoint, args.seed)
    shape = f"{result['img_size']}x{result['img_size']} input, {result['num_classes']} classes"
    lines = [f"wrote {result['path']} ({label}, {args.format}, {shape})"]
    if args.format == "onnx":
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
