"""``nas data pack``: an ImageNet-layout image folder written as WebDataset tar shards
(:mod:`nas.data.shards` reads them).

Each image is stored as its file's bytes (no re-encoding) under a key made of its class folder and
file name (``n01440764/n01440764_10026``; dots become ``_``, which WebDataset reserves for member
suffixes), with its class index. Training images are written in a seeded shuffled order, so that
every shard mixes the classes; validation images in folder order. ``members.npz`` records where each
image's bytes lie in its tar and its place in the folder's listing, so the shards are also read by
index (:mod:`nas.data.shards`). The shards are written into a
temporary folder beside ``out`` and renamed into place once ``shards.json`` is written, so a killed
pack leaves no ``shards.json`` that names missing shards.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import webdataset

from nas.core.errors import NasError
from nas.data.check import check_images
from nas.data.shard_index import CLASS_MEMBER, FORMAT, INDEX, MEMBERS, VERSION, ShardIndex
from nas.data.source import Listing, _listing_fingerprint, list_folder
from nas.runs.progress import Progress

log = logging.getLogger(__name__)


def _members(listing: Listing, root: Path) -> list[tuple[str, str, str, int]]:
    """(path, key, member suffix, label) of every image of ``listing`` (a split of the folder
    ``root``); two images that would share a key are one line naming them."""
    members, seen = [], {}
    for file, label in zip(listing.files.tolist(), listing.labels.tolist()):
        relative = Path(file.decode())
        path = root / relative
        key = relative.relative_to(relative.parts[0]).with_suffix("").as_posix().replace(".", "_")
        if key in seen:
            raise NasError(f"{path} and {seen[key]} would share the shard key {key!r}; rename one of them")
        seen[key] = path
        members.append((str(path), key, path.suffix[1:].lower(), int(label)))
    return members


def _check_out(out: Path) -> None:
    """``out`` may be new, empty, or a previous pack (replaced); anything else is refused."""
    if out.exists() and not out.is_dir():
        raise NasError(f"{out}: exists and is not a folder; give --out a new or empty folder")
    if out.is_dir() and any(out.iterdir()) and not (out / INDEX).is_file():
        raise NasError(f"{out}: not empty and not a shard folder (no {INDEX}); give --out a new or empty folder")


def _write_split(
    split: str, members: list[tuple[str, str, str, int]], tmp: Path, shard_size: int, bar
) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """Write ``members`` in order as ``split-000000.tar ...`` of ``shard_size`` samples each; returns
    the shards and, per member, the byte offset and size of its image's data in its tar."""
    shards, offsets, sizes = [], [], []
    for number, first in enumerate(range(0, len(members), shard_size)):
        name = f"{split}-{number:06d}.tar"
        chunk = members[first : first + shard_size]
        # mtime 0: packing the same folder with the same seed gives the same bytes
        with webdataset.TarWriter(str(tmp / name), encoder=False, mtime=0) as writer:
            for path, key, suffix, label in chunk:
                try:
                    data = Path(path).read_bytes()
                except OSError as exc:
                    raise NasError(f"{path}: cannot read ({exc.strerror or exc})") from None
                writer.write({"__key__": key, suffix: data, CLASS_MEMBER: str(label).encode()})
                bar.advance()
        # Where each image's bytes landed: read back from the tar's headers (no data is read).
        with tarfile.open(tmp / name) as tar:
            images = [m for m in tar.getmembers() if not m.name.endswith(f".{CLASS_MEMBER}")]
        offsets += [m.offset_data for m in images]
        sizes += [m.size for m in images]
        shards.append({"name": name, "samples": len(chunk), "bytes": (tmp / name).stat().st_size})
    return shards, np.array(offsets, dtype=np.int64), np.array(sizes, dtype=np.int64)


def _shard_numbers(shards: list[dict[str, Any]]) -> np.ndarray:
    return np.repeat(np.arange(len(shards), dtype=np.int32), [s["samples"] for s in shards])


def _decodable(root: Path, listings: dict[str, Listing], skip: bool, workers: int | None, progress: bool):
    """``listings`` less the images that do not decode (the folder's check, :mod:`nas.data.check`,
    its manifest reused), each named in a warning, when ``skip``; else one line naming the first,
    and the paths left out."""
    files = np.concatenate([listing.files for listing in listings.values()])
    sizes = np.concatenate([listing.sizes for listing in listings.values()])
    mtimes = np.concatenate([listing.mtimes for listing in listings.values()])
    result = check_images(root, files, sizes, mtimes, workers, progress)
    if not result.corrupt:
        return listings, []
    if not skip:
        result.raise_if_corrupt(root)
    bad = set()
    for path, message in result.corrupt:
        log.warning("%s: cannot decode (%s); left out of the shards", path, message)
        bad.add(Path(path).relative_to(root).as_posix().encode())
    kept = {}
    for split, listing in listings.items():
        keep = np.array([f not in bad for f in listing.files.tolist()], dtype=bool)
        if not keep.any():
            raise NasError(f"{root / split}: no image decodes; nothing to pack")
        kept[split] = Listing(
            listing.classes, listing.files[keep], listing.labels[keep], listing.sizes[keep], listing.mtimes[keep]
        )
    return kept, sorted(path for path, _ in result.corrupt)


def pack(
    data: str,
    out: str,
    shard_size: int = 1000,
    seed: int = 0,
    progress: bool = True,
    skip_corrupt: bool = False,
    workers: int | None = None,
) -> dict[str, Any]:
    """Write the image folder ``data`` (``train/<class>/*``, and ``val/`` or ``test/``) as shards in
    ``out``; returns what ``shards.json`` holds. ``out`` must be new, empty or a previous pack. An
    image that does not decode is refused, or left out (``skip_corrupt``, named in a warning)."""
    if shard_size < 1:
        raise NasError(f"--shard-size must be at least 1, got {shard_size}")
    root, listings = list_folder(data)
    fingerprint = _listing_fingerprint(listings)  # the folder's, as given (skipped images included)
    train = listings["train"]
    val_split = next((d for d in ("val", "test") if d in listings), None)
    val_dir = root / val_split if val_split else None
    if val_split and listings[val_split].classes != train.classes:
        raise NasError(f"{val_dir}: its classes differ from {root / 'train'}")
    out_path = Path(out)
    _check_out(out_path)
    listings, skipped = _decodable(root, listings, skip_corrupt, workers, progress)
    train = listings["train"]
    train_members = _members(train, root)
    order = np.random.default_rng(seed).permutation(len(train_members))
    splits = {"train": [train_members[i] for i in order]}
    folder_index = {"train": order}  # each stream position's image, as its index in the folder's listing
    if val_split:
        splits["val"] = _members(listings[val_split], root)
        folder_index["val"] = np.arange(len(splits["val"]))
    index: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "classes": train.classes,
        "source": str(root.resolve()),
        "source_fingerprint": fingerprint,
        "skipped": skipped,
        "seed": seed,
        "shard_size": shard_size,
        "val_folder": val_dir.name if val_dir else None,
        "splits": {},
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.parent / f".{out_path.name}.packing-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        total = sum(len(m) for m in splits.values())
        with Progress(f"packing {root.name}", total=total, unit="images", enabled=progress) as bar:
            table: dict[str, np.ndarray] = {}
            for split, members in splits.items():
                shards, offsets, sizes = _write_split(split, members, tmp, shard_size, bar)
                index["splits"][split] = shards
                table.update(
                    {
                        f"{split}_shard": _shard_numbers(shards),
                        f"{split}_offset": offsets,
                        f"{split}_size": sizes,
                        f"{split}_label": np.array([m[3] for m in members], dtype=np.int32),
                        f"{split}_index": folder_index[split].astype(np.int64),
                    }
                )
        np.savez(tmp / MEMBERS, **table)
        index["members"] = {"name": MEMBERS, "bytes": (tmp / MEMBERS).stat().st_size}
        (tmp / INDEX).write_text(json.dumps(index, indent=1) + "\n")
        ShardIndex.load(tmp)  # what training will read: every listed shard there, with its size
        old = None
        if out_path.exists():  # a previous pack (or an empty folder): set aside, then replaced
            old = out_path.parent / f".{out_path.name}.old-{os.getpid()}"
            os.rename(out_path, old)
        os.rename(tmp, out_path)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("%s: %d images packed into %s", data, total, out_path)
    return index
