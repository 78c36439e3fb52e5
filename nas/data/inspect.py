"""What a data folder holds and whether it decodes: the report of ``nas data check``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from nas.data.check import check_images, manifest_path
from nas.data.source import _listing_fingerprint, list_folder
from nas.data.workers import available_cores


def _spread(values: np.ndarray) -> dict[str, int]:
    if not len(values):
        return {}
    return {"min": int(values.min()), "median": int(np.median(values)), "max": int(values.max())}


def check_folder(data: str, workers: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Check every image of ``data`` (train/ and val/ or test/; only new or changed files are
    decoded, :mod:`nas.data.check`) and summarise it: images per split and class, sizes, modes,
    and the corrupt files by name."""
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
        good = result.widths[start:stop] > 0
        per_class = np.bincount(listing.labels, minlength=len(listing.classes))
        splits[split] = {
            "images": int(len(listing.files)),
            "classes": len(listing.classes),
            "images_per_class": _spread(per_class),
            "per_class": dict(zip(listing.classes, per_class.tolist())),
            "width": _spread(result.widths[start:stop][good]),
            "height": _spread(result.heights[start:stop][good]),
            "modes": dict(Counter(m.decode() for m in result.modes[start:stop][good].tolist()).most_common()),
            "bytes": int(listing.sizes.sum()),
        }
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
