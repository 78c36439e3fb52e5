"""Forward+backward time of a sub-network run through the supernet, against the same sub-network
extracted as a static model, measured in the same run (this machine is shared and noisy).

    python benchmarks/supernet_overhead.py [--spaces efficientformerv2 ...] [--batch-size 64] [--img-size 64]

For each space (default: the three families' main spaces) it times the smallest and the largest
named member. Prints one line per member with two measurements, each in its own loop of adjacent
pairs (one step of the supernet, one of the static network, alternating which runs first):

- ``supernet``: the supernet runs a sub-network it has run before as that sub-network's static model
  on its own tensors (``SharedWeightStatic``): what a repeated sub-network costs (the sandwich rule's
  smallest, a sub-network fine-tuned in the supernet);
- ``elastic``: the same step through the elastic ops (``static_cache_size = 0``): what a sub-network
  seen once costs (a random draw of the sandwich rule).

Each gives median ms per step for both models and the ratio to the static network (target: <= 1.03,
issue 16) as the median of the pairs' ratios, with their interquartile range, and as the ratio of the
medians: on a shared machine whose load drifts, a pair sees nearly the same load, where the medians
may not. A last column measures the repeated path's *fixed cost*, the milliseconds a step pays over
the static network whatever the batch (copies between the supernet's layout and the static one,
Python), as the median difference of adjacent pairs at ``--fixed-cost-batch`` (default 4), where a
step is short and the machine's noise small, and gives it as a share of the static step at the main
batch. That is the part of the overhead that does not grow with the batch, measured with less noise
than the ratio; a ratio above it is per-image cost or noise. ``zero_grad`` is the supernet's own,
as in training: it keeps the gradients that only in-place slices wrote for the next step
(``supernets.elastic_ops``).

glibc's malloc is set as the ``nas`` command sets it (``--malloc retain``, :mod:`nas.runs.malloc`: freed
memory stays in the process); ``--malloc system`` keeps glibc's defaults, under which both models
page-fault much of every step's memory in again, and a step's time depends on which blocks happen to
fault. The last line gives the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from datetime import datetime, timezone

import torch

from nas import load_space
from nas.metrics import count_params
from nas.runs.malloc import MALLOC_CHOICES, retain_freed_memory
from nas.runs.provenance import code_version
from supernets import build_supernet, extract


def step(model, x, arch=None) -> float:
    start = time.perf_counter()
    out = model(x, arch) if arch is not None else model(x)
    out.float().logsumexp(dim=1).mean().backward()
    elapsed = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return elapsed


KINDS = ("supernet", "elastic", "static")


def timed_step(kind: str, net, static, x, arch) -> float:
    if kind == "static":
        return step(static, x)
    if kind == "supernet":
        return step(net, x, arch)
    cache_size, net.static_cache_size = net.static_cache_size, 0  # the elastic ops' forward
    try:
        return step(net, x, arch)
    finally:
        net.static_cache_size = cache_size


def paired_times(kind: str, net, static, x, arch, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds per step of ``kind`` and of the static network, in adjacent pairs alternating which runs
    first: a step runs faster or slower after another kind (allocator and cache state), and a pair sees
    nearly the same machine load where the medians of a drifting run may not."""
    times, static_times = [], []
    for i in range(repeats):
        for k in (kind, "static") if i % 2 else ("static", kind):
            (times if k == kind else static_times).append(timed_step(k, net, static, x, arch))
    return times, static_times


def fixed_cost(net, static, x, arch, repeats: int) -> list[float]:
    """Seconds a repeated sub-network's step costs over the static network's, per adjacent pair."""
    for _ in range(3):
        for kind in ("supernet", "static"):
            timed_step(kind, net, static, x, arch)
    times, static_times = paired_times("supernet", net, static, x, arch, repeats)
    return [a - b for a, b in zip(times, static_times)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", nargs="*", default=["efficientformerv2", "efficientformer", "swiftformer"])
    parser.add_argument("--members", nargs="*", help="named members (default: smallest and largest named)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fixed-cost-batch", type=int, default=4, help="batch of the fixed-cost pairs (0: skip)")
    parser.add_argument("--fixed-cost-repeats", type=int, default=60)
    parser.add_argument(
        "--malloc", choices=MALLOC_CHOICES, default="retain", help="glibc malloc settings (nas.runs.malloc)"
    )
    args = parser.parse_args()

    malloc = retain_freed_memory(args.malloc)
    code, started = code_version(), time.perf_counter()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    print(
        f"# supernet overhead: batch {args.batch_size}, {args.img_size}x{args.img_size}, train mode, "
        f"forward+backward, {args.threads} threads, median of {args.repeats}, torch {torch.__version__}, "
        f"malloc {args.malloc} ({', '.join(f'{k}={v}' for k, v in malloc.items()) or 'glibc defaults'})"
    )
    print(
        f"# commit {code['commit'][:12]}{' + uncommitted changes' if code['dirty'] else ''}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs"
    )
    x = torch.randn(args.batch_size, 3, args.img_size, args.img_size)
    x_small = torch.randn(args.fixed_cost_batch, 3, args.img_size, args.img_size)
    for space_name in args.spaces:
        space = load_space(space_name)
        names = args.members or sorted(space.members, key=lambda n: count_params(space.named(n)))
        if not args.members:
            names = [names[0], names[-1]]
        net = build_supernet(space, img_size=args.img_size, num_classes=1000).train()
        for name in names:
            arch = space.named(name)
            static = extract(net, arch).train()
            for _ in range(args.warmup):
                for kind in KINDS:
                    timed_step(kind, net, static, x, arch)
            line = f"{space.name:<18} {name:<22}"
            for kind in ("supernet", "elastic"):
                times, static_times = paired_times(kind, net, static, x, arch, args.repeats)
                ratios = [a / b for a, b in zip(times, static_times)]
                q1, _, q3 = statistics.quantiles(ratios, n=4)
                median, static_median = statistics.median(times), statistics.median(static_times)
                line += (
                    f"   {kind} {median * 1e3:7.1f} ms / static {static_median * 1e3:7.1f} ms: ratio "
                    f"{statistics.median(ratios):.3f} (IQR {q1:.3f}-{q3:.3f}; of medians {median / static_median:.3f})"
                )
                if kind == "supernet":
                    static_at_batch = static_median
            if args.fixed_cost_batch:
                extra = fixed_cost(net, static, x_small, arch, args.fixed_cost_repeats)
                q1, mid, q3 = statistics.quantiles(extra, n=4)
                line += (
                    f"   fixed cost {mid * 1e3:.1f} ms (IQR {q1 * 1e3:.1f}-{q3 * 1e3:.1f}) at batch "
                    f"{args.fixed_cost_batch} = {mid / static_at_batch:.1%} of the static step at batch "
                    f"{args.batch_size}"
                )
            print(line, flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    print(
        f"# peak resident memory {peak:.0f} MiB (malloc {args.malloc}); wall time "
        f"{(time.perf_counter() - started) / 60:.1f} min"
    )


if __name__ == "__main__":
    main()
