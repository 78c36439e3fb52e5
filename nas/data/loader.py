"""Loaders: timm's transforms over an :class:`~nas.data.source.ImageSource`, sharded and seeded.

Augmentation is timm's. Each training sample's augmentation is seeded by (seed, epoch, index), so
a run resumed mid-epoch sees exactly the images it would have seen, whatever the worker count: the
sampler hands each worker ``(epoch, index)`` pairs, so persistent worker processes, which never see
the main process's state after they start, still seed by the right epoch.
"""

from __future__ import annotations

import logging
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from nas.config.recipe import Recipe
from nas.core.errors import NasError
from nas.data.shards import ShardSource, shard_eval_loader, shard_train_loader
from nas.data.source import MEAN, STD, ImageSource, Splits
from nas.data.workers import loader_options, resolve_workers

log = logging.getLogger(__name__)


def train_transform(recipe: Recipe):
    """timm's training transform for ``recipe``: random resized crop, flip, color jitter, RandAugment
    and random erasing as the recipe sets them."""
    from timm.data import create_transform

    return create_transform(
        recipe.img_size,
        is_training=True,
        scale=(recipe.crop_scale_min, 1.0),
        hflip=recipe.hflip,
        color_jitter=recipe.color_jitter or None,
        auto_augment=recipe.randaugment or None,
        interpolation="bicubic",
        re_prob=recipe.reprob,
        mean=MEAN,
        std=STD,
    )


def eval_transform(recipe: Recipe):
    """timm's evaluation transform at ``recipe.img_size``: bicubic resize, center crop (``crop_pct=1``),
    normalisation."""
    from timm.data import create_transform

    return create_transform(
        recipe.img_size, is_training=False, crop_pct=1.0, interpolation="bicubic", mean=MEAN, std=STD
    )


class ImageDataset(Dataset):
    """``source`` through ``transform``; with ``seed`` set, each sample's augmentation is seeded by
    (seed, epoch, index) without touching the caller's random state. Items are addressed by index, or
    by an ``(epoch, index)`` pair (what :class:`EpochSampler` yields; a plain index is epoch 0)."""

    def __init__(self, source: ImageSource, transform, seed: int | None = None):
        self.source, self.transform, self.seed = source, transform, seed

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, item: int | tuple[int, int]):
        epoch, index = item if isinstance(item, tuple) else (0, item)
        image = self.source.image(index)
        if self.seed is None:
            return self.transform(image), self.source.label(index)
        # Python's, torch's and numpy's generators (timm's RandAugment draws its operations from numpy)
        # are seeded per sample and restored after, so neither the worker count nor a worker's history matters.
        state, numpy_state = random.getstate(), np.random.get_state()
        with torch.random.fork_rng(devices=[]):
            sample_seed = (self.seed * 1_000_003 + epoch * 10_007 + index) % 2**63
            random.seed(sample_seed)
            torch.manual_seed(sample_seed)
            np.random.seed(sample_seed % 2**32)
            tensor = self.transform(image)
        random.setstate(state)
        np.random.set_state(numpy_state)
        return tensor, self.source.label(index)


class EpochSampler(Sampler[tuple[int, int]]):
    """A seeded permutation per epoch, sharded across processes, starting at ``start_batch``
    (to resume mid-epoch); yields ``(epoch, index)`` pairs, so the dataset seeds each sample by its
    epoch even in worker processes started epochs ago."""

    def __init__(self, size: int, batch_size: int, seed: int, rank: int = 0, world: int = 1):
        self.size, self.batch_size, self.seed, self.rank, self.world = size, batch_size, seed, rank, world
        self.epoch, self.start_batch = 0, 0
        self.batches_per_epoch = size // (batch_size * world)
        if self.batches_per_epoch < 1:
            raise NasError(
                f"{size} training images are fewer than one batch of {batch_size} per process "
                f"({world} processes); lower --batch-size"
            )

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        self.epoch, self.start_batch = epoch, start_batch

    def __iter__(self):
        order = torch.randperm(self.size, generator=torch.Generator().manual_seed(self.seed + self.epoch)).tolist()
        per_rank = self.batches_per_epoch * self.batch_size
        mine = order[self.rank * per_rank : (self.rank + 1) * per_rank]
        return ((self.epoch, index) for index in mine[self.start_batch * self.batch_size :])

    def __len__(self) -> int:
        return (self.batches_per_epoch - self.start_batch) * self.batch_size


def train_loader(
    splits: Splits, recipe: Recipe, seed: int, rank: int = 0, world: int = 1, device_type: str = "cpu"
) -> tuple[DataLoader, EpochSampler, ImageDataset]:
    """The training loader of ``splits.train`` (augmented, seeded per sample, sharded by ``rank`` and
    ``world``, pinned for a ``cuda`` device); returns ``(loader, sampler, dataset)``. Shard splits
    stream (:mod:`nas.data.shards`)."""
    workers = resolve_workers(recipe.loader_workers, splits.train)
    if rank == 0:
        log.info(
            "loader: %d worker process%s (loader_workers: %s)",
            workers,
            "" if workers == 1 else "es",
            recipe.loader_workers,
        )
    if isinstance(splits.train, ShardSource):
        return shard_train_loader(
            splits.train, train_transform(recipe), recipe, seed, rank, world, device_type=device_type
        )
    dataset = ImageDataset(splits.train, train_transform(recipe), seed=seed)
    sampler = EpochSampler(len(dataset), recipe.batch_size, seed, rank, world)
    # Its own generator: creating an iterator must not draw from the global RNG, or a run resumed
    # mid-epoch would diverge from an uninterrupted one.
    loader = DataLoader(
        dataset,
        batch_size=recipe.batch_size,
        sampler=sampler,
        drop_last=True,
        generator=torch.Generator().manual_seed(seed),
        **loader_options(workers, device_type),
    )
    return loader, sampler, dataset


def eval_loader(
    source: ImageSource, recipe: Recipe, indices: list[int] | None = None, device_type: str = "cpu"
) -> DataLoader:
    """An unshuffled loader of ``source`` (or of its ``indices``) with the evaluation transform,
    pinned for a ``cuda`` device (of a shard split: ``indices`` are positions in its stream)."""
    if isinstance(source, ShardSource):
        return shard_eval_loader(source, eval_transform(recipe), recipe, indices, device_type=device_type)
    dataset = ImageDataset(source, eval_transform(recipe))
    if indices is not None:
        dataset = torch.utils.data.Subset(dataset, indices)
    workers = resolve_workers(recipe.loader_workers, source)
    return DataLoader(dataset, batch_size=recipe.eval_batch_size, shuffle=False, **loader_options(workers, device_type))


def preload(loader: DataLoader, max_mb: int) -> DataLoader | list[tuple[torch.Tensor, torch.Tensor]]:
    """The batches of an unshuffled evaluation ``loader``, transformed once and kept in memory when
    they fit in ``max_mb`` (else ``loader`` itself). A search evaluates hundreds of sub-networks on
    the same calibration and search images; held as tensors, each evaluation costs its forward
    passes only, not decoding and resizing the same images again."""
    dataset = loader.dataset
    if len(dataset) == 0:
        return loader
    first = dataset[0][0]
    if len(dataset) * first.numel() * first.element_size() > max_mb * 2**20:
        return loader
    return [(images, labels) for images, labels in loader]
