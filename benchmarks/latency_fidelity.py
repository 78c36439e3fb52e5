"""How right are the latency tables?

    python benchmarks/latency_fidelity.py [--space efficientformerv2] [--img-size 224] [--threads 1]

1. CPU: builds a measured table for the space (into a temporary folder), then times the named
   members and random sub-networks end to end and prints the table's median absolute percentage
   error, next to the uncalibrated block sum's error measured in the same run (the reference).
2. Phones: fits each phone predictor to the published latencies and prints its nested
   leave-one-model-out error, next to a MACs-proportional model's (the reference).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from nas import load_space
from nas.latency.measure import TimingConfig, build_measured_table
from nas.latency.predict import fit_cost_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="efficientformerv2")
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--random", type=int, default=6, help="random sub-networks in the check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-cpu", action="store_true")
    args = parser.parse_args()

    if not args.skip_cpu:
        start = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            table = build_measured_table(
                "cpu",
                load_space(args.space),
                args.img_size,
                timing=TimingConfig(threads=args.threads),
                out=Path(tmp) / "cpu.json",
                check_random=args.random,
                seed=args.seed,
                progress=False,
            )
        h = table.header
        cal = h.method["calibration"]
        print(
            f"# cpu table, space {args.space} at {args.img_size}, {args.threads} thread(s), "
            f"{len(table.entries)} blocks, built and checked in {time.time() - start:.0f} s"
        )
        print(
            f"cpu  median APE table vs end to end {100 * h.error['value']:.1f}% over {len(h.error['checked_on'])} "
            f"networks (max {100 * h.error['max']:.1f}%); uncalibrated block sum on the calibration networks "
            f"{100 * cal['uncalibrated_median_ape']:.1f}% (reference); scale {cal['scale']:.3f}, "
            f"offset {cal['offset_ms']:.3f} ms"
        )
    print("# phone predictors: nested leave-one-model-out absolute percentage error (reference: MACs-proportional)")
    for device in ("iphone12", "iphone14", "pixel6"):
        m = fit_cost_model(device)
        print(
            f"{device:<9} mean {100 * m.nested_loo_mean:5.1f}%  median {100 * m.nested_loo_median:5.1f}%  "
            f"(chosen model's LOO {100 * m.loo_mean:.1f}%; MACs-only {100 * m.macs_only_loo_mean:.1f}%; "
            f"ratio {m.nested_loo_mean / m.macs_only_loo_mean:.2f}; {len(m.fitted_on)} models; "
            f"grouping {m.grouping}, r={m.ratio:g})"
        )


if __name__ == "__main__":
    main()
