"""Statistics of a comparison: seed spread and bootstrap intervals.

The question a comparison answers is whether the searched network beats networks drawn at random
at the same budget. Both sides are noisy: each network's from-scratch accuracy varies with the
training seed, and the random networks are a small draw from the budget band. The intervals
therefore resample both (a two-level bootstrap): the seeds of every network, and which random
networks were drawn.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def pooled_std(groups: Sequence[Sequence[float]]) -> float:
    """The seed-to-seed standard deviation pooled over networks (each network's own variance,
    weighted by its degrees of freedom); 0 when no network has two seeds."""
    dof = sum(len(g) - 1 for g in groups)
    if dof <= 0:
        return 0.0
    return math.sqrt(sum((len(g) - 1) * statistics.variance(g) for g in groups if len(g) > 1) / dof)


def bootstrap_margins(
    searched: Sequence[float],
    randoms: Sequence[Sequence[float]],
    seed: int = 0,
    replicates: int = 10_000,
    level: float = 0.95,
) -> dict[str, float]:
    """The searched network's margin over the random networks' mean and over the best random
    network (by mean over seeds), with percentile bootstrap intervals at ``level``.

    Each replicate resamples the searched network's seeds, draws as many random networks as there
    are (with replacement) and resamples each one's seeds."""
    rng = np.random.default_rng(seed)
    s = np.asarray(searched, dtype=float)
    groups = [np.asarray(g, dtype=float) for g in randoms]
    n = len(groups)
    s_means = s[rng.integers(0, len(s), size=(replicates, len(s)))].mean(axis=1)
    draws = rng.integers(0, n, size=(replicates, n))
    net_means = np.empty((replicates, n))
    for j, g in enumerate(groups):  # every network's seeds resampled once per replicate
        net_means[:, j] = g[rng.integers(0, len(g), size=(replicates, len(g)))].mean(axis=1)
    picked = np.take_along_axis(net_means, draws, axis=1)
    over_mean = s_means - picked.mean(axis=1)
    over_best = s_means - picked.max(axis=1)
    tail = (1 - level) / 2 * 100
    means = [float(g.mean()) for g in groups]
    return {
        "margin_over_random_mean": float(s.mean() - np.mean(means)),
        "margin_over_random_mean_ci": [float(v) for v in np.percentile(over_mean, [tail, 100 - tail])],
        "margin_over_best_random": float(s.mean() - max(means)),
        "margin_over_best_random_ci": [float(v) for v in np.percentile(over_best, [tail, 100 - tail])],
        "ci_level": level,
        "bootstrap_replicates": replicates,
    }
