"""A training step under the ``nas`` command's glibc malloc settings against glibc's defaults.

    python benchmarks/malloc_settings.py [--members efficientformer_l1 ...] [--batch-size 64] [--img-size 64]

The settings are process-wide and set before the first large allocation, so each runs in its own
child process (``--malloc retain``: :func:`nas.runs.malloc.retain_freed_memory`, as the ``nas`` command
and its Ray workers run; ``--malloc system``: glibc's defaults). The two children build the same
named member as a static network with AdamW, and step in turn, one at a time, alternating which goes
first, so a pair sees nearly the same machine load (this machine is shared and noisy). Prints per
member the median ms per training step (forward, cross-entropy, backward, AdamW) of each, the median
ratio of the pairs (retain / system) with its interquartile range, the page faults per step of each,
and each child's peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CHOICES = ("retain", "system")


def child(args) -> None:
    """Answer each line on stdin with one timed training step, as JSON."""
    from nas.runs.malloc import retain_freed_memory

    retain_freed_memory(args.child)
    import torch

    from nas import load_space
    from supernets import build_supernet, extract

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    space_name, member = args.member.split(":")
    space = load_space(space_name)
    model = extract(build_supernet(space, img_size=args.img_size, num_classes=10), space.named(member)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.batch_size, 3, args.img_size, args.img_size, generator=generator)
    y = torch.randint(0, 10, (args.batch_size,), generator=generator)
    for _ in sys.stdin:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - start
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"seconds": elapsed, "faults": faults, "peak_mib": peak_mib}), flush=True)


def start_child(args, member: str, choice: str) -> subprocess.Popen:
    command = [sys.executable, __file__, "--child", choice, "--member", member, "--seed", str(args.seed)]
    command += ["--batch-size", str(args.batch_size), "--img-size", str(args.img_size), "--threads", str(args.threads)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def one_step(process: subprocess.Popen) -> dict:
    process.stdin.write("step\n")
    process.stdin.flush()
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"a child process stopped (exit code {process.wait()})")
    return json.loads(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--members",
        nargs="*",
        default=[
            "efficientformerv2:efficientformerv2_s0",
            "efficientformer:efficientformer_l1",
            "swiftformer:swiftformer_xs",
        ],
        help="SPACE:MEMBER named members",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", choices=CHOICES, help=argparse.SUPPRESS)
    parser.add_argument("--member", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    from datetime import datetime, timezone

    import torch

    from nas.runs.malloc import RETAIN_SETTINGS
    from nas.runs.provenance import code_version

    code, started = code_version(), time.perf_counter()
    print(
        f"# python benchmarks/malloc_settings.py: training step (forward, cross-entropy, backward, AdamW), "
        f"batch {args.batch_size}, {args.img_size}x{args.img_size}, {args.threads} threads, median of "
        f"{args.repeats} pairs, torch {torch.__version__}"
    )
    print(
        f"# commit {code['commit'][:12]}{' + uncommitted changes' if code['dirty'] else ''}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs; retain = "
        + ", ".join(f"{name}={value}" for name, (_, value) in RETAIN_SETTINGS.items())
        + "; system = glibc's defaults"
    )
    for member in args.members:
        children = {choice: start_child(args, member, choice) for choice in CHOICES}
        try:
            for _ in range(args.warmup):
                for process in children.values():
                    one_step(process)
            steps = {choice: [] for choice in CHOICES}
            for i in range(args.repeats):
                for choice in CHOICES if i % 2 else CHOICES[::-1]:
                    steps[choice].append(one_step(children[choice]))
        finally:
            for process in children.values():
                process.stdin.close()
                process.wait()
        seconds = {c: [s["seconds"] for s in steps[c]] for c in CHOICES}
        ratios = [a / b for a, b in zip(seconds["retain"], seconds["system"])]
        q1, mid, q3 = statistics.quantiles(ratios, n=4)
        line = f"{member.split(':')[1]:<22}"
        for c in CHOICES:
            line += (
                f"   {c} {statistics.median(seconds[c]) * 1e3:7.1f} ms, "
                f"{statistics.median(s['faults'] for s in steps[c]):6.0f} faults/step, "
                f"peak {steps[c][-1]['peak_mib']:.0f} MiB"
            )
        print(f"{line}   ratio retain/system {mid:.3f} (IQR {q1:.3f}-{q3:.3f})", flush=True)
    print(f"# wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
