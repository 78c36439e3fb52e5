"""Does the search pick another network when it prices in int8? One budget, priced float and int8.

    python benchmarks/int8_search_choice.py --supernet runs/cifar10-v2-main-32px-seed0 \\
        --float-table docs/results/android-xnnpack/efficientformerv2-64.json \\
        --int8-table docs/results/android-xnnpack-int8/efficientformerv2-64.json \\
        --variant efficientformerv2_s0 --out docs/results/android-xnnpack-int8/search-choice

The budget is ``--variant``'s speed: its latency in the float table for the float search, in the int8 table
for the int8 search (the same network's speed, each way it can ship). Both searches run ``nas search`` with
the same supernet, strategy, seed and input size; the int8 one also scores its finalists quantized
(``--final-quantize int8``), as a user who ships int8 would run it. Then each pick is priced under both tables
and the two picks are compared choice by choice. Writes ``search-choice.json`` and ``search-choice.txt`` (and
the two search runs under ``--out``); the tables are copied into a private latency folder
(``NAS_LATENCY_DIR``), never into ``latency_tables/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from nas import ArchConfig, load_space
from nas.latency import LatencyTable
from nas.runs.provenance import code_version


def nas(args: list[str], env: dict[str, str]) -> dict:
    """Run ``nas ARGS --json`` and return what it printed."""
    proc = subprocess.run([sys.executable, "-m", "nas", *args, "--json"], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise SystemExit(f"nas {' '.join(args)} failed: {last}")
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--supernet", required=True)
    parser.add_argument("--float-table", required=True)
    parser.add_argument("--int8-table", required=True)
    parser.add_argument("--variant", default="efficientformerv2_s0", help="the network whose speed is the budget")
    parser.add_argument("--strategy", default="evolution")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--search-images", type=int, default=1000, help="images each sub-network is scored on (the study's 1000)"
    )
    parser.add_argument("--bn-calib-batches", type=int, default=2, help="BatchNorm calibration batches (the study's 2)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = {"float": LatencyTable.read(args.float_table), "int8": LatencyTable.read(args.int8_table)}
    header = tables["float"].header
    if (header.space, header.img_size) != (tables["int8"].header.space, tables["int8"].header.img_size):
        raise SystemExit("the two tables price different spaces or sizes")
    devices = {"float": header.device, "int8": tables["int8"].header.device}
    latency_dir = out / "latency_tables"
    for kind, path in (("float", args.float_table), ("int8", args.int8_table)):
        target = latency_dir / devices[kind] / f"{header.space}-{header.img_size}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    env = dict(os.environ, NAS_LATENCY_DIR=str(latency_dir))
    size = ["--img-size", str(header.img_size)]
    space = load_space(header.space)
    _, variant = space.resolve(args.variant)
    budgets = {kind: tables[kind].latency(variant) for kind in tables}
    searches, picks = {}, {}
    for kind in ("float", "int8"):
        run = out / f"search-{kind}"
        argv = ["search", "--supernet", args.supernet, "--objective", "latency", "--target", f"{budgets[kind]:.4f}"]
        argv += ["--device", devices[kind], *size, "--strategy", args.strategy, "--run", str(run)]
        argv += ["--search-images", str(args.search_images), "--bn-calib-batches", str(args.bn_calib_batches)]
        argv += ["--seed", str(args.seed)] + (["--final-quantize", "int8"] if kind == "int8" else [])
        argv += ["--resume"] if (run / "config.yaml").exists() else []
        started = time.time()
        result = nas(argv, env)
        searches[kind] = {"command": "nas " + " ".join(argv), "wall_s": round(time.time() - started, 1)}
        keys = ("digest", "accuracy", "search_accuracy", "latency_ms", "params", "final_quantize", "within_noise")
        searches[kind]["result"] = {k: result.get(k) for k in keys}
        picks[kind] = ArchConfig.from_dict(result["arch"])
    priced = {kind: {t: tables[t].latency(arch) for t in tables} for kind, arch in picks.items()}
    differing = {
        field: [getattr(picks["float"], field), getattr(picks["int8"], field)]
        for field in ("depths", "widths", "attention", "hidden_widths")
        if getattr(picks["float"], field) != getattr(picks["int8"], field)
    }
    record = {
        "supernet": args.supernet,
        "space": header.space,
        "img_size": header.img_size,
        "variant": args.variant,
        "budgets_ms": budgets,
        "tables": {"float": args.float_table, "int8": args.int8_table},
        "searches": searches,
        "picks": {kind: {"digest": arch.digest, "arch": arch.to_dict()} for kind, arch in picks.items()},
        "priced_ms": priced,
        "same_network": picks["float"].digest == picks["int8"].digest,
        "differing": differing,
        "code": code_version(),
    }
    lines = [
        f"budget: {args.variant}'s speed at {header.img_size} px: {budgets['float']:.3f} ms float "
        f"({devices['float']}), {budgets['int8']:.3f} ms int8 ({devices['int8']}); {args.strategy}, seed {args.seed}",
        *(
            f"{kind:<5} search picks {picks[kind].digest}: {priced[kind]['float']:.3f} ms float, "
            f"{priced[kind]['int8']:.3f} ms int8, supernet top-1 {100 * searches[kind]['result']['accuracy']:.2f}% "
            f"({searches[kind]['wall_s']:.0f} s)"
            for kind in ("float", "int8")
        ),
        "the same network" if record["same_network"] else f"different networks: {', '.join(differing) or 'choices'}",
        *(f"  {field}: float {a}, int8 {b}" for field, (a, b) in differing.items()),
    ]
    (out / "search-choice.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "search-choice.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
