"""Training throughput of ``nas compare``: networks trained one after another in this process
against the same networks as Ray tasks.

    python benchmarks/compare_workers.py [--networks 4] [--steps 60] [--workers 2]
    python benchmarks/compare_workers.py --space efficientformerv2 --recipe cifar10-rank --data DATA

Trains ``--networks`` random sub-networks of ``--space`` (default the tiny EfficientFormerV2 space)
for ``--steps`` steps each with ``--recipe`` on ``--data`` (default: the demo recipe on
scikit-learn's digits, batch 64, 32x32), first in-process (torch's default thread count), then on
``--workers`` Ray workers of one thread each (Ray start-up included), and prints both wall times
and the speed-up (the reference is the in-process run, measured in the same run).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import tempfile
import time
from pathlib import Path

import torch

from nas.config.recipe import load_recipe
from nas.config.spaces import load_space
from nas.studies.trainings import TrainingPool, train_all
from nas.train.fixed import FixedTrainingRequest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--space", default="efficientformerv2-tiny")
    parser.add_argument("--recipe", default="demo")
    parser.add_argument("--data", help="image folder (default: scikit-learn's digits)")
    args = parser.parse_args()

    space = load_space(args.space)
    rng = random.Random(args.seed)
    archs = [space.sample(rng) for _ in range(args.networks)]
    recipe = dataclasses.replace(load_recipe(args.recipe), epochs=100)  # the steps, not the epochs, stop it

    def jobs(root: Path) -> list:
        return [
            FixedTrainingRequest(
                a,
                recipe=recipe,
                data=args.data,
                run=root / f"net-{i}",
                seed=args.seed,
                progress=False,
                max_steps=args.steps,
                label=f"net-{i}",
                space=space.name,
            )
            for i, a in enumerate(archs)
        ]

    timings = {}
    for label, workers in (("in-process", 0), (f"{args.workers} Ray workers", args.workers)):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            train_all(jobs(Path(tmp)), TrainingPool(workers, None, threads_per_worker=1))
            timings[label] = time.perf_counter() - start
    base, ray_time = timings["in-process"], timings[f"{args.workers} Ray workers"]
    data = args.data or "digits"
    print(
        f"# compare training: {args.networks} networks of {space.name} x {args.steps} steps (recipe {args.recipe}, "
        f"batch {recipe.batch_size}, {recipe.img_size}x{recipe.img_size}, {data}), "
        f"in-process with {torch.get_num_threads()} threads vs {args.workers} Ray workers x 1 thread, "
        f"torch {torch.__version__}"
    )
    print(f"in-process {base:.1f} s   Ray {ray_time:.1f} s   speed-up {base / ray_time:.2f}")


if __name__ == "__main__":
    main()
