"""One sandwich-rule step through the supernet against the four static sub-networks.

    python benchmarks/sandwich_step.py [--space efficientformerv2-tiny] [--batch-size 128] [--img-size 32]

Times (median of interleaved repeats) one step of the supernet trainer's inner loop: the largest,
the smallest and two random sub-networks, each forward+backward on the same batch with in-place
distillation, gradients accumulated in the shared weights; and, as the reference measured in the
same run, the sum of the same four sub-networks extracted as static models, each forward+backward
on the same batch. Prints the ratio (target: <= 1.15).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from timm.loss import SoftTargetCrossEntropy

from nas import load_space
from supernets import build_supernet, extract


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="efficientformerv2-tiny")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--img-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    space = load_space(args.space)
    rng = random.Random(args.seed)
    archs = [space.largest(), space.smallest(), space.sample(rng), space.sample(rng)]
    net = build_supernet(space, img_size=args.img_size, num_classes=10).train()
    statics = [extract(net, a).train() for a in archs]
    x = torch.randn(args.batch_size, 3, args.img_size, args.img_size)
    y = torch.randint(0, 10, (args.batch_size,))

    def step(forwards, params_owners) -> float:
        """Forward+backward of every sub-network on the batch, in-place distillation from the first."""
        start = time.perf_counter()
        for owner in params_owners:
            owner.zero_grad(set_to_none=True)
        soft = None
        for i, forward in enumerate(forwards):
            out = forward(x)
            if i == 0:
                loss = torch.nn.functional.cross_entropy(out, y)
                soft = out.detach().softmax(-1)
            else:
                loss = SoftTargetCrossEntropy()(out, soft)
            loss.backward()
        return time.perf_counter() - start

    supernet_forwards = [lambda inp, a=arch: net(inp, a) for arch in archs]

    def sandwich() -> float:
        return step(supernet_forwards, [net])

    def static_sum() -> float:
        return step(statics, statics)

    for _ in range(args.warmup):
        sandwich()
        static_sum()
    s_times, t_times = [], []
    for _ in range(args.repeats):
        s_times.append(sandwich())
        t_times.append(static_sum())
    s, t = statistics.median(s_times), statistics.median(t_times)
    print(
        f"# sandwich step: space {space.name}, batch {args.batch_size}, {args.img_size}x{args.img_size}, "
        f"{torch.get_num_threads()} threads, median of {args.repeats}, torch {torch.__version__}"
    )
    print(f"sandwich step {s * 1e3:.1f} ms   four static sub-networks {t * 1e3:.1f} ms   ratio {s / t:.3f}")


if __name__ == "__main__":
    main()
