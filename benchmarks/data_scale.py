"""ImageNet-size data on this machine: listing, the decode check, start-up to the first optimizer
step (cold and warm), resident memory per image, and the loader's images/s, at two sizes of an
ImageNet-shaped folder, with the same figures extrapolated to ImageNet (1.33M images) and 8 ranks.

    python benchmarks/data_scale.py [--sizes 12800,128000] [--work /tmp/nas-data-scale] [--check-images 12800]

The folder: a few hundred real JPEGs (crops of the two photographs scikit-learn ships, resized to
500x375, ImageNet's typical size, quality 90) hard-linked into 1,000 class folders: ``train/`` holds
N images and ``val/`` N/25, so 128k files cost a few MB of disk. The files are few and stay in the
page cache, so the check measures decoding, not a disk; a real ImageNet on a slow disk also waits for
reads.

Printed figures, each with a reference measured in the same run (this machine is shared and noisy):

- listing and fingerprint of the folder (``nas.data.source.list_folder``): seconds, and µs per image;
- the decode check (``nas.data.check.check_images``) on ``--check-images`` images with 1 and 2
  processes: images/s, the ratio 2:1 (target at least 1.8x), and the ratio of 1 process to a plain
  serial PIL decode loop of the same files (the check's own overhead);
- start-up of ``nas train-supernet efficientformerv2 --space efficientformerv2-tiny --recipe imagenet
  --img-size 64 --batch-size 16 --max-steps 1``: seconds from starting the command to its log line
  "first optimizer step" (the process is stopped there), cold (no manifest) and warm (checked
  before); target: warm at 128k at most 20 s and at most 2x the 12.8k figure. Reference: ``python -c
  "import torch"``;
- resident memory of a fresh process after ``load_splits`` of the folder (warm: listing, no decoding),
  and the bytes per image between the two sizes (target at most 300);
- the training loader at 224 px with the imagenet recipe's augmentation (``train_loader``) with 1 and
  2 worker processes: images/s, and per worker.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from nas.runs.provenance import code_version

CLASSES = 1000
FIRST_STEP = "first optimizer step"


def build_folder(root: Path, n_train: int, sources: list[Path]) -> None:
    """``root/train`` with ``n_train`` images and ``root/val`` with ``n_train // 25``, in 1,000 class
    folders, each a hard link of one of ``sources``."""
    rng = random.Random(n_train)
    for split, n in (("train", n_train), ("val", n_train // 25)):
        per_class, extra = divmod(n, CLASSES)
        for c in range(CLASSES):
            folder = root / split / f"n{c:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(per_class + (c < extra)):
                os.link(sources[rng.randrange(len(sources))], folder / f"n{c:08d}_{i:06d}.JPEG")


def make_sources(folder: Path, count: int) -> list[Path]:
    """``count`` distinct 500x375 JPEGs cut from scikit-learn's two photographs."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    folder.mkdir(parents=True, exist_ok=True)
    photos = [Image.fromarray(p) for p in load_sample_images().images]
    rng = random.Random(0)
    paths = []
    for i in range(count):
        photo = photos[i % len(photos)]
        w = rng.randint(160, photo.width)
        h = min(photo.height, int(w * 0.75))
        x, y = rng.randint(0, photo.width - w), rng.randint(0, photo.height - h)
        image = photo.crop((x, y, x + w, y + h)).resize((500, 375), Image.BICUBIC)
        if rng.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        path = folder / f"{i:04d}.jpg"
        image.save(path, quality=90)
        paths.append(path)
    return paths


def run_python(code: str, env: dict[str, str]) -> str:
    """Run ``code`` in a fresh interpreter; its stdout."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, **env}
    ).stdout


def startup(data: Path, cache: Path, run: Path) -> float:
    """Seconds from starting ``nas train-supernet`` on ``data`` to its first optimizer step."""
    shutil.rmtree(run, ignore_errors=True)
    argv = [sys.executable, "-m", "nas", "-v", "train-supernet", "efficientformerv2", "--space"]
    argv += ["efficientformerv2-tiny", "--recipe", "imagenet", "--img-size", "64", "--batch-size", "16"]
    argv += ["--max-steps", "1", "--data", str(data), "--run", str(run)]
    env = {**os.environ, "NAS_DATA_CACHE": str(cache)}
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if FIRST_STEP in line:
                return time.perf_counter() - started
        raise RuntimeError("no first step:\n" + "".join(lines[-20:]))
    finally:
        proc.kill()
        proc.wait()


LISTING = """
import time, sys
from nas.data.source import list_folder, _listing_fingerprint
t = time.perf_counter(); root, listings = list_folder(sys.argv[1] if len(sys.argv) > 1 else {data!r})
fp = _listing_fingerprint(listings); print(time.perf_counter() - t, sum(len(l.files) for l in listings.values()))
"""

MEMORY = """
from nas.data import load_splits
from nas.config.recipe import load_recipe
import dataclasses
recipe = load_recipe("imagenet")
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
before = rss()
splits = load_splits({data!r}, recipe, 0)
print(rss() - before, rss(), len(splits.train) + len(splits.search) + len(splits.val))
"""

CHECK = """
import sys, time
import numpy as np
from nas.data.check import check_images
from nas.data.source import list_folder
root, listings = list_folder({data!r})
l = listings["train"]
n = {n}
result = check_images(root, l.files[:n], l.sizes[:n], l.mtimes[:n], workers={workers}, progress=False)
assert result.checked == n and not result.corrupt
print(n / result.seconds)
"""

PLAIN = """
import time
from PIL import Image
from nas.data.source import list_folder
root, listings = list_folder({data!r})
files = listings["train"].files[:{n}]
t = time.perf_counter()
for f in files:
    with Image.open(str(root) + "/" + f.decode()) as img:
        img.load()
print(len(files) / (time.perf_counter() - t))
"""

LOADER = """
import time, dataclasses
from nas.data import load_splits, train_loader
from nas.config.recipe import load_recipe
recipe = dataclasses.replace(load_recipe("imagenet"), batch_size=32, loader_workers={workers})
splits = load_splits({data!r}, recipe, 0)
loader, sampler, dataset = train_loader(splits, recipe, 0)
batches = iter(loader)
for _ in range({warmup}):
    next(batches)
t = time.perf_counter()
for _ in range({batches}):
    next(batches)
print({batches} * 32 / (time.perf_counter() - t))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="12800,128000", help="training images of the two folders")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "nas-data-scale"))
    parser.add_argument("--sources", type=int, default=300, help="distinct JPEGs hard-linked (default 300)")
    parser.add_argument(
        "--check-images", type=int, default=12800, help="images the 1- and 2-process checks decode (default 12800)"
    )
    parser.add_argument("--loader-batches", type=int, default=20, help="batches of 32 timed per loader")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    began = time.perf_counter()
    code = code_version()
    print(f"# data scale: ImageNet-shaped folders (1,000 classes, 500x375 JPEGs hard-linked from {args.sources})")
    print(
        f"# commit {code['commit'][:12]}{' + uncommitted changes' if code['dirty'] else ''}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, python {sys.version.split()[0]}"
    )
    sources = make_sources(work / "sources", args.sources)
    torch_import = statistics.median(
        float(run_python("import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)", {}))
        for _ in range(3)
    )
    print(f"reference: import torch {torch_import:.2f} s (median of 3 fresh processes)")
    figures: dict[int, dict[str, float]] = {}
    for n in sizes:
        data = work / f"data-{n}"
        t = time.perf_counter()
        build_folder(data, n, sources)
        total = n + n // 25
        print(f"\n## {n} training + {n // 25} val images (folder built in {time.perf_counter() - t:.1f} s)")
        seconds, listed = map(float, run_python(LISTING.format(data=str(data)), {}).split())
        assert int(listed) == total
        print(f"listing + fingerprint: {seconds:.2f} s ({seconds / total * 1e6:.1f} µs/image)")
        fig = figures[n] = {"listing_s": seconds, "images": total}
        if n == sizes[0]:
            m = min(args.check_images, n)
            plain = float(run_python(PLAIN.format(data=str(data), n=m), {}))
            rates = {}
            for workers in (1, 2):
                cache = work / f"check-{workers}"
                rates[workers] = float(
                    run_python(CHECK.format(data=str(data), n=m, workers=workers), {"NAS_DATA_CACHE": str(cache)})
                )
            print(
                f"decode check of {m} images: 1 process {rates[1]:.0f} images/s "
                f"({rates[1] / plain:.2f}x a plain serial PIL loop's {plain:.0f}), "
                f"2 processes {rates[2]:.0f} images/s = {rates[2] / rates[1]:.2f}x one (target >= 1.8x)"
            )
            fig["check_1"], fig["check_2"] = rates[1], rates[2]
        cache = work / f"cache-{n}"
        cold = startup(data, cache, work / "run")
        warm = startup(data, cache, work / "run")
        fig["cold_s"], fig["warm_s"] = cold, warm
        print(
            f"start-up to the first optimizer step: cold {cold:.1f} s (checks {total} images), "
            f"warm {warm:.1f} s = {warm / torch_import:.1f}x import torch"
        )
        grown, rss, listed = map(int, run_python(MEMORY.format(data=str(data)), {"NAS_DATA_CACHE": str(cache)}).split())
        fig["rss"], fig["grown"] = rss, grown
        print(f"resident memory after load_splits: {rss / 2**20:.0f} MiB ({grown / 2**20:.1f} MiB for the listing)")
        if n == sizes[0]:
            for workers in (1, 2):
                rate = float(
                    run_python(
                        LOADER.format(data=str(data), workers=workers, warmup=2 * workers, batches=args.loader_batches),
                        {"NAS_DATA_CACHE": str(cache)},
                    )
                )
                fig[f"loader_{workers}"] = rate
                print(
                    f"training loader, 224 px, imagenet augmentation, {workers} worker(s): {rate:.0f} images/s "
                    f"({rate / workers:.0f} per worker)"
                )
    small, large = sizes[0], sizes[-1]
    a, b = figures[small], figures[large]
    print("\n## targets")
    per_image = (b["rss"] - a["rss"]) / (b["images"] - a["images"])
    ratio = b["warm_s"] / a["warm_s"]
    print(
        f"warm start-up at {large}: {b['warm_s']:.1f} s (target <= 20 s); {ratio:.2f}x the {small} one (target <= 2x)"
    )
    print(f"check with 2 processes: {a['check_2'] / a['check_1']:.2f}x one (target >= 1.8x)")
    print(f"resident memory per image, {small} -> {large}: {per_image:.0f} bytes (target <= 300)")
    imagenet, ranks = 1_331_167, 8
    scale = imagenet / b["images"]
    print(f"\n## extrapolated to ImageNet ({imagenet} images) and {ranks} ranks on one node")
    print(f"listing + fingerprint: {b['listing_s'] * scale:.0f} s per start (every rank lists; linear in images)")
    print(
        f"first check, once per data set, on rank 0 with all cores: {imagenet / a['check_2']:.0f} s with 2 cores "
        f"like this machine, {imagenet / (a['check_1'] * 32) / 60:.1f} min with 32 (at this machine's per-core rate)"
    )
    print(
        f"warm start-up: about {b['warm_s'] + b['listing_s'] * (scale - 1):.0f} s "
        f"(this run's {b['warm_s']:.1f} s plus the longer listing)"
    )
    print(
        f"listing memory: {per_image * imagenet / 2**20:.0f} MiB per rank, "
        f"{per_image * imagenet * ranks / 2**20:.0f} MiB for {ranks} ranks"
    )
    per_worker = a["loader_1"]
    print(
        f"loader: {per_worker:.0f} images/s per worker at 224 px; a GPU taking 2,000 images/s needs about "
        f"{2000 / per_worker:.0f} workers per rank at this per-core speed"
    )
    print(f"\n# wall time {time.perf_counter() - began:.0f} s")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
