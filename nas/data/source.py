"""Which images a run reads: ImageNet-style folders or scikit-learn's digits, split into train,
search and validation.

``--data PATH`` reads ``PATH/train/<class>/*`` (and ``PATH/val`` or ``PATH/test`` when present). A
seeded split holds ``search_fraction`` of the training folder out as the **search split** (the
papers search on held-out training images, never on the validation set). Without a path the
built-in digits of scikit-learn are used (8x8 grey images, upscaled), so every command runs on a
fresh machine with no download. A shard folder (``nas data pack``, :mod:`nas.data.shards`) is read
by index from its tars (the same images, in the same order, as the folder it was packed from), or
streamed to the trainers (``shard_reading: stream``).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from nas.config.recipe import Recipe
from nas.core.errors import NasError
from nas.data.check import check_images, decode_all
from nas.data.shard_check import check_shards, decode_members
from nas.data.shard_index import MemberTable, ShardIndex, is_shard_folder
from nas.data.shards import ShardSource, shard_splits
from nas.data.splits import search_split
from nas.data.workers import cores_per_process

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".tif", ".tiff")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class ImageSource:
    """Labelled images: by path, decoded in memory, or as members of tar shards (``members``).

    Memory stays flat in the number of images: a folder's files are one NumPy array of relative
    paths (``root``-relative bytes) with their sizes and modification times, and the labels one
    ``int32`` array; no Python object per image. (A list of a million ``str`` paths would cost
    ~100 bytes each, and DataLoader workers forked from it would copy the pages as they touch
    reference counts.)"""

    def __init__(
        self,
        classes: list[str],
        labels: np.ndarray,
        root: str | None = None,
        files: np.ndarray | None = None,
        stats: tuple[np.ndarray, np.ndarray] | None = None,
        pixels: np.ndarray | None = None,
        name: str = "",
        members: MemberTable | None = None,
    ):
        # stats: each file's (size, modification time), what a folder's fingerprint is made of
        self.classes, self.name = classes, name
        self.labels = np.asarray(labels, dtype=np.int32)
        self.sizes, self.mtimes = stats if stats is not None else (None, None)
        self.root, self.files, self.pixels = root, files, pixels
        self.members = members

    def __len__(self) -> int:
        return len(self.labels)

    def path(self, index: int) -> str:
        """The file of image ``index``."""
        return os.path.join(self.root, self.files[index].decode())

    @property
    def paths(self) -> list[str] | None:
        """Every file as a list (a Python object per image: for small sources and tests)."""
        return None if self.files is None else [self.path(i) for i in range(len(self))]

    def label(self, index: int) -> int:
        return int(self.labels[index])

    def image(self, index: int) -> Image.Image:
        if self.pixels is not None:
            return Image.fromarray(self.pixels[index])
        if self.members is not None:
            return self.members.image(index)
        path = self.path(index)
        try:
            with Image.open(path) as img:
                return img.convert("RGB")
        except (OSError, SyntaxError, ValueError) as exc:  # PIL: truncated, corrupt or not an image
            raise NasError(f"{path}: cannot decode image ({exc}); remove or replace the file") from None

    def subset(self, indices: np.ndarray, name: str) -> "ImageSource":
        """The images at ``indices`` (an index array), sharing nothing mutable with this source."""
        indices = np.asarray(indices, dtype=np.int64)

        def pick(array):
            return None if array is None else array[indices]

        return ImageSource(
            self.classes,
            self.labels[indices],
            root=self.root,
            files=pick(self.files),
            stats=None if self.sizes is None else (pick(self.sizes), pick(self.mtimes)),
            pixels=pick(self.pixels),
            name=name,
            members=None if self.members is None else self.members.take(indices),
        )


@dataclass(frozen=True)
class Listing:
    """One split folder listed: class names, and per image its root-relative file, label, size and
    modification time (arrays in sorted order: class, then file name)."""

    classes: list[str]
    files: np.ndarray  # bytes, "train/<class>/<name>"
    labels: np.ndarray  # int32
    sizes: np.ndarray  # int64 bytes
    mtimes: np.ndarray  # int64 ns

    def source(self, root: Path, name: str) -> ImageSource:
        return ImageSource(self.classes, self.labels, str(root), self.files, (self.sizes, self.mtimes), name=name)


def _train_folder(data: str) -> Path:
    """``data/train``, or a one-line error saying what is missing."""
    root = Path(data)
    if not root.is_dir():
        raise NasError(f"{root}: data folder not found; expected {root}/train/<class>/<image>")
    if not (root / "train").is_dir():
        raise NasError(f"{root}: no train/ folder; expected {root}/train/<class>/<image> (and val/ or test/)")
    return root / "train"


def _class_names(folder: Path) -> list[str]:
    return sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())


def list_split(root: Path, split: str) -> Listing:
    """List ``root/split/<class>/*`` (one ``stat`` per file, no reading): what a fingerprint and the
    decode check need."""
    folder = root / split
    classes = _class_names(folder)
    files, labels, sizes, mtimes = [], [], [], []
    for label, class_name in enumerate(classes):
        entries = sorted(
            (e for e in os.scandir(folder / class_name) if os.path.splitext(e.name)[1].lower() in IMAGE_EXTENSIONS),
            key=lambda e: e.name,
        )
        for entry in entries:
            stat = entry.stat()
            files.append(f"{split}/{class_name}/{entry.name}".encode())
            sizes.append(stat.st_size)
            mtimes.append(stat.st_mtime_ns)
        labels.append(np.full(len(entries), label, dtype=np.int32))
    return Listing(
        classes,
        np.array(files, dtype=bytes) if files else np.empty(0, dtype="S1"),
        np.concatenate(labels) if labels else np.empty(0, dtype=np.int32),
        np.array(sizes, dtype=np.int64),
        np.array(mtimes, dtype=np.int64),
    )


def _listing_fingerprint(listings: dict[str, Listing]) -> str:
    """The fingerprint of :func:`data_fingerprint` from listings already made (same bytes hashed)."""
    h = hashlib.sha256()
    for split in ("train", "val", "test"):
        listing = listings.get(split)
        if listing is None:
            continue
        for file, size in zip(listing.files.tolist(), listing.sizes.tolist()):
            h.update(file + b":" + str(size).encode() + b"\n")
    return h.hexdigest()[:16]


def list_folder(data: str) -> tuple[Path, dict[str, Listing]]:
    """``data``'s root and its listed ``train`` (and ``val``/``test``) splits, checked for the
    layout (one-line errors for a missing folder, no classes, no images)."""
    root = _train_folder(data).parent
    listings = {split: list_split(root, split) for split in ("train", "val", "test") if (root / split).is_dir()}
    for split, listing in listings.items():
        folder = root / split
        if not listing.classes:
            raise NasError(f"{folder}: no class folders; expected {folder}/<class>/<image>")
        if not len(listing.files):
            raise NasError(f"{folder}: no images ({', '.join(IMAGE_EXTENSIONS)}) in its class folders")
    return root, listings


def _digits() -> ImageSource:
    from sklearn.datasets import load_digits

    digits = load_digits()
    grey = (digits.images * (255.0 / 16.0)).round().astype(np.uint8)
    return ImageSource(
        [str(c) for c in digits.target_names],
        digits.target,
        pixels=np.repeat(grey[..., None], 3, axis=-1),
        name="scikit-learn digits",
    )


@dataclass
class Splits:
    """Train, search and validation images of a run (:func:`load_splits`)."""

    train: ImageSource
    search: ImageSource
    val: ImageSource
    val_name: str  # which images "val" is: the val/ or test/ folder, or a held-out part
    fingerprint: str = ""  # data_fingerprint of the data, from the listing the splits were made from

    @property
    def num_classes(self) -> int:
        return len(self.train.classes)


def load_splits(
    data: str | None,
    recipe: Recipe,
    seed: int,
    hold_out_search: bool = True,
    decode_all: bool = True,
    once: Callable[[Callable[[], Any]], Any] | None = None,
    check_workers: int | None = None,
    allow_shards: bool = False,
) -> Splits:
    """Train, search and validation images. The search split is a seeded ``search_fraction`` of the
    training images; without a val/ or test/ folder, validation is the search split.

    ``hold_out_search=False`` (training a fixed network from scratch) trains on every training
    image when there is a validation folder to score on; without one, the search split stays held
    out, since it is then the only place to score.

    ``decode_all`` checks that every image the run reads decodes (:mod:`nas.data.check`: once per
    data set, kept in a manifest; ``check_workers`` processes) and keeps small data sets decoded in
    memory (``cache_images``). ``decode_all=False`` lists the images only: for readers of a few of
    them, such as a search's evaluators; a corrupt one fails when it is read. ``once`` runs the
    check in one process of a distributed job and hands its result to all (``DistEnv.on_main``).

    A shard folder (``shards.json``, :mod:`nas.data.shards`) is read by index from its tars: the
    same images in the same order as its source folder, so every result is the folder's. Trainers
    (``allow_shards``) stream it instead when the recipe's ``shard_reading`` is ``stream``."""
    if not 0 < recipe.search_fraction < 1:
        raise NasError(f"search_fraction must be between 0 and 1, got {recipe.search_fraction}")
    shard_index = ShardIndex.load(data) if is_shard_folder(data) else None
    stream = shard_index is not None and allow_shards and recipe.shard_reading == "stream"
    if stream:  # the trainers' streams: checked whole, then no table read by index is needed
        if decode_all:
            _check_and_cache_shards(shard_index, {}, recipe, once, check_workers)
        return Splits(*shard_splits(shard_index, recipe, seed, hold_out_search), shard_index.fingerprint())
    if shard_index is not None:
        fingerprint = shard_index.fingerprint()
        full = _shard_images(shard_index, "train", f"{data} (train shards)")
        val = (
            _shard_images(shard_index, "val", f"{data} ({shard_index.val_folder} shards)") if shard_index.val else None
        )
        val_name = (
            f"{shard_index.val_folder}/ folder (shards)" if val is not None else "the search split (no val shards)"
        )
    elif data is None:
        full = _digits()
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(full))
        n_val = len(full) // 5
        val = full.subset(order[:n_val], "digits val")
        full = full.subset(order[n_val:], "digits train")
        val_name = "20% of scikit-learn digits held out"
        fingerprint = "digits"
    else:
        root, listings = list_folder(data)
        fingerprint = _listing_fingerprint(listings)
        full = listings["train"].source(root, str(root / "train"))
        val_split = next((d for d in ("val", "test") if d in listings), None)
        val = listings[val_split].source(root, str(root / val_split)) if val_split else None
        if val is not None and val.classes != full.classes:
            raise NasError(f"{root / val_split}: its classes differ from {root / 'train'}")
        val_name = f"{val_split}/ folder" if val_split else "the search split (no val/ or test/ folder)"
    if decode_all and shard_index is not None:  # shards are checked whole (their verdict is kept whole)
        _check_and_cache_shards(shard_index, {"train": full, "val": val}, recipe, once, check_workers)
    if decode_all and not recipe.train_images:
        _check_and_cache([full] if val is None else [full, val], recipe, once, check_workers)
    held_out = search_split(len(full), recipe.search_fraction, seed)
    search = full.subset(held_out, "search split")
    train = full.subset(np.setdiff1d(np.arange(len(full)), held_out, assume_unique=True), "train split")
    if not hold_out_search and val is not None:
        train = full
    if recipe.train_images:
        if recipe.train_images < len(train):
            # The same images for every network trained with this seed: a ranking study compares
            # networks, so they must not differ in what they saw.
            train = train.subset(balanced_indices(train, recipe.train_images, seed + 15_485_863), "train subset")
        if decode_all:  # check only what is read: the subset (and what scores it), not the whole folder
            read = [train] + ([search] if hold_out_search or val is None else []) + ([val] if val is not None else [])
            _check_and_cache(read, recipe, once, check_workers)
    return Splits(train, search, val if val is not None else search, val_name, fingerprint)


def _shard_images(index: ShardIndex, split: str, name: str) -> ImageSource:
    """A split of a shard folder as images read by index, in the packed folder's listing order."""
    members = index.members(split).in_folder_order()
    return ImageSource(list(index.classes), members.label, name=name, members=members)


def _check_and_cache_shards(
    index: ShardIndex,
    sources: dict[str, ImageSource | None],
    recipe: Recipe,
    once: Callable | None,
    workers: int | None,
) -> None:
    """The decode check of every member of the shards ``index`` (once per shard folder: its clean
    verdict is kept), then the in-memory cache of each of ``sources`` (by split; read by index) whose
    images share a size and fit in ``cache_max_mb``."""

    def check():
        return check_shards(index, workers)

    result = once(check) if once is not None else check()
    result.raise_if_corrupt()
    for split, source in sources.items():
        if source is None or not recipe.cache_images or not len(source):
            continue
        shape = _cache_shape(source, *result.image_sizes(split, source.members), recipe.cache_max_mb)
        if shape is not None:
            source.pixels = decode_members(source.members, shape, cores_per_process())
            log.info("%s: cached %d images", source.name, len(source))


def _check_and_cache(sources: list[ImageSource], recipe: Recipe, once: Callable | None, workers: int | None) -> None:
    """The decode check of every image of ``sources`` (one check for all: one folder), then the
    in-memory cache of each source whose images share a size and fit in ``cache_max_mb``."""
    on_disk = [s for s in sources if s.files is not None and s.pixels is None]
    if not on_disk:
        return
    root = on_disk[0].root
    files, first = np.unique(np.concatenate([s.files for s in on_disk]), return_index=True)
    sizes = np.concatenate([s.sizes for s in on_disk])[first]
    mtimes = np.concatenate([s.mtimes for s in on_disk])[first]

    def check():
        return check_images(root, files, sizes, mtimes, workers)

    result = once(check) if once is not None else check()
    result.raise_if_corrupt(root)
    if not recipe.cache_images:
        return
    for source in on_disk:
        rows = np.searchsorted(files, source.files)
        shape = _cache_shape(source, result.widths[rows], result.heights[rows], recipe.cache_max_mb)
        if shape is not None:
            source.pixels = decode_all(root, source.files, shape, cores_per_process())
            log.info("%s: cached %d images", source.name, len(source))


def _cache_shape(source: ImageSource, widths: np.ndarray, heights: np.ndarray, cache_max_mb: int):
    """The ``(height, width, 3)`` of ``source``'s images when they share a size and their decoded
    pixels fit in ``cache_max_mb``, else None (decoded on the fly). Per process: each rank of a
    distributed job holds its own cache (small data sets only)."""
    if (widths != widths[0]).any() or (heights != heights[0]).any():
        log.info("%s: images differ in size; decoding on the fly", source.name)
        return None
    size_mb = len(source) * int(widths[0]) * int(heights[0]) * 3 / 2**20
    if size_mb > cache_max_mb:
        log.info("%s: %.0f MB decoded exceeds cache_max_mb=%d; decoding on the fly", source.name, size_mb, cache_max_mb)
        return None
    log.info("%s: caching %.0f MB of decoded images", source.name, size_mb)
    return (int(heights[0]), int(widths[0]), 3)


def data_fingerprint(data: str | None) -> str:
    """What identifies a data set in resume checks and cache keys: the relative path and size of
    every image in train/ and val/ (or test/), hashed (16 hex digits). Listing, not reading:
    cheap for ImageNet too. The built-in digits are ``"digits"``; a shard folder's is its shards'
    names, counts and sizes (:meth:`nas.data.shard_index.ShardIndex.fingerprint`)."""
    if data is None:
        return "digits"
    if is_shard_folder(data):
        return ShardIndex.load(data).fingerprint()
    return _listing_fingerprint(list_folder(data)[1])


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
