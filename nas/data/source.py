"""Which images a run reads: ImageNet-style folders or scikit-learn's digits, split into train,
search and validation.

``--data PATH`` reads ``PATH/train/<class>/*`` (and ``PATH/val`` or ``PATH/test`` when present). A
seeded split holds ``search_fraction`` of the training folder out as the **search split** (the
papers search on held-out training images, never on the validation set). Without a path the
built-in digits of scikit-learn are used (8x8 grey images, upscaled), so every command runs on a
fresh machine with no download. A shard folder (``nas data pack``) is read by :mod:`nas.data.shards`.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from nas.core.errors import NasError
from nas.data.shards import ShardIndex, ShardSource, is_shard_folder, refuse_shards, shard_splits
from nas.recipe import Recipe

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".tif", ".tiff")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class ImageSource:
    """Labelled images, by path or decoded in memory."""

    def __init__(
        self,
        classes: list[str],
        labels: list[int],
        paths: list[str] | None = None,
        pixels: np.ndarray | None = None,
        name: str = "",
    ):
        self.classes, self.labels, self.paths, self.pixels, self.name = classes, labels, paths, pixels, name

    def __len__(self) -> int:
        return len(self.labels)

    def image(self, index: int) -> Image.Image:
        if self.pixels is not None:
            return Image.fromarray(self.pixels[index])
        path = self.paths[index]
        try:
            with Image.open(path) as img:
                return img.convert("RGB")
        except (OSError, SyntaxError, ValueError) as exc:  # PIL: truncated, corrupt or not an image
            raise NasError(f"{path}: cannot decode image ({exc}); remove or replace the file") from None

    def check_and_cache(self, cache: bool, max_mb: int) -> None:
        """Decode every image once, before any training or evaluation starts, so that a corrupt or
        truncated file is one error naming it rather than a crash mid-epoch; keep the decoded
        images in one uint8 array when ``cache`` is set, they share a size and fit in ``max_mb``."""
        if self.pixels is not None or not self.paths:
            return
        first = np.asarray(self.image(0))
        size_mb = first.nbytes * len(self) / 2**20
        keep = cache and size_mb <= max_mb
        if cache and not keep:
            log.info("%s: %.0f MB decoded exceeds cache_max_mb=%d; decoding on the fly", self.name, size_mb, max_mb)
        pixels = np.empty((len(self), *first.shape), dtype=np.uint8) if keep else None
        for i in tqdm(
            range(len(self)),
            desc=f"checking {Path(self.name).name or self.name}",
            disable=None,
            leave=False,
            mininterval=2.0,
        ):
            array = np.asarray(self.image(i))
            if pixels is not None:
                if array.shape != first.shape:
                    log.info("%s: images differ in size; decoding on the fly", self.name)
                    pixels = None
                else:
                    pixels[i] = array
        if pixels is not None:
            self.pixels = pixels
            log.info("%s: cached %d images (%.0f MB)", self.name, len(self), size_mb)


def _train_folder(data: str) -> Path:
    """``data/train``, or a one-line error saying what is missing."""
    root = Path(data)
    if not root.is_dir():
        raise NasError(f"{root}: data folder not found; expected {root}/train/<class>/<image>")
    if not (root / "train").is_dir():
        raise NasError(f"{root}: no train/ folder; expected {root}/train/<class>/<image> (and val/ or test/)")
    return root / "train"


def _class_names(folder: Path) -> list[str]:
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if not classes:
        raise NasError(f"{folder}: no class folders; expected {folder}/<class>/<image>")
    return classes


def _scan_folder(folder: Path) -> ImageSource:
    classes = _class_names(folder)
    paths, labels = [], []
    for label, name in enumerate(classes):
        files = sorted(p for p in (folder / name).iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
        paths += [str(p) for p in files]
        labels += [label] * len(files)
    if not paths:
        raise NasError(f"{folder}: no images ({', '.join(IMAGE_EXTENSIONS)}) in its class folders")
    return ImageSource(classes, labels, paths=paths, name=str(folder))


def _digits() -> ImageSource:
    from sklearn.datasets import load_digits

    digits = load_digits()
    grey = (digits.images * (255.0 / 16.0)).round().astype(np.uint8)
    return ImageSource(
        [str(c) for c in digits.target_names],
        digits.target.tolist(),
        pixels=np.repeat(grey[..., None], 3, axis=-1),
        name="scikit-learn digits",
    )


def _subset(source: ImageSource, indices: np.ndarray, name: str) -> ImageSource:
    return ImageSource(
        source.classes,
        [source.labels[i] for i in indices],
        paths=[source.paths[i] for i in indices] if source.paths else None,
        pixels=source.pixels[indices] if source.pixels is not None else None,
        name=name,
    )


@dataclass
class Splits:
    """Train, search and validation images of a run (:func:`load_splits`)."""

    train: ImageSource
    search: ImageSource
    val: ImageSource
    val_name: str  # which images "val" is: the val/ or test/ folder, or a held-out part

    @property
    def num_classes(self) -> int:
        return len(self.train.classes)


def load_splits(
    data: str | None,
    recipe: Recipe,
    seed: int,
    hold_out_search: bool = True,
    decode_all: bool = True,
    allow_shards: bool = False,
) -> Splits:
    """Train, search and validation images. The search split is a seeded ``search_fraction`` of the
    training images; without a val/ or test/ folder, validation is the search split.

    ``hold_out_search=False`` (training a fixed network from scratch) trains on every training
    image when there is a validation folder to score on; without one, the search split stays held
    out, since it is then the only place to score.

    ``decode_all=False`` lists the images without decoding (and caching) every one up front: for
    readers of a few of them, such as a search's evaluators; a corrupt one fails when it is read.

    A shard folder (``shards.json``, :mod:`nas.data.shards`) gives streamed splits, for the trainers
    only (``allow_shards``); every other reader takes images by index and is refused with one line."""
    if is_shard_folder(data):
        if not allow_shards:
            refuse_shards(data, "this command")
        return Splits(*shard_splits(data, recipe, seed, hold_out_search))
    if data is None:
        full = _digits()
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(full))
        n_val = len(full) // 5
        val = _subset(full, order[:n_val], "digits val")
        full = _subset(full, order[n_val:], "digits train")
        val_name = "20% of scikit-learn digits held out"
    else:
        train_dir = _train_folder(data)
        root = train_dir.parent
        full = _scan_folder(train_dir)
        val_dir = next((root / d for d in ("val", "test") if (root / d).is_dir()), None)
        val = _scan_folder(val_dir) if val_dir else None
        if val is not None and val.classes != full.classes:
            raise NasError(f"{val_dir}: its classes differ from {root / 'train'}")
        val_name = f"{val_dir.name}/ folder" if val_dir else "the search split (no val/ or test/ folder)"
    if not 0 < recipe.search_fraction < 1:
        raise NasError(f"search_fraction must be between 0 and 1, got {recipe.search_fraction}")
    if decode_all:
        if data is not None and val is not None:
            val.check_and_cache(recipe.cache_images, recipe.cache_max_mb)
        if not recipe.train_images:
            full.check_and_cache(recipe.cache_images, recipe.cache_max_mb)
    order = np.random.default_rng(seed + 1).permutation(len(full))
    n_search = max(1, int(round(recipe.search_fraction * len(full))))
    search = _subset(full, np.sort(order[:n_search]), "search split")
    train = _subset(full, np.sort(order[n_search:]), "train split")
    if not hold_out_search and val is not None:
        train = full
    if recipe.train_images:
        if recipe.train_images < len(train):
            # The same images for every network trained with this seed: a ranking study compares
            # networks, so they must not differ in what they saw.
            train = _subset(train, balanced_indices(train, recipe.train_images, seed + 15_485_863), "train subset")
        if decode_all:  # decode only what is read: the subset, not the whole folder
            train.check_and_cache(recipe.cache_images, recipe.cache_max_mb)
            if hold_out_search or val is None:  # else nothing reads the search split
                search.check_and_cache(recipe.cache_images, recipe.cache_max_mb)
    return Splits(train, search, val if val is not None else search, val_name)


def data_fingerprint(data: str | None) -> str:
    """What identifies a data set in resume checks and cache keys: the relative path and size of
    every image in train/ and val/ (or test/), hashed (16 hex digits). Listing, not reading:
    cheap for ImageNet too. The built-in digits are ``"digits"``; a shard folder's is its shards'
    names, counts and sizes (:meth:`nas.data.shards.ShardIndex.fingerprint`)."""
    if data is None:
        return "digits"
    if is_shard_folder(data):
        return ShardIndex.load(data).fingerprint()
    root = _train_folder(data).parent
    h = hashlib.sha256()
    for split in ("train", "val", "test"):
        folder = root / split
        if not folder.is_dir():
            continue
        for class_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
            for entry in sorted(os.scandir(class_dir), key=lambda e: e.name):
                if os.path.splitext(entry.name)[1].lower() in IMAGE_EXTENSIONS:
                    h.update(f"{split}/{class_dir.name}/{entry.name}:{entry.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def balanced_indices(source: ImageSource, n: int, seed: int) -> list[int]:
    """``n`` images of ``source`` (sorted indices), spread over the classes as evenly as they allow,
    chosen by ``seed``. A fixed subset of the search split that a search scores every sub-network
    on: balanced, so that no class weighs more in the accuracy than it does in the split."""
    labels = np.asarray(source.labels)
    if n >= len(labels):
        return list(range(len(labels)))
    order = np.random.default_rng(seed).permutation(len(labels))
    # Rank of each image within its class in the seeded order: taking ranks 0, 1, 2, ... of every
    # class in turn keeps the classes even until the smaller ones run out.
    rank = np.empty(len(labels), dtype=np.int64)
    for label in np.unique(labels):
        members = order[labels[order] == label]
        rank[members] = np.arange(len(members))
    position = np.empty(len(labels), dtype=np.int64)
    position[order] = np.arange(len(labels))
    chosen = np.lexsort((position, rank))[:n]
    return sorted(chosen.tolist())


def calibration_indices(source: ImageSource, recipe: Recipe, seed: int) -> list[int]:
    """A fixed, seeded set of training images for BatchNorm recalibration (of shards: the first ones of
    the split's stream, which was shuffled when packed)."""
    n = min(len(source), recipe.bn_calib_batches * recipe.eval_batch_size)
    if isinstance(source, ShardSource):
        return list(range(n))
    return torch.randperm(len(source), generator=torch.Generator().manual_seed(seed + 7919))[:n].tolist()
