"""What a data folder or a shard folder holds and whether it decodes: the report of ``nas data check``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from nas.data.check import check_images, manifest_path
from nas.data.shard_check import check_shards, verdict_path
from nas.data.shard_index import ShardIndex, is_shard_folder
from nas.data.source import _listing_fingerprint, list_folder
from nas.data.workers import available_cores


def _spread(values: np.ndarray) -> dict[str, int]:
    if not len(values):
        return {}
    return {"min": int(values.min()), "median": int(np.median(values)), "max": int(values.max())}


def _summary(classes: list[str], labels: np.ndarray, widths, heights, modes, nbytes: int) -> dict[str, Any]:
    good = widths > 0
    per_class = np.bincount(labels, minlength=len(classes))
    return {
        "images": int(len(labels)),
        "classes": len(classes),
        "images_per_class": _spread(per_class),
        "per_class": dict(zip(classes, per_class.tolist())),
        "width": _spread(widths[good]),
        "height": _spread(heights[good]),
        "modes": dict(Counter(m.decode() for m in modes[good].tolist()).most_common()),
        "bytes": int(nbytes),
    }


def check_shard_folder(data: str, workers: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Check every member of the shard folder ``data`` (:mod:`nas.data.shard_check`: each shard
    decoded once, a clean verdict kept by the shards' fingerprint) and summarise it as
    :func:`check_folder` does a folder; corrupt members are named by shard and member."""
    index = ShardIndex.load(data)
    workers = workers or available_cores()
    result = check_shards(index, workers, progress)
    splits = {}
    for split in ("train", "val"):
        shards = index.shards(split)
        if shards:
            labels = index.members(split).label
            nbytes = sum(s.size for s in shards)
            splits[split] = _summary(
                list(index.classes), labels, result.widths[split], result.heights[split], result.modes[split], nbytes
            )
    images = sum(s["images"] for s in splits.values())
    return {
        "data": str(data),
        "fingerprint": index.fingerprint(),
        "splits": splits,
        "corrupt": [
            {"path": f"{shard}: member {member}", "error": message} for shard, member, message in result.corrupt
        ],
        "checked": result.checked,
        "reused": images - result.checked,
        "workers": workers,
        "seconds": round(result.seconds, 3),
        "images_per_s": round(result.images_per_s, 1),
        "manifest": str(verdict_path(index)),
    }


def check_folder(data: str, workers: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Check every image of ``data`` (train/ and val/ or test/; only new or changed files are
    decoded, :mod:`nas.data.check`) and summarise it: images per split and class, sizes, modes,
    and the corrupt files by name. A shard folder is checked by :func:`check_shard_folder`."""
    if is_shard_folder(data):
        return check_shard_folder(data, workers, progress)
    root, listings = list_folder(data)
    files = np.concatenate([listing.files for listing in listings.values()])
    sizes = np.concatenate([listing.sizes for listing in listings.values()])
    mtimes = np.concatenate([listing.mtimes for listing in listings.values()])
    workers = workers or available_cores()
    result = check_images(root, files, sizes, mtimes, workers, progress)
    splits: dict[str, Any] = {}
    start = 0
    for split, listing in listings.items():
        stop = start + len(listing.files)
        window = slice(start, stop)
        splits[split] = _summary(
            listing.classes,
            listing.labels,
            result.widths[window],
            result.heights[window],
            result.modes[window],
            listing.sizes.sum(),
        )
        start = stop
    return {
        "data": str(root),
        "fingerprint": _listing_fingerprint(listings),
        "splits": splits,
        "corrupt": [{"path": path, "error": message} for path, message in result.corrupt],
        "checked": result.checked,
        "reused": result.reused,
        "workers": workers,
        "seconds": round(result.seconds, 3),
        "images_per_s": round(result.images_per_s, 1),
        "manifest": str(manifest_path(root)),
    }
