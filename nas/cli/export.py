"""``nas export ARCH --format onnx|coreml --out PATH``: a deployable file of a fixed architecture."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, emit, image_size, positive_int


def add_parser(sub) -> None:
    """Register the ``nas export`` subcommand on ``sub``."""
    p = sub.add_parser(
        "export",
        help="export an architecture to ONNX or Core ML",
        description="ONNX is checked against PyTorch with ONNX Runtime (max abs difference <= 1e-4); "
        "Core ML is an ML program for iOS 16.",
    )
    p.add_argument("arch", metavar="ARCH", help="a named member or an arch YAML")
    p.add_argument("--format", required=True, choices=("onnx", "coreml"), help="file format")
    p.add_argument("--out", required=True, help="output file (.onnx) or folder (.mlpackage)")
    p.add_argument("--checkpoint", help="trained weights (default: freshly initialised)")
    p.add_argument("--space", help="search space the ARCH belongs to")
    p.add_argument("--img-size", type=image_size, default=224, help="input side of the exported network")
    p.add_argument(
        "--num-classes",
        type=positive_int,
        default=1000,
        help="classifier outputs (with --checkpoint: the trained network's)",
    )
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas export``: write ARCH as an ONNX (checked against PyTorch) or Core ML file; return the exit code."""
    from nas.export import export
    from nas.space_files import find_space

    space = find_space(args.arch, args.space)
    label, arch = space.resolve(args.arch)
    result = export(arch, args.format, args.out, args.img_size, args.num_classes, args.checkpoint)
    lines = [f"wrote {result['path']} ({label}, {args.format})"]
    if "max_abs_diff" in result:
        lines.append(f"ONNX Runtime vs PyTorch: max abs difference {result['max_abs_diff']:.2e}")
    emit(result, args.json, lines)
    return 0
