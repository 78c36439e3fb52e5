"""``nas train``'s training step against a plain PyTorch step on the same static model and batch.

    python benchmarks/train_step.py [--arch efficientformerv2_s0] [--batch-size 64] [--img-size 32]

Times (median of interleaved repeats) one step of :class:`nas.train.fixed.FixedTrainer` as its
loop runs it (learning-rate schedule update, forward, loss, backward, gradient clipping, AdamW,
EMA update when ``--model-ema``) and, as the reference measured in the same run, a plain step on a
copy of the same model (forward, cross-entropy, backward, AdamW). Data loading is left out of
both: it is the same DataLoader for both. Prints the ratio (the shared loop should cost nothing:
about 1.0 without EMA).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import tempfile
import time

import torch

from nas.config.recipe import load_recipe
from nas.config.spaces import find_space
from nas.train.fixed import FixedTrainer, FixedTrainingRequest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="efficientformerv2_s0")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--img-size", type=int, default=32)
    parser.add_argument("--model-ema", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    label, arch = find_space(args.arch).resolve(args.arch)
    recipe = dataclasses.replace(
        load_recipe("demo"), batch_size=args.batch_size, img_size=args.img_size, model_ema=args.model_ema
    )
    with tempfile.TemporaryDirectory() as run:
        request = FixedTrainingRequest(
            arch, recipe=recipe, data=None, run=run, seed=args.seed, progress=False, label=label
        )
        trainer = FixedTrainer(request)
        plain_model = copy.deepcopy(trainer.net).train()
        plain_opt = torch.optim.AdamW(plain_model.parameters(), lr=1e-3)
        images, labels = next(iter(trainer.loader))
        trainer.net.train()

        def ours() -> float:
            start = time.perf_counter()
            trainer.scheduler.step_update(trainer.step)
            trainer.train_step(images, labels, None)
            trainer.step += 1
            if trainer.ema is not None:
                trainer.ema.update(trainer.net, step=trainer.step)
            return time.perf_counter() - start

        def plain() -> float:
            start = time.perf_counter()
            plain_opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(plain_model(images), labels).backward()
            plain_opt.step()
            return time.perf_counter() - start

        for _ in range(args.warmup):
            ours()
            plain()
        o_times, p_times = [], []
        for _ in range(args.repeats):
            o_times.append(ours())
            p_times.append(plain())
    o, p = statistics.median(o_times), statistics.median(p_times)
    print(
        f"# train step: {label}, batch {args.batch_size}, {args.img_size}x{args.img_size}, EMA "
        f"{'on' if args.model_ema else 'off'}, {torch.get_num_threads()} threads, median of {args.repeats}, "
        f"torch {torch.__version__}"
    )
    print(f"nas train step {o * 1e3:.1f} ms   plain PyTorch step {p * 1e3:.1f} ms   ratio {o / p:.3f}")


if __name__ == "__main__":
    main()
