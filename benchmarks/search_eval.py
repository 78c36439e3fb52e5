"""Sub-network evaluations per minute with 1 and 2 Ray workers, and a full search's wall time.

    python benchmarks/search_eval.py [--supernet RUN] [--evaluations 24]

Without ``--supernet`` it first trains a tiny EfficientFormerV2 supernet on the built-in digits for
a few steps (accuracy does not matter here, only the cost of evaluating). It then evaluates the
same set of distinct random sub-networks with 1 and with 2 Ray workers (a fresh pool each time,
actors warmed up before timing) and prints evaluations per minute and their ratio (target >= 1.6
on 2 cores), and the wall time of a full greedy search (MES target, 2 workers) on the tiny space.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from nas import load_space
from nas.cli import main as nas_main
from nas.search.pool import EvaluatorPool
from nas.search.supernet_run import SupernetRun


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--supernet", help="a supernet run folder (default: train a tiny one on digits)")
    parser.add_argument("--evaluations", type=int, default=24)
    parser.add_argument("--bn-calib-batches", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        supernet = args.supernet
        if supernet is None:
            supernet = str(Path(tmp) / "supernet")
            nas_main(
                [
                    "train-supernet",
                    "efficientformerv2",
                    "--space",
                    "efficientformerv2-tiny",
                    "--run",
                    supernet,
                    "--epochs",
                    "1",
                    "--batch-size",
                    "32",
                    "--max-steps",
                    "4",
                    "--bn-calib-batches",
                    "1",
                ]
            )
        spec = SupernetRun.read(supernet).eval_spec(args.bn_calib_batches)
        space = load_space(spec.space)
        rng = random.Random(args.seed)
        archs = list({a.digest: a for a in (space.sample(rng) for _ in range(10 * args.evaluations))}.values())
        archs = archs[: args.evaluations]
        rates = {}
        for workers in (1, 2):
            pool = EvaluatorPool(spec, workers=workers)
            try:
                pool(archs[:workers])  # warm up every actor (imports, data, supernet)
                pool._memory.clear()
                start = time.perf_counter()
                pool(archs)
                rates[workers] = len(archs) / (time.perf_counter() - start) * 60
            finally:
                pool.close()
        print(
            f"# search evaluation: space {space.name}, {len(archs)} distinct sub-networks, "
            f"{args.bn_calib_batches} BN calibration batches, "
            f"supernet {supernet if args.supernet else '(tiny, digits)'}"
        )
        print(f"1 worker  {rates[1]:7.1f} evaluations/min")
        print(f"2 workers {rates[2]:7.1f} evaluations/min   ratio {rates[2] / rates[1]:.2f}")
        start = time.perf_counter()
        nas_main(
            [
                "search",
                "--supernet",
                supernet,
                "--objective",
                "mes",
                "--target",
                "450",
                "--device",
                "iphone12",
                "--run",
                str(Path(tmp) / "search"),
                "--workers",
                "2",
                "--bn-calib-batches",
                str(args.bn_calib_batches),
            ]
        )
        print(f"full greedy search (MES 450 on iphone12, 2 workers): {time.perf_counter() - start:.0f} s wall")


if __name__ == "__main__":
    main()
