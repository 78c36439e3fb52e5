"""The search split: which training images a run holds out for its search to score on. One rule for
an image folder and for its shards (:mod:`nas.data.shards`), so both hold out the same images."""

from __future__ import annotations

import numpy as np


def search_split(n: int, fraction: float, seed: int) -> np.ndarray:
    """The sorted indices, in the training listing of ``n`` images, of the search split of ``seed``:
    ``round(fraction * n)`` of them (at least one), a seeded permutation's first."""
    order = np.random.default_rng(seed + 1).permutation(n)
    return np.sort(order[: max(1, int(round(fraction * n)))])
