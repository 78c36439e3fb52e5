"""Shards end to end at scale (issue 47): an ImageNet-layout folder of many classes is run through
``train-supernet``, ``search``, ``train`` and ``compare`` twice with the same seed: once from the folder,
once from its shards with the folder deleted (read by index, ``--shard-reading index``). Prints, per
command, whether the two results are identical and each one's wall time (the shards' run against the
folder's, as a ratio), and writes every figure to a JSON file.

    python benchmarks/shards_equivalence.py --classes 1000 --per-class 50 --out docs/results/shards-equivalence.json

The images are 32x32 JPEGs cut from scikit-learn's sample photographs (seeded crops, a colour shift
per class), so the folder is generated in a minute and nothing is downloaded. Every command runs a few
steps (``--steps``): what is compared is that both runs read the same images in the same order, not
what the networks learn.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from nas.runs.provenance import code_version

ROOT = Path(__file__).resolve().parents[1]


def make_folder(root: Path, classes: int, per_class: int, val_per_class: int, seed: int) -> None:
    """``classes`` classes of 32x32 JPEGs: seeded crops of the sample photographs, tinted per class."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    photos = [Image.fromarray(p) for p in load_sample_images().images]
    rng = random.Random(seed)
    for c in range(classes):
        tint = np.array([rng.randint(-40, 40) for _ in range(3)], dtype=np.int16)
        for split, n in (("train", per_class), ("val", val_per_class)):
            folder = root / split / f"c{c:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                photo = photos[rng.randrange(len(photos))]
                size = rng.randint(32, 96)
                x, y = rng.randint(0, photo.width - size), rng.randint(0, photo.height - size)
                crop = np.asarray(photo.crop((x, y, x + size, y + size)).resize((32, 32)), dtype=np.int16) + tint
                Image.fromarray(crop.clip(0, 255).astype(np.uint8)).save(folder / f"{i:04d}.jpg", quality=90)


def nas(*argv: str, cwd: Path) -> tuple[dict, float]:
    """Run ``nas ARGV --json`` in a fresh process; its JSON output and wall time."""
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "nas", *argv, "--json"], cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"nas {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout), seconds


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def mid_target(classes: int) -> int:
    """Parameters halfway between the tiny space's smallest and largest network at 32 px with a
    ``classes``-way head: a budget every run can meet."""
    from nas import load_space
    from nas.metrics import count_params

    space = load_space("efficientformerv2-tiny")
    return (count_params(space.smallest(), 32, classes) + count_params(space.largest(), 32, classes)) // 2


def pipeline(data: Path, work: Path, steps: int, seed: int, target: int) -> dict:
    """train-supernet, search, train and compare on ``data``; what each returned, its wall time."""
    cheap = ["--img-size", "32", "--batch-size", "64", "--eval-batch-size", "256", "--bn-calib-batches", "2"]
    cheap += ["--max-steps", str(steps), "--shard-reading", "index", "--seed", str(seed), "--recipe", "demo"]
    out = {}
    supernet = work / "supernet"
    out["train-supernet"] = nas(
        "train-supernet",
        "efficientformerv2",
        "--space",
        "efficientformerv2-tiny",
        "--data",
        str(data),
        "--run",
        str(supernet),
        *cheap,
        cwd=work,
    )
    search = work / "search"
    out["search"] = nas(
        "search",
        "--supernet",
        str(supernet),
        "--strategy",
        "random",
        "--set",
        "evaluations=8",
        "--objective",
        "params",
        "--target",
        str(target),
        "--run",
        str(search),
        "--seed",
        str(seed),
        cwd=work,
    )
    out["train"] = nas(
        "train", str(search / "arch.yaml"), "--data", str(data), "--run", str(work / "train"), *cheap, cwd=work
    )
    out["compare"] = nas(
        "compare",
        "--searched",
        str(search / "arch.yaml"),
        "--random",
        "1",
        "--objective",
        "params",
        "--data",
        str(data),
        "--out",
        str(work / "compare"),
        *cheap,
        cwd=work,
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--per-class", type=int, default=50, help="training images per class")
    parser.add_argument("--val-per-class", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4, help="steps of every training")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, help="working folder (default: a temporary one, removed)")
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    work = (args.work or Path(tempfile.mkdtemp(prefix="shards-equivalence-"))).resolve()  # commands run inside it
    began = time.perf_counter()
    folder, shards = work / "folder", work / "shards"
    make_folder(folder, args.classes, args.per_class, args.val_per_class, args.seed)
    images = args.classes * (args.per_class + args.val_per_class)
    print(f"folder: {args.classes} classes, {images} images ({time.perf_counter() - began:.0f} s to write)")
    (work / "on-folder").mkdir(exist_ok=True)
    target = mid_target(args.classes)
    on_folder = pipeline(folder, work / "on-folder", args.steps, args.seed, target)
    packed, pack_s = nas("data", "pack", str(folder), "--out", str(shards), cwd=work)
    shutil.rmtree(folder)  # from here on, the shards alone
    (work / "on-shards").mkdir(exist_ok=True)
    on_shards = pipeline(shards, work / "on-shards", args.steps, args.seed, target)
    a, b = work / "on-folder", work / "on-shards"
    same = {
        "train-supernet": same_weights(a / "supernet" / "checkpoint.pt", b / "supernet" / "checkpoint.pt"),
        "search": all(
            on_folder["search"][0][k] == on_shards["search"][0][k]
            for k in ("digest", "accuracy", "search_accuracy", "score_noise", "strategy_choice")
        ),
        "train": same_weights(a / "train" / "checkpoint.pt", b / "train" / "checkpoint.pt")
        and on_folder["train"][0]["top1"] == on_shards["train"][0]["top1"],
        "compare": [r["top1_seeds"] for r in on_folder["compare"][0]["rows"]]
        == [r["top1_seeds"] for r in on_shards["compare"][0]["rows"]],
    }
    version = code_version()
    figures = {
        "commit": version["commit"],
        "dirty": version["dirty"],
        "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "classes": args.classes,
        "images": images,
        "steps": args.steps,
        "pack_seconds": round(pack_s, 1),
    }
    print(
        f"# commit {version['commit'][:12]}{' (uncommitted changes)' if version['dirty'] else ''}, "
        f"{figures['date']}, torch {torch.__version__}, {os.cpu_count()} CPUs"
    )
    print(f"pack: {images} images in {pack_s:.1f} s ({len(packed['splits']['train'])} training shards)")
    for command in same:
        folder_s, shards_s = on_folder[command][1], on_shards[command][1]
        print(
            f"{command:<15} identical {'yes' if same[command] else 'NO'}; wall {folder_s:.1f} s from the folder, "
            f"{shards_s:.1f} s from the shards ({shards_s / folder_s:.2f}x)"
        )
        figures[command] = {
            "identical": same[command],
            "folder_seconds": round(folder_s, 1),
            "shards_seconds": round(shards_s, 1),
        }
    figures["seconds"] = round(time.perf_counter() - began, 1)
    print(f"# {figures['seconds']:.0f} s in all")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
