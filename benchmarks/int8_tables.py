"""Does int8 change the ranking? A float and an int8 measured table of the same space, side by side.

    python benchmarks/int8_tables.py --float docs/results/android-xnnpack/efficientformerv2-tiny-64.json \\
        --int8 docs/results/android-xnnpack-int8/efficientformerv2-tiny-64.json --out docs/results/android-xnnpack-int8

Prices the same ``--networks`` random sub-networks (seeded) with both tables and prints Kendall's tau between
the two rankings (1: int8 keeps the float order), the int8 speed-up per block kind (float entry over int8
entry, median over the kind's signatures: the reference is the float table measured on the same machine), and
which network is fastest under each. Writes ``int8-tables.json`` and ``int8-tables.txt``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

from scipy.stats import kendalltau

from nas import load_space
from nas.core.signature import BlockSignature
from nas.latency import LatencyTable
from nas.runs.provenance import code_version


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--float", dest="float_table", required=True)
    parser.add_argument("--int8", dest="int8_table", required=True)
    parser.add_argument("--networks", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tables = {"float": LatencyTable.read(args.float_table), "int8": LatencyTable.read(args.int8_table)}
    f, q = tables["float"].header, tables["int8"].header
    if (f.space, f.img_size, f.num_classes) != (q.space, q.img_size, q.num_classes):
        raise SystemExit("the two tables price different spaces, sizes or heads")
    space = load_space(f.space)
    rng = random.Random(args.seed)
    archs = [space.sample(rng) for _ in range(args.networks)]
    prices = {name: [table.latency(a) for a in archs] for name, table in tables.items()}
    tau, p_value = kendalltau(prices["float"], prices["int8"])
    ratios: dict[str, list[float]] = {}
    for key, float_ms in tables["float"].entries.items():
        int8_ms = tables["int8"].entries.get(key)
        if int8_ms and float_ms > 0:
            ratios.setdefault(BlockSignature.from_key(key).kind, []).append(float_ms / int8_ms)
    speedups = {kind: statistics.median(r) for kind, r in sorted(ratios.items())}
    whole = [fl / i8 for fl, i8 in zip(prices["float"], prices["int8"])]
    record = {
        "float_table": args.float_table,
        "int8_table": args.int8_table,
        "space": f.space,
        "img_size": f.img_size,
        "networks": args.networks,
        "seed": args.seed,
        "kendall_tau": tau,
        "kendall_p": p_value,
        "network_speedup_median": statistics.median(whole),
        "network_speedup_range": [min(whole), max(whole)],
        "block_kind_speedup_median": speedups,
        "block_kind_signatures": {kind: len(r) for kind, r in sorted(ratios.items())},
        "fastest": {name: archs[min(range(len(archs)), key=p.__getitem__)].digest for name, p in prices.items()},
        "code": code_version(),
    }
    lines = [
        f"{args.networks} random sub-networks of {f.space} at {f.img_size} px (seed {args.seed}), priced by both",
        f"Kendall tau, float ranking against int8 ranking: {tau:.3f} (p = {p_value:.2g})",
        f"whole-network int8 speed-up (float / int8 table sum): median {statistics.median(whole):.2f}x "
        f"(range {min(whole):.2f}x to {max(whole):.2f}x)",
        "int8 speed-up per block kind (float entry / int8 entry, median over its signatures):",
        *(f"  {kind:<16} {s:.2f}x over {len(ratios[kind])} signatures" for kind, s in speedups.items()),
        f"fastest of the {args.networks}: float {record['fastest']['float']}, int8 {record['fastest']['int8']}",
        f"tables: float {args.float_table} ({f.source} on {f.device}), int8 {args.int8_table} ({q.source} on "
        f"{q.device})",
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "int8-tables.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (out / "int8-tables.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
