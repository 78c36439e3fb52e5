"""The decode check of a shard folder (``nas data check SHARDS``, and every training on shards before
its first step): every member of every shard decoded once, a shard per task in worker processes.

A clean verdict is kept whole in the check cache folder beside the folders' manifests
(:func:`nas.data.check.cache_folder`), under the shards' fingerprint and every shard's modification
time: shards copied to another disk, or changed in place, are checked again. A folder with a corrupt
member is not recorded, and is checked again until packed again.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from nas.core.errors import NasError
from nas.data.check import cache_folder, chunked, pool_map
from nas.data.shard_index import CLASS_MEMBER, MemberTable, ShardIndex
from nas.data.workers import available_cores

log = logging.getLogger(__name__)

SPLITS = ("train", "val")


def verdict_path(index: ShardIndex) -> Path:
    """Where the clean verdict of the shards ``index`` is kept (module docstring)."""
    stamp = hashlib.sha256(str(Path(index.root).resolve()).encode())
    for shard in (*index.train, *index.val):
        stamp.update(f"{Path(shard.path).name}:{Path(shard.path).stat().st_mtime_ns}\n".encode())
    return cache_folder() / f"shards-{index.fingerprint()}-{stamp.hexdigest()[:16]}.npz"


def _inspect_shard(task: tuple[int, str]) -> tuple[int, list[tuple[str, tuple[int, int, str] | str]]]:
    """(member name, (width, height, mode) or what PIL said) of every image of one shard, in order."""
    start, path = task
    found: list[tuple[str, tuple[int, int, str] | str]] = []
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                if not member.isfile() or member.name.endswith(f".{CLASS_MEMBER}"):
                    continue
                data = tar.extractfile(member).read()
                try:
                    with Image.open(io.BytesIO(data)) as img:
                        img.load()  # the whole decode: a truncated image fails here, not at open
                        found.append((member.name, (img.width, img.height, img.mode)))
                except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
                    found.append((member.name, str(exc) or type(exc).__name__))
    except (tarfile.TarError, OSError) as exc:
        found.append(("(the tar itself)", f"cannot read the shard: {exc}"))
    return start, found


@dataclass(frozen=True)
class ShardCheck:
    """What the check found: per split, each image's width, height and mode in stream order; the
    corrupt members as (shard, member, what PIL said)."""

    root: str
    widths: dict[str, np.ndarray]
    heights: dict[str, np.ndarray]
    modes: dict[str, np.ndarray]
    corrupt: list[tuple[str, str, str]]
    checked: int  # decoded by this check (0: the verdict was kept from an earlier one)
    seconds: float

    @property
    def images_per_s(self) -> float:
        return self.checked / self.seconds if self.seconds > 0 else 0.0

    def raise_if_corrupt(self) -> None:
        """One line naming the first corrupt member (and how many there are), as a :class:`NasError`."""
        if not self.corrupt:
            return
        shard, member, message = self.corrupt[0]
        more = len(self.corrupt) - 1
        listed = f"; {more} more corrupt members (`nas data check {self.root}` lists them)" if more else ""
        raise NasError(
            f"{shard}: member {member}: cannot decode ({message}); pack the shards again from an intact folder{listed}"
        )

    def image_sizes(self, split: str, members: MemberTable) -> tuple[np.ndarray, np.ndarray]:
        """Widths and heights of ``members`` (rows of ``split``'s table, in any order)."""
        return self.widths[split][members.position], self.heights[split][members.position]


def _decode_member_chunk(task: tuple[int, list[tuple[str, int, int]]]) -> tuple[int, np.ndarray]:
    start, members = task
    arrays = []
    for path, offset, size in members:
        with open(path, "rb") as tar:
            tar.seek(offset)
            data = tar.read(size)
        with Image.open(io.BytesIO(data)) as img:
            arrays.append(np.asarray(img.convert("RGB")))
    return start, np.stack(arrays)


def decode_members(members: MemberTable, shape: tuple[int, int, int], workers: int | None = None) -> np.ndarray:
    """Every image of ``members`` decoded to RGB into one ``uint8`` array of ``(len(members), *shape)``,
    in worker processes: the in-memory cache of a small data set read by index from its shards."""
    pixels = np.empty((len(members), *shape), dtype=np.uint8)
    where = [(members.paths[int(s)], int(o), int(n)) for s, o, n in zip(members.shard, members.offset, members.size)]
    for start, block in pool_map(
        _decode_member_chunk, chunked(where), len(where), workers or available_cores(), "caching", True
    ):
        pixels[start : start + len(block)] = block
    return pixels


def _load_verdict(path: Path, root: str) -> ShardCheck | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as saved:
            arrays = {name: {s: saved[f"{s}_{name}"] for s in SPLITS} for name in ("widths", "heights", "modes")}
    except (OSError, ValueError, KeyError) as exc:
        log.warning("%s: unreadable shard check verdict (%s); checking again", path, exc)
        return None
    return ShardCheck(root, arrays["widths"], arrays["heights"], arrays["modes"], [], 0, 0.0)


def _save_verdict(path: Path, result: ShardCheck) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            arrays = {
                f"{s}_{name}": getattr(result, name)[s] for name in ("widths", "heights", "modes") for s in SPLITS
            }
            np.savez(out, **arrays)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_shards(index: ShardIndex, workers: int | None = None, progress: bool = True) -> ShardCheck:
    """Decode every image of the shards ``index`` once (a shard per task, ``workers`` processes,
    default every available core), or read the clean verdict an earlier check kept. Corrupt members
    are reported in the result, not raised."""
    path = verdict_path(index)
    kept = _load_verdict(path, index.root)
    if kept is not None:
        return kept
    began = time.perf_counter()
    workers = workers or available_cores()
    shards = [(split, shard) for split in SPLITS for shard in index.shards(split)]
    total = sum(shard.samples for _, shard in shards)
    log.info("checking %d images in %d shards of %s in %d processes", total, len(shards), index.root, workers)
    widths = {s: np.zeros(sum(x.samples for x in index.shards(s)), np.int32) for s in SPLITS}
    heights = {s: np.zeros_like(widths[s]) for s in SPLITS}
    modes = {s: np.zeros(len(widths[s]), "S8") for s in SPLITS}
    firsts = {}  # task number -> (split, position of the shard's first image in the split's stream)
    for split in SPLITS:
        position = 0
        for shard in index.shards(split):
            firsts[len(firsts)] = (split, position)
            position += shard.samples
    tasks = [(number, shard.path) for number, (_, shard) in enumerate(shards)]
    corrupt = []
    for number, found in pool_map(_inspect_shard, tasks, total, workers, f"checking {Path(index.root).name}", progress):
        split, first = firsts[number]
        shard = shards[number][1]
        if len(found) != shard.samples and not any(isinstance(item, str) for _, item in found):
            corrupt.append((shard.path, "(the tar itself)", f"{len(found)} images, shards.json says {shard.samples}"))
        for offset, (member, item) in enumerate(found):
            if isinstance(item, str):
                corrupt.append((shard.path, member, item))
            elif first + offset < len(widths[split]):
                i = first + offset
                widths[split][i], heights[split][i], modes[split][i] = item[0], item[1], item[2].encode()
    corrupt.sort()
    seconds = time.perf_counter() - began
    result = ShardCheck(index.root, widths, heights, modes, corrupt, total, seconds)
    log.info(
        "checked %d images in %.1f s (%.0f images/s), %d corrupt", total, seconds, result.images_per_s, len(corrupt)
    )
    if not corrupt:
        _save_verdict(path, result)
    return result
