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


def expected_max_normal(k: int) -> float:
    """The expected largest of ``k`` draws from a standard normal distribution (order statistics):
    1.16 for 5 draws, 1.54 for 10."""
    from scipy import integrate, stats

    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    density = lambda x: x * k * stats.norm.pdf(x) * stats.norm.cdf(x) ** (k - 1)  # noqa: E731
    return float(integrate.quad(density, -12, 12)[0])


def headroom(random_std: float, seed_std: float, draws: int) -> dict[str, float | None]:
    """How much room a budget band leaves a search (issue 11): if the random networks' accuracies
    spread by ``random_std`` (their means' standard deviation), the best of ``draws`` of them lies
    about ``expected_max_normal(draws) * random_std`` above their mean, so a network must sit that
    plus one seed standard deviation above the mean to beat the best by more than the seed noise.
    Where the band's spread is below the seed noise, no search can be told from a lucky draw by a
    few seeds; the comparison says so rather than leave it to the reader."""
    best = expected_max_normal(draws) * random_std if draws > 1 else 0.0
    return {
        "band_spread_over_seed_noise": random_std / seed_std if seed_std > 0 else None,
        "expected_best_random_over_mean": best,
        "margin_needed_over_random_mean": best + seed_std,
    }
