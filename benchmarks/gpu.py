"""The first GPU run, one command: every speed figure the engine has never measured on CUDA.

    python benchmarks/gpu.py                 # on a CUDA GPU: every figure in about 8 minutes
    python benchmarks/gpu.py --smoke         # anywhere, in about a minute: the same steps, tiny (a test runs it)

It generates an ImageNet-shaped image folder (1,000 classes, 5,000 + 1,000 JPEGs) and its WebDataset shards, then runs
the engine's own commands on them and reads their logs:

1. the supernet's sandwich step (``nas train-supernet``, the main EfficientFormerV2 space at 224 px):
   fp32, bf16 autocast, bf16 with channels-last, and bf16 with channels-last from the shards. For each:
   images per second and the data-wait fraction (the trainer's own ``metrics.jsonl``, the last window,
   after warm-up) and peak GPU memory. ``torch.compile`` is not applied to a supernet (its graph changes
   every step; the recipe's ``compile`` is for fixed networks): it is measured on the fixed network;
2. fixed-network training of EfficientFormerV2-S0 (``nas train``), compile off and on, against timm's
   own ``efficientformerv2_s0`` stepped in a plain loop in this process on the same batch size, precision
   and layout (the ratio: ours over timm's, which reads no data);
3. supernet evaluation: sub-networks scored per minute (BatchNorm recalibrated, the search split scored)
   with the weights of step 1;
4. ``nas build-table --device cuda`` for the tiny space and ``nas check-table``'s error.

One line per figure on stdout and every figure in ``--out`` (JSON, rewritten after each figure, so a run
cut short keeps what it measured). ``--smoke`` runs every step on the CPU at 32 px with a few steps: it
checks the script, not the speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
#: A space of a handful of blocks: the smoke run's latency table times it in seconds.
MICRO_SPACE = ROOT / "tests" / "fixtures" / "efficientformerv2-micro.yaml"


def _write_images(task: tuple[str, int, int, int]) -> None:
    """One class folder of smooth random JPEGs (low-frequency noise: ImageNet-sized files, quickly)."""
    folder, count, side, seed = task
    rng = np.random.default_rng(seed)
    Path(folder).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        coarse = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
        image = Image.fromarray(coarse).resize((side, side), Image.BILINEAR)
        image.save(Path(folder) / f"{i:03d}.jpg", quality=90)


def make_folder(root: Path, classes: int, train: int, val: int, side: int) -> Path:
    """``root/train/<class>/*.jpg`` and ``root/val/<class>/*.jpg``, in parallel."""
    tasks = [
        (str(root / split / f"n{c:05d}"), count, side, 1000 * c + (split == "val"))
        for split, count in (("train", train), ("val", val))
        for c in range(classes)
    ]
    with ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
        list(pool.map(_write_images, tasks, chunksize=16))
    return root


class Figures:
    """The figures measured so far: printed one per line and kept in a JSON file."""

    def __init__(self, out: Path, header: dict):
        self.out, self.data = out, {"header": header, "figures": {}}
        out.parent.mkdir(parents=True, exist_ok=True)
        self._save()

    def add(self, key: str, value, text: str) -> None:
        self.data["figures"][key] = value
        print(f"{key:<44} {text}", flush=True)
        self._save()

    def _save(self) -> None:
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1) + "\n")
        tmp.replace(self.out)


def nas(*argv: str, timeout: float) -> str:
    """Run ``nas ARGV`` (this checkout's) and return its stdout; a failure ends the script with its stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "nas", *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    if proc.returncode != 0:
        raise SystemExit(f"nas {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def last_window(run: Path) -> dict:
    """The last ``metrics.jsonl`` record of a training: its steady state after the first windows."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    windows = [r for r in records if "images_per_s" in r]
    if not windows:
        raise SystemExit(f"{run}: no training window in metrics.jsonl")
    return windows[-1]


def speed_words(window: dict) -> str:
    memory = window.get("peak_memory_mb")
    return f"{window['images_per_s']:.0f} img/s, data wait {100 * window['data_wait']:.0f}%" + (
        f", peak memory {memory / 1024:.1f} GiB" if memory is not None else ""
    )


def timm_images_per_s(batch: int, side: int, amp: str, channels_last: bool, steps: int, device: str) -> float:
    """timm's own EfficientFormerV2-S0 stepped on one random batch (no data loading): images per second."""
    import timm

    model = timm.create_model("efficientformerv2_s0", num_classes=1000, img_size=side).to(device).train()
    x = torch.randn(batch, 3, side, side, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dtype = torch.bfloat16 if amp == "bf16" else None

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    for _ in range(3):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    return batch * steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="every step, tiny, on the CPU (checks the script)")
    parser.add_argument("--out", default=None, help="JSON of every figure (default: runs/gpu[-smoke]/gpu.json)")
    parser.add_argument("--work", default=None, help="where the images, shards and runs go (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=None, help="training steps per configuration")
    args = parser.parse_args()

    smoke = args.smoke
    device = "cuda" if torch.cuda.is_available() and not smoke else "cpu"
    if not smoke and device != "cuda":
        raise SystemExit("no CUDA GPU is visible: run with --smoke to check the script on the CPU")
    side, batch = (32, 8) if smoke else (224, 128)
    steps = args.steps or (2 if smoke else 30)
    log_every = 1 if smoke else 10
    classes, train_per_class, val_per_class = (4, 6, 2) if smoke else (1000, 5, 1)
    work = Path(args.work or tempfile.mkdtemp(prefix="nas-gpu-"))
    out = Path(args.out or ROOT / "runs" / ("gpu-smoke" if smoke else "gpu") / "gpu.json")
    started = time.perf_counter()
    header = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (smoke)",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "img_size": side,
        "batch_size": batch,
        "steps": steps,
        "smoke": smoke,
        "date": time.strftime("%Y-%m-%d"),
        # a tree copied to a GPU machine may hold no .git: NAS_COMMIT names the commit it was copied at
        "commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or os.environ.get("NAS_COMMIT", ""),
    }
    figures = Figures(out, header)
    print(f"# {header['device']}, torch {header['torch']}, {side} px, batch {batch}, {steps} steps per configuration")

    # -- data: an ImageNet-shaped folder and its shards ------------------------------------------------
    t0 = time.perf_counter()
    folder = make_folder(work / "images", classes, train_per_class, val_per_class, 256 if not smoke else 40)
    shards = work / "shards"
    nas("data", "pack", str(folder), "--out", str(shards), timeout=600)
    figures.add(
        "data.generate_and_pack_s",
        round(time.perf_counter() - t0, 1),
        f"{time.perf_counter() - t0:.1f} s for {classes * (train_per_class + val_per_class)} images and their shards",
    )

    common = ["--img-size", str(side), "--batch-size", str(batch), "--max-steps", str(steps)]
    common += ["--log-every", str(log_every), "--epochs", "100", "--warmup-epochs", "0", "--recipe", "imagenet"]
    space = ["--space", "efficientformerv2-tiny"] if smoke else []
    held_out = ["--search-fraction", "0.2"]  # the supernet's search split: what step 3 scores on

    # -- 1. the supernet's sandwich step ---------------------------------------------------------------
    configs = [("fp32", "none", "false", folder), ("bf16", "bf16", "false", folder)]
    configs += [("bf16-channels-last", "bf16", "true", folder), ("bf16-channels-last-shards", "bf16", "true", shards)]
    supernet_run = None
    for name, amp, channels_last, data in configs:
        run = work / "runs" / f"supernet-{name}"
        nas(
            "train-supernet", "efficientformerv2", *space, "--data", str(data), "--run", str(run), *common, *held_out,
            "--amp", amp, "--channels-last", channels_last, timeout=900,
        )  # fmt: skip
        window = last_window(run)
        figures.add(
            f"supernet.sandwich.{name}",
            {k: window.get(k) for k in ("images_per_s", "data_wait", "data_ms", "peak_memory_mb")},
            speed_words(window),
        )
        supernet_run = supernet_run or run
    figures.add("supernet.sandwich.compile", None, "not applied: a supernet's graph changes every step")

    # -- 2. fixed-network training against timm's own model ---------------------------------------------
    for compile_ in ("false", "true"):
        if compile_ == "true" and device != "cuda":
            figures.add("train.s0.bf16-channels-last-compile", None, "skipped: the recipe compiles on CUDA only")
            continue
        run = work / "runs" / f"s0-compile-{compile_}"
        nas(
            "train", "efficientformerv2_s0", "--data", str(folder), "--run", str(run), *common,
            "--amp", "bf16", "--channels-last", "true", "--compile", compile_, timeout=900,
        )  # fmt: skip
        window = last_window(run)
        key = "train.s0.bf16-channels-last" + ("-compile" if compile_ == "true" else "")
        figures.add(
            key, {k: window.get(k) for k in ("images_per_s", "data_wait", "peak_memory_mb")}, speed_words(window)
        )
    ours = figures.data["figures"]["train.s0.bf16-channels-last"]["images_per_s"]
    theirs = timm_images_per_s(batch, side, "bf16", True, steps, device)
    figures.add(
        "train.s0.timm_own_model_images_per_s",
        {"images_per_s": theirs, "ours_over_timm": ours / theirs},
        f"{theirs:.0f} img/s (timm's model, one batch, no data); ours over timm's {ours / theirs:.2f}",
    )

    # -- 3. supernet evaluation throughput ---------------------------------------------------------------
    import random

    from nas import load_space
    from nas.search.evaluator import SubnetEvaluator
    from nas.search.supernet_run import SupernetRun

    spec = SupernetRun.read(supernet_run).eval_spec(
        bn_calib_batches=2 if smoke else 8, search_images=64 if smoke else 2000
    )
    evaluator = SubnetEvaluator(spec, device=device)
    space_ = load_space(spec.space)
    rng = random.Random(0)
    archs = [space_.sample(rng) for _ in range(3 if smoke else 20)]
    evaluator.accuracy(archs[0])  # warm-up: kernels, caches
    start = time.perf_counter()
    for arch in archs[1:]:
        evaluator.accuracy(arch)
    per_minute = 60 * (len(archs) - 1) / (time.perf_counter() - start)
    figures.add(
        "search.subnets_scored_per_minute",
        {"per_minute": per_minute, "images": evaluator.images(), "calib_batches": spec.fidelity.calib_batches},
        f"{per_minute:.0f} sub-networks per minute ({evaluator.images()} images, "
        f"{spec.fidelity.calib_batches} BatchNorm calibration batches each)",
    )

    # -- 4. a measured latency table and its error ---------------------------------------------------------
    table_space = "efficientformerv2-tiny"
    if smoke:
        table_space = str(MICRO_SPACE)
    table = work / "table.json"
    table_args = [
        "--device",
        device,
        "--space",
        table_space,
        "--img-size",
        str(side),
        "--repeats",
        "5" if smoke else "20",
    ]
    built = json.loads(nas("build-table", *table_args, "--out", str(table), "--json", timeout=900))
    checked = json.loads(nas("check-table", *table_args, "--table", str(table), "--json", timeout=900))
    errors = [r["ape"] for r in checked["rows"]]
    figures.add(
        f"latency.{device}.table",
        {"entries": built["entries"], "median_ape": statistics.median(errors), "mean_ape": statistics.fmean(errors)},
        f"{built['entries']} blocks; check-table error median {100 * statistics.median(errors):.1f}%, "
        f"mean {100 * statistics.fmean(errors):.1f}% over {len(errors)} networks",
    )
    figures.add("wall_s", round(time.perf_counter() - started, 1), f"{time.perf_counter() - started:.0f} s in all")
    print(f"# wrote {out}")


if __name__ == "__main__":
    main()
