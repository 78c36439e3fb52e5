"""The decode check, paid once per data set: every image a run reads is decoded before training, so
that a corrupt or truncated file is one error naming it rather than a crash mid-epoch; what was
found is kept in a manifest and reused by every later command, resume and rank.

The manifest of a data folder records, for each image that decoded, its root-relative path, size,
modification time, width, height and PIL mode. An image is checked again only when it is new or its
size or modification time changed (a file replaced by a corrupt one is caught). Images that fail
are not recorded, so they fail again until replaced. Manifests live in one cache folder:
``$NAS_DATA_CACHE`` when set, else ``$XDG_CACHE_HOME/nas/data-check`` (``~/.cache/nas/data-check``),
one file per data folder (named by its resolved path), written atomically; two processes checking
at once lose nothing but a few re-checks.

The check decodes in worker processes, or in threads inside a Ray process (all available cores
by default), with a progress bar that shows images/s and the time left.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import multiprocessing
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from nas.core.errors import NasError
from nas.data.workers import available_cores, fork_is_safe
from nas.runs.progress import Progress

log = logging.getLogger(__name__)

#: Environment variable naming the folder the manifests are kept in.
CACHE_ENV = "NAS_DATA_CACHE"
MANIFEST_VERSION = 1
#: Images per task sent to a worker: large enough that the pool's overhead vanishes beside decoding
#: (~3 ms an ImageNet JPEG), small enough for a live progress bar.
CHUNK = 64


def cache_folder() -> Path:
    """Where manifests are kept: ``$NAS_DATA_CACHE``, else the user's cache folder."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nas" / "data-check"


def manifest_path(root: str | Path) -> Path:
    """The manifest file of the data folder ``root``."""
    resolved = str(Path(root).resolve())
    return cache_folder() / f"{Path(resolved).name}-{hashlib.sha256(resolved.encode()).hexdigest()[:16]}.npz"


@dataclass(frozen=True)
class Manifest:
    """Images that decoded: sorted root-relative paths (bytes) with their size, mtime and what they are."""

    files: np.ndarray
    sizes: np.ndarray
    mtimes: np.ndarray
    widths: np.ndarray
    heights: np.ndarray
    modes: np.ndarray  # bytes: b"RGB", b"L", b"CMYK", ...

    FIELDS = ("files", "sizes", "mtimes", "widths", "heights", "modes")

    @classmethod
    def empty(cls) -> "Manifest":
        return cls(
            np.empty(0, "S1"),
            np.empty(0, np.int64),
            np.empty(0, np.int64),
            np.empty(0, np.int32),
            np.empty(0, np.int32),
            np.empty(0, "S1"),
        )

    @classmethod
    def load(cls, path: Path) -> "Manifest":
        """The manifest at ``path``; empty when there is none, or when it is unreadable (a cache: the
        images are then checked again, and the file rewritten)."""
        if not path.is_file():
            return cls.empty()
        try:
            with np.load(path, allow_pickle=False) as saved:
                if int(saved["version"]) != MANIFEST_VERSION:
                    raise ValueError(f"version {int(saved['version'])}")
                return cls(*(saved[name] for name in cls.FIELDS))
        except (OSError, ValueError, KeyError) as exc:
            log.warning("%s: unreadable check manifest (%s); checking again", path, exc)
            return cls.empty()

    def __len__(self) -> int:
        return len(self.files)

    def find(self, files: np.ndarray, sizes: np.ndarray, mtimes: np.ndarray) -> np.ndarray:
        """For each image, its row here, or -1 where it is missing or its size or mtime changed."""
        if not len(self) or not len(files):
            return np.full(len(files), -1, dtype=np.int64)
        rows = np.minimum(np.searchsorted(self.files, files), len(self) - 1)
        same = (self.files[rows] == files) & (self.sizes[rows] == sizes) & (self.mtimes[rows] == mtimes)
        return np.where(same, rows, -1)

    def merged(self, other: "Manifest") -> "Manifest":
        """This manifest with ``other``'s rows added; ``other``'s row wins for a file in both."""
        both = [np.concatenate([getattr(other, f), getattr(self, f)]) for f in self.FIELDS]
        _, first = np.unique(both[0], return_index=True)  # first occurrence: other's row; sorted by file
        return Manifest(*(column[first] for column in both))

    def save(self, path: Path) -> None:
        """Write atomically, merged with what the file holds (another process's rows too), sorted by file."""
        merged = Manifest.load(path).merged(self)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, version=MANIFEST_VERSION, **{f: getattr(merged, f) for f in self.FIELDS})
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared cache from other users
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _inspect(path: str) -> tuple[int, int, str] | str:
    """(width, height, mode) of an image that decodes whole, else what PIL said."""
    try:
        with Image.open(path) as img:
            img.load()  # the whole decode: a truncated file fails here, not at open
            return img.width, img.height, img.mode
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        return str(exc) or type(exc).__name__


def _inspect_chunk(task: tuple[int, list[str]]) -> tuple[int, list[tuple[int, int, str] | str]]:
    start, paths = task
    return start, [_inspect(p) for p in paths]


def _decode_chunk(task: tuple[int, list[str]]) -> tuple[int, np.ndarray]:
    start, paths = task
    arrays = []
    for p in paths:
        with Image.open(p) as img:
            arrays.append(np.asarray(img.convert("RGB")))
    return start, np.stack(arrays)


def chunked(items: Sequence) -> list[tuple[int, list]]:
    """``items`` as tasks of :data:`CHUNK`: (index of the first, the items)."""
    return [(i, list(items[i : i + CHUNK])) for i in range(0, len(items), CHUNK)]


def pool_map(function, tasks: list[tuple[int, Any]], total: int, workers: int, desc: str, progress: bool):
    """``function`` over ``tasks`` (each ``(start, work)``; yielding ``(start, result)`` as tasks
    finish, ``result`` one entry per image), in-process with one worker, else in ``workers``
    processes (threads where :func:`nas.data.workers.fork_is_safe` says no); a progress bar counts ``total`` images."""
    bar = Progress(desc, total=total, unit="images", enabled=progress)
    try:
        workers = min(workers, len(tasks))
        if workers <= 1:
            pool, mapped = contextlib.nullcontext(), map(function, tasks)
        elif not fork_is_safe():
            # PIL decodes with the GIL released, so threads share the cores without a fork.
            pool = ThreadPoolExecutor(workers)
            mapped = pool.map(function, tasks)
        else:
            # fork where there is one: workers start in milliseconds and need nothing imported again.
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            pool = multiprocessing.get_context(method).Pool(workers)
            mapped = pool.imap_unordered(function, tasks)
        with pool:
            for start, result in mapped:
                yield start, result
                bar.advance(len(result))
    finally:
        bar.close()


@dataclass(frozen=True)
class CheckResult:
    """What the check found for the images asked about (arrays in their order)."""

    widths: np.ndarray
    heights: np.ndarray
    modes: np.ndarray
    corrupt: list[tuple[str, str]]  # (path, what PIL said)
    checked: int  # decoded by this check
    reused: int  # found in the manifest, unchanged
    seconds: float

    @property
    def images_per_s(self) -> float:
        return self.checked / self.seconds if self.seconds > 0 else 0.0

    def raise_if_corrupt(self, root: str | Path) -> None:
        """One line naming the first corrupt image (and how many there are), as a :class:`NasError`."""
        if not self.corrupt:
            return
        path, message = self.corrupt[0]
        more = (
            f"; {len(self.corrupt) - 1} more corrupt images (`nas data check {root}` lists them)"
            if len(self.corrupt) > 1
            else ""
        )
        raise NasError(f"{path}: cannot decode image ({message}); remove or replace the file{more}")


def check_images(
    root: str | Path,
    files: np.ndarray,
    sizes: np.ndarray,
    mtimes: np.ndarray,
    workers: int | None = None,
    progress: bool = True,
) -> CheckResult:
    """Decode the images ``files`` (root-relative, bytes) of the folder ``root`` that its manifest
    does not hold unchanged, in ``workers`` processes (default: every available core); record the
    ones that decode. Corrupt images are reported in the result, not raised."""
    began = time.perf_counter()
    path = manifest_path(root)
    manifest = Manifest.load(path)
    rows = manifest.find(files, sizes, mtimes)
    todo = np.flatnonzero(rows < 0)
    hit = rows >= 0
    widths, heights = np.zeros(len(files), np.int32), np.zeros(len(files), np.int32)
    modes = np.zeros(len(files), "S8")
    widths[hit], heights[hit], modes[hit] = (
        manifest.widths[rows[hit]],
        manifest.heights[rows[hit]],
        manifest.modes[rows[hit]],
    )
    corrupt: list[tuple[str, str]] = []
    if len(todo):
        workers = workers or available_cores()
        paths = [os.path.join(str(root), files[i].decode()) for i in todo]
        log.info(
            "checking %d images of %s (%d reused) in %d processes", len(todo), root, len(files) - len(todo), workers
        )
        ok = np.zeros(len(todo), dtype=bool)
        tasks, desc = chunked(paths), f"checking {Path(root).name}"
        for start, found in pool_map(_inspect_chunk, tasks, len(paths), workers, desc, progress):
            for offset, item in enumerate(found):
                i = todo[start + offset]
                if isinstance(item, str):
                    corrupt.append((paths[start + offset], item))
                else:
                    widths[i], heights[i], modes[i] = item[0], item[1], item[2].encode()
                    ok[start + offset] = True
        good = todo[ok]
        if len(good):
            # save() merges these rows into the manifest on disk (sorted, for the binary search of find()).
            Manifest(files[good], sizes[good], mtimes[good], widths[good], heights[good], modes[good]).save(path)
        corrupt.sort()
    seconds = time.perf_counter() - began
    result = CheckResult(widths, heights, modes, corrupt, len(todo), len(files) - len(todo), seconds)
    if len(todo):
        log.info(
            "checked %d images in %.1f s (%.0f images/s), %d corrupt; manifest %s",
            len(todo),
            seconds,
            result.images_per_s,
            len(corrupt),
            path,
        )
    return result


def decode_all(root: str | Path, files: np.ndarray, shape: tuple[int, int, int], workers: int | None = None):
    """Every image of ``files`` decoded to RGB into one ``uint8`` array of ``(len(files), *shape)``,
    in worker processes: the in-memory cache of a small data set whose images share a size."""
    pixels = np.empty((len(files), *shape), dtype=np.uint8)
    paths = [os.path.join(str(root), f.decode()) for f in files]
    for start, block in pool_map(
        _decode_chunk, chunked(paths), len(paths), workers or available_cores(), "caching", True
    ):
        pixels[start : start + len(block)] = block
    return pixels
