"""WebDataset shards: a data set packed into tar files (``nas data pack``, :mod:`nas.data.pack`) and
streamed to the trainers, for nodes that read their data sequentially rather than from a shared file
system.

A shard folder holds ``train-000000.tar ...`` (training images in a seeded shuffled order, so every
shard mixes the classes), ``val-000000.tar ...`` (when the packed folder had val/ or test/) and
``shards.json``: the class names, each shard's name, sample count and size, and the source folder's
fingerprint. Each sample is the original encoded image (member ``<key>.<ext>``, not re-encoded) and
its class index (``<key>.cls``). Reading is the ``webdataset`` package's tar reader.

**Members.** ``members.npz`` (written by the pack, listed in ``shards.json`` with its size) holds,
per split and per position of its stream (the shards in order, their samples in order), the image's
index in the packed folder's listing, its class, its shard and the byte offset and size of its
encoded bytes in that tar. So a shard folder is also read by index, each image by one seek into a
tar (:class:`nas.data.shard_index.MemberTable`): every command that picks images by position (a search's scored and
calibration images, a study's validation) reads the images the folder would give it, in the same
order, and gets the same results.

**Splits.** The search split is the folder's (:func:`nas.data.splits.search_split`: a seeded
``search_fraction`` of the training listing), whichever way the shards are read: a training stream
skips the positions whose image it holds, the search split's stream takes only those.

**An epoch.** Every rank runs ``batches_per_epoch = expected training images // (batch_size *
world)`` steps. The epoch's shards are concatenated in a seeded order (seed, epoch); every rank
and loader worker (a *slot*) reads its own contiguous stretch of that sequence, sized to the batches
it serves, so ranks and workers read their own shards (two neighbours share at most the shard on
their boundary, each its own part of it). A slot whose stretch holds fewer samples than its batches
(the held-out split is hashed, so counts vary a little) reads on into the next stretch, wrapping
around the epoch's sequence: a few images may then be seen twice in that epoch, and as many others
not at all. Within a slot, samples pass a shuffle buffer of :data:`SHUFFLE_BUFFER` encoded images
seeded by (seed, epoch, slot). Each sample's augmentation is seeded by (seed, epoch, a stable hash
of its key), so an image is augmented the same whatever the worker count; which images share a
batch does depend on the number of ranks and workers (each reads its own shards).

**Resume.** ``set_epoch(epoch, start_batch)`` continues an epoch: the DataLoader hands out worker
batches round-robin, so with the same number of ranks and loader workers each worker knows which of
its batches were taken; it reads (without decoding) past them and yields the rest, and the resumed
run sees exactly the batches, in the same order and with the same augmentation, as an uninterrupted
one. With another number of ranks or workers the rest of that epoch is read from the new layout: it
is still seeded, but some images of that epoch may be seen twice and others not at all (later epochs
are as an uninterrupted run with the new layout).
"""

from __future__ import annotations

import hashlib
import io
import logging
import random
import tarfile
from collections.abc import Iterator
from itertools import chain, islice
from typing import Any

import numpy as np
import torch
import webdataset
from PIL import Image, UnidentifiedImageError
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from nas.config.recipe import Recipe
from nas.core.errors import NasError
from nas.data.shard_index import CLASS_MEMBER, Shard, ShardIndex
from nas.data.splits import search_split
from nas.data.workers import loader_options, resolve_workers

log = logging.getLogger(__name__)

#: Encoded images each loader worker shuffles among (about 110 MB of ImageNet JPEGs).
SHUFFLE_BUFFER = 1000


def stable_hash(text: str) -> int:
    """A 64-bit hash of ``text``, the same in every process and Python version (unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class ShardSource:
    """One split of a shard folder read as a stream: its shards and which positions of their stream it
    takes (``kept``, a boolean per position; None: all). ``len()`` is how many it takes."""

    def __init__(self, index: ShardIndex, shards: tuple[Shard, ...], kept: np.ndarray | None = None, name: str = ""):
        self.index, self.shards, self.kept = index, shards, kept
        self.classes, self.name = list(index.classes), name
        self.starts = dict(zip((s.path for s in shards), np.cumsum([0] + [s.samples for s in shards]).tolist()))
        self.expected = int(kept.sum()) if kept is not None else sum(s.samples for s in shards)

    def __len__(self) -> int:
        return self.expected

    def keep(self, sample: dict[str, Any]) -> bool:
        """Whether this split takes ``sample`` (by its position in the split's stream)."""
        return self.kept is None or bool(self.kept[sample["__position__"]])

    def read(self, shard: Shard, skip: int = 0) -> Iterator[dict[str, Any]]:
        """The raw samples of ``shard`` from its ``skip``-th on (skipped ones are read, not kept),
        whether or not this split takes them, each with its ``__position__`` in the split's stream;
        an unreadable tar is one line naming it."""
        start = self.starts[shard.path]
        try:
            for position, sample in enumerate(webdataset.tariterators.tarfile_samples([{"url": shard.path}])):
                if position >= skip:
                    sample["__position__"] = start + position
                    yield sample
        except (tarfile.TarError, OSError, ValueError) as exc:
            raise NasError(f"{shard.path}: cannot read the shard ({exc}); copy it again or pack again") from None


def decode(sample: dict[str, Any]) -> tuple[Image.Image, int]:
    """The RGB image and class of a raw sample; bytes that do not decode are one line naming the
    shard and the member."""
    url, key = sample.get("__url__", "?"), sample.get("__key__", "?")
    images = [k for k in sample if not k.startswith("__") and k != CLASS_MEMBER]
    if len(images) != 1 or CLASS_MEMBER not in sample:
        raise NasError(f"{url}: sample {key} has members {sorted(images)} and needs one image and a .cls")
    try:
        with Image.open(io.BytesIO(sample[images[0]])) as img:
            image = img.convert("RGB")
        label = int(sample[CLASS_MEMBER])
    except (OSError, SyntaxError, ValueError) as exc:  # PIL: truncated, corrupt or not an image
        reason = "not an image PIL recognises" if isinstance(exc, UnidentifiedImageError) else exc
        raise NasError(
            f"{url}: member {key}.{images[0]}: cannot decode ({reason}); pack the shards again from an intact folder"
        ) from None
    return image, label


def seeded_transform(transform, image: Image.Image, sample_seed: int) -> torch.Tensor:
    """``transform(image)`` with Python's and torch's random state seeded by ``sample_seed``, the
    caller's own left untouched."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        random.seed(sample_seed)
        torch.manual_seed(sample_seed)
        tensor = transform(image)
    random.setstate(state)
    return tensor


def _worker() -> tuple[int, int]:
    """(this DataLoader worker's id, the number of workers); (0, 1) in the main process."""
    info = get_worker_info()
    return (info.id, info.num_workers) if info is not None else (0, 1)


class ShardTrainStream(IterableDataset):
    """A rank's training samples for one epoch, as ``(image tensor, label)`` (``keys=True``: and the
    sample's key). It is also the trainer's sampler: :attr:`batches_per_epoch` and
    :meth:`set_epoch` (module docstring: what an epoch reads, what resume restores exactly)."""

    def __init__(
        self,
        source: ShardSource,
        transform,
        seed: int,
        batch_size: int,
        rank: int = 0,
        world: int = 1,
        keys: bool = False,
    ):
        self.source, self.transform, self.seed, self.keys = source, transform, seed, keys
        self.batch_size, self.rank, self.world = batch_size, rank, world
        self.batches_per_epoch = len(source) // (batch_size * world)
        if self.batches_per_epoch < 1:
            raise NasError(
                f"{len(source)} training images (expected, in the shards) are fewer than one batch of "
                f"{batch_size} per process ({world} processes); lower --batch-size"
            )
        # (epoch, start batch), shared with the loader's workers: persistent workers read it when an
        # epoch's iterator starts, after the trainer has set it.
        self._state = torch.zeros(2, dtype=torch.int64).share_memory_()

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """Read epoch ``epoch`` from its batch ``start_batch`` on (the next ``iter()``)."""
        self._state[0], self._state[1] = epoch, start_batch

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter()`` reads."""
        return int(self._state[0])

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self._state[0] = epoch

    def __len__(self) -> int:
        return (self.batches_per_epoch - int(self._state[1])) * self.batch_size

    def _slot_batches(self, role: int, workers: int) -> int:
        return len(range(role, self.batches_per_epoch, workers))

    def _sequence(self, epoch: int, start: int) -> Iterator[dict[str, Any]]:
        """This epoch's shards in their seeded order, endlessly, from raw position ``start`` on (every
        sample, whether this split takes it or not)."""
        shards = self.source.shards
        order = np.random.default_rng([self.seed, epoch, 7]).permutation(len(shards)).tolist()
        first, skip = 0, start % max(sum(s.samples for s in shards), 1)
        while skip >= shards[order[first]].samples and first < len(order) - 1:
            skip -= shards[order[first]].samples
            first += 1
        while True:
            for i in range(len(order)):
                yield from self.source.read(shards[order[(first + i) % len(order)]], skip if i == 0 else 0)
            skip = 0

    def _kept(self, samples: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The samples this split takes (one line if a whole pass of the shards holds none)."""
        total, missed = sum(s.samples for s in self.source.shards), 0
        for sample in samples:
            if self.source.keep(sample):
                missed = 0
                yield sample
            else:
                missed += 1
                if missed > total:
                    raise NasError(f"{self.source.index.root}: no {self.source.name} samples in its shards")

    def __iter__(self):
        worker, workers = _worker()
        epoch, start = (int(v) for v in self._state.tolist())
        # Batch b of the epoch comes from worker b % workers (DataLoader's round-robin). Resumed at
        # batch `start`, this worker's first batch is `start + worker`: it plays the role of the
        # worker that served those batches in an uninterrupted epoch.
        role = (worker + start) % workers
        taken = len(range(role, start, workers)) * self.batch_size
        quota = self._slot_batches(role, workers) * self.batch_size
        # Every rank serves the same batches; slots are (rank, role), each owning a stretch of the
        # epoch's sequence proportional to the samples it yields.
        slots = [(r, w) for r in range(self.world) for w in range(workers)]
        sizes = [self._slot_batches(w, workers) for _, w in slots]
        slot = slots.index((self.rank, role))
        total = sum(s.samples for s in self.source.shards)
        begin, end = (total * sum(sizes[:k]) // max(sum(sizes), 1) for k in (slot, slot + 1))
        # Its own stretch, shuffled; then, only if that ran short, on past its end (wrapping around).
        # Shuffled apart, so that the buffer never reads ahead into the next slot's stretch.
        rng = random.Random(f"shuffle/{self.seed}/{epoch}/{slot}/{len(slots)}")
        shuffle = webdataset.filters.shuffle(SHUFFLE_BUFFER, min(100, SHUFFLE_BUFFER), rng=rng)
        own = self._kept(islice(self._sequence(epoch, begin), end - begin))
        stream = chain(shuffle(own), shuffle(self._kept(self._sequence(epoch, end))))
        for sample in islice(stream, taken, quota):  # skipped ones are read, not decoded
            image, label = decode(sample)
            key = sample["__key__"]
            sample_seed = (self.seed * 1_000_003 + epoch * 10_007 + stable_hash(key)) % 2**63
            tensor = seeded_transform(self.transform, image, sample_seed)
            yield (tensor, label, key) if self.keys else (tensor, label)


class ShardEvalStream(IterableDataset):
    """A split's samples through a deterministic transform, in shard order; each loader worker reads
    its own shards. With ``positions``, only those positions of the split's stream (read in one
    process, up to the last position: a prefix is cheap)."""

    def __init__(self, source: ShardSource, transform, positions: list[int] | None = None, keys: bool = False):
        self.source, self.transform, self.keys = source, transform, keys
        self.positions = sorted(set(positions)) if positions is not None else None

    def _kept(self, shards) -> Iterator[dict[str, Any]]:
        for shard in shards:
            for sample in self.source.read(shard):
                if self.source.keep(sample):
                    yield sample

    def __iter__(self):
        if self.positions is not None:
            if not self.positions:
                return
            wanted, last = set(self.positions), self.positions[-1]
            samples = (s for p, s in enumerate(islice(self._kept(self.source.shards), last + 1)) if p in wanted)
        else:
            worker, workers = _worker()
            samples = self._kept(self.source.shards[worker::workers])
        for sample in samples:
            image, label = decode(sample)
            tensor = self.transform(image)
            yield (tensor, label, sample["__key__"]) if self.keys else (tensor, label)


class ShardLoader:
    """A DataLoader over a shard stream whose errors in a worker process surface as the worker's own
    one-line :class:`NasError` (DataLoader re-raises it wrapped in the worker's traceback)."""

    def __init__(self, loader: DataLoader):
        self.loader, self.dataset = loader, loader.dataset

    def __iter__(self):
        try:
            yield from self.loader
        except NasError as exc:
            message = str(exc)
            if message.startswith("Caught NasError"):
                raise NasError(message.rsplit("NasError: ", 1)[-1]) from None
            raise

    def __len__(self) -> int:
        return len(self.loader)


def shard_splits(
    index: ShardIndex, recipe: Recipe, seed: int, hold_out_search: bool = True
) -> tuple[ShardSource, ShardSource, ShardSource, str]:
    """Train, search and validation splits of the shard folder ``index`` read as streams
    (:func:`nas.data.source.load_splits`'s rules: the folder's search split held out; without val
    shards, validation is the search split)."""
    if recipe.train_images:
        raise NasError(
            f"{index.root}: train_images (a class-balanced subset) picks images by index; streamed shards "
            "cannot: set train_images to 0, or shard_reading to index"
        )
    folder_index = index.members("train").index
    held_out = np.zeros(len(folder_index), dtype=bool)
    held_out[search_split(len(folder_index), recipe.search_fraction, seed)] = True
    in_search = held_out[folder_index]  # per stream position
    search = ShardSource(index, index.train, in_search, "search split")
    train = ShardSource(index, index.train, ~in_search, "train split")
    val = ShardSource(index, index.val, name=f"{index.val_folder} shards") if index.val else None
    if not hold_out_search and val is not None:
        train = ShardSource(index, index.train, name="train shards")
    val_name = (
        f"{index.val_folder}/ folder (shards)" if val is not None else "the search split (no val/ or test/ shards)"
    )
    log.info(
        "%s: %d training images in %d shards (%d in the search split), %d validation, streamed",
        index.root,
        len(folder_index),
        len(index.train),
        len(search),
        len(val) if val is not None else 0,
    )
    return train, search, val if val is not None else search, val_name


def shard_train_loader(
    source: ShardSource,
    transform,
    recipe: Recipe,
    seed: int,
    rank: int = 0,
    world: int = 1,
    keys: bool = False,
    device_type: str = "cpu",
) -> tuple[ShardLoader, ShardTrainStream, ShardTrainStream]:
    """The training loader of a shard split (pinned for a ``cuda`` device); returns ``(loader, sampler,
    dataset)`` as :func:`nas.data.loader.train_loader` does (here the stream is both sampler and dataset)."""
    stream = ShardTrainStream(source, transform, seed, recipe.batch_size, rank, world, keys=keys)
    loader = DataLoader(
        stream,
        batch_size=recipe.batch_size,
        drop_last=True,
        # Its own generator: creating an iterator must not draw from the global RNG.
        generator=torch.Generator().manual_seed(seed),
        **loader_options(resolve_workers(recipe.loader_workers, source), device_type),
    )
    return ShardLoader(loader), stream, stream


def shard_eval_loader(
    source: ShardSource,
    transform,
    recipe: Recipe,
    positions: list[int] | None = None,
    keys: bool = False,
    device_type: str = "cpu",
) -> ShardLoader:
    """An evaluation loader of a shard split (``positions``: only those of its stream, in one process;
    pinned for a ``cuda`` device)."""
    stream = ShardEvalStream(source, transform, positions, keys=keys)
    workers = 0 if positions is not None else resolve_workers(recipe.loader_workers, source)
    return ShardLoader(DataLoader(stream, batch_size=recipe.eval_batch_size, **loader_options(workers, device_type)))
