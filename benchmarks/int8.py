"""Float against int8, measured: trained networks exported both ways, with their latency and top-1.

    python benchmarks/int8.py --data ../shared/data/cifar10 \\
        --network efficientformerv2_s1=runs/COMPARISON/runs/efficientformerv2_s1 ... --out docs/results/int8

For each ``NAME=RUN`` (a ``nas train`` run folder or checkpoint), as ``nas export`` writes them:

- the float ExecuTorch program (XNNPACK) and the int8 one (PT2E, XNNPACK's quantizer, calibrated on
  ``--calibration-images`` training images), each checked in the runtime;
- both programs timed end to end in the runtime here (batch 1, ``--threads`` XNNPACK threads, the
  process pinned): the int8 time is reported as a speed-up over the float one measured in the same run;
- top-1 on the validation split: the float network in PyTorch (its program matches it within 1e-4) and
  the int8 program image by image, and Core ML's 8-bit weights (rounded as coremltools rounds them,
  scored in PyTorch: Core ML runs on Apple OSes only).

Writes ``int8.json`` and ``int8.txt`` (the table printed) to ``--out``, with the commit, the machine and
the wall time.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from nas.export import export
from nas.latency.measure import Timer, TimingConfig
from nas.latency.xnnpack import Program
from nas.quantize import Int8Export
from nas.runs.provenance import code_version, environment


def measure(name: str, run: str, args: argparse.Namespace, timer: Timer, tmp: Path) -> dict:
    """One network's float and int8 exports, their end-to-end times and top-1."""
    started = time.monotonic()
    plan = Int8Export(args.data, args.calibration_images, args.eval_images, args.seed)
    float_pte, int8_pte = tmp / f"{name}.pte", tmp / f"{name}-int8.pte"
    exported = export(None, "executorch", float_pte, checkpoint=run, seed=args.seed)
    int8 = export(None, "executorch", int8_pte, checkpoint=run, seed=args.seed, int8=plan)["int8"]
    coreml = export(None, "coreml", tmp / f"{name}-int8.mlpackage", checkpoint=run, seed=args.seed, int8=plan)["int8"]
    size = exported["img_size"]
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    float_ms = timer.time_program(Program(float_pte), x)
    int8_ms = timer.time_program(Program(int8_pte), x)
    return {
        "name": name,
        "run": run,
        "img_size": size,
        "float_ms": float_ms,
        "int8_ms": int8_ms,
        "int8_speedup": float_ms / int8_ms,
        "float_top1": int8["accuracy"]["float_top1"],
        "int8_top1": int8["accuracy"]["int8_top1"],
        "coreml_int8_weights_top1": coreml["accuracy"]["int8_top1"],
        "scored_on": int8["accuracy"]["images"],
        "int8_check_max_relative_diff": int8["max_relative_diff"],
        "float_program_max_abs_diff": exported["max_abs_diff"],
        "outside_xnnpack_int8": int8["operators"]["fallback"],
        "stayed_float": int8["stayed_float"],
        "float_pte_bytes": float_pte.stat().st_size,
        "int8_pte_bytes": int8_pte.stat().st_size,
        "wall_s": round(time.monotonic() - started, 1),
    }


def table_lines(rows: list[dict]) -> list[str]:
    lines = [
        f"{'network':<28} {'float ms':>9} {'int8 ms':>8} {'speed-up':>8} {'float top-1':>11} "
        f"{'int8 top-1':>10} {'change':>7} {'Core ML 8-bit w':>15} {'MB f/i8':>10}"
    ]
    for r in rows:
        lines.append(
            f"{r['name']:<28} {r['float_ms']:>9.3f} {r['int8_ms']:>8.3f} {r['int8_speedup']:>7.2f}x "
            f"{100 * r['float_top1']:>10.2f}% {100 * r['int8_top1']:>9.2f}% "
            f"{100 * (r['int8_top1'] - r['float_top1']):>+7.2f} {100 * r['coreml_int8_weights_top1']:>14.2f}% "
            f"{r['float_pte_bytes'] / 1e6:>4.1f}/{r['int8_pte_bytes'] / 1e6:<4.1f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the image folder the networks were trained on")
    parser.add_argument("--network", action="append", required=True, metavar="NAME=RUN")
    parser.add_argument("--calibration-images", type=int, default=256)
    parser.add_argument("--eval-images", type=int, help="validation images scored (default: all)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    started = time.monotonic()
    timer = Timer("xnnpack", TimingConfig(threads=args.threads))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.network:
            name, _, run = spec.partition("=")
            rows.append(measure(name, run, args, timer, Path(tmp)))
            print("\n".join(table_lines(rows)[-1:]), flush=True)
    lines = table_lines(rows)
    lines.append(
        f"latency: end to end through ExecuTorch's XNNPACK backend on this machine ({platform.machine()}, "
        f"{args.threads} thread, pinned to CPU {timer.pinned_cpus}), median of blocked runs; top-1 on "
        f"{rows[0]['scored_on']}: float in PyTorch, int8 through its ExecuTorch program image by image, Core ML "
        "8-bit weights rounded as coremltools does and scored in PyTorch"
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "rows": rows,
        "options": {k: v for k, v in vars(args).items() if k != "out"},
        "code": code_version(),
        "environment": environment(),
        "wall_s": round(time.monotonic() - started, 1),
    }
    (out / "int8.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (out / "int8.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
