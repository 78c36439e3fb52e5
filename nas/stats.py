"""Statistics of the studies (``nas compare``, ``nas rank-check``), and nowhere else.

A comparison asks whether the searched network beats networks drawn at random at the same budget.
Both sides are noisy: each network's from-scratch accuracy varies with the training seed, and the
random networks are a small draw from the budget band. The intervals therefore resample both (a
two-level bootstrap): the seeds of every network, and which random networks were drawn.

A ranking study asks how well a cheap ranking (the supernet's, a proxy's) orders networks as
training them from scratch does: Kendall's tau and Spearman's rho with bootstrap intervals over the
networks, and paired differences of tau between two rankings.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

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


def searched_vs_random(rows: Sequence[dict], seed: int, with_supernet: bool) -> dict[str, Any]:
    """A comparison's summary: the searched network (``rows[0]``) against the random ones (the
    rest) by mean top-1 over seeds (``top1``, ``top1_seeds``): its rank, its margins with bootstrap
    intervals, the seed noise, the band's headroom and, ``with_supernet``, Kendall's tau between the
    supernet's ranking (``supernet_top1``) and the from-scratch one."""
    from scipy.stats import kendalltau

    searched_row, random_rows = rows[0], rows[1:]
    random_top1 = [r["top1"] for r in random_rows]
    summary = {
        "searched_top1": searched_row["top1"],
        "random_top1_mean": statistics.fmean(random_top1),
        "random_top1_std": statistics.stdev(random_top1) if len(random_top1) > 1 else 0.0,
        "random_top1_best": max(random_top1),
        "searched_rank": 1 + sum(t > searched_row["top1"] for t in random_top1),
        "random_beaten": sum(t < searched_row["top1"] for t in random_top1),
        "networks": len(rows),
        "seeds": len(searched_row["top1_seeds"]),
        "pooled_seed_std": pooled_std([r["top1_seeds"] for r in rows]),
        **bootstrap_margins(searched_row["top1_seeds"], [r["top1_seeds"] for r in random_rows], seed=seed),
    }
    summary.update(headroom(summary["random_top1_std"], summary["pooled_seed_std"], len(random_rows)))
    if with_supernet:
        tau = kendalltau([r["supernet_top1"] for r in rows], [r["top1"] for r in rows]).statistic
        summary["kendall_tau_supernet_vs_scratch"] = None if tau != tau else float(tau)  # NaN when all tie
    return summary


def rank_stats(
    proxy: list[float], truth: list[float], seed: int = 0, replicates: int = 2000, top_fraction: float = 0.25
) -> dict[str, Any]:
    """Kendall's tau and Spearman's rho of ``proxy`` against ``truth`` with 95% bootstrap intervals
    (networks resampled), and the overlap of their top ``top_fraction``."""
    from scipy.stats import kendalltau, spearmanr

    x, y = np.asarray(proxy, dtype=float), np.asarray(truth, dtype=float)
    rng = np.random.default_rng(seed)
    taus, rhos = [], []
    for _ in range(replicates):
        idx = rng.integers(0, len(x), len(x))
        if len(set(x[idx])) > 1 and len(set(y[idx])) > 1:
            taus.append(kendalltau(x[idx], y[idx]).statistic)
            rhos.append(spearmanr(x[idx], y[idx]).statistic)
    k = max(1, int(round(top_fraction * len(x))))
    top = len(set(np.argsort(-x)[:k]) & set(np.argsort(-y)[:k])) / k
    return {
        "kendall_tau": _finite(kendalltau(x, y).statistic),
        "kendall_tau_ci": _ci(taus),
        "spearman_rho": _finite(spearmanr(x, y).statistic),
        "spearman_rho_ci": _ci(rhos),
        f"top{k}_overlap": top,
    }


def tau_difference(
    first: list[float], second: list[float], truth: list[float], seed: int = 0, replicates: int = 2000
) -> dict[str, Any]:
    """Kendall's tau of ``first`` minus that of ``second`` (both against ``truth``), with a 95%
    paired bootstrap interval: each replicate resamples the networks once for both rankings. Two
    rankings of the same networks share their noise, so their difference is known far better than
    their separate intervals suggest."""
    from scipy.stats import kendalltau

    a, b, y = (np.asarray(v, dtype=float) for v in (first, second, truth))
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(replicates):
        idx = rng.integers(0, len(y), len(y))
        if min(len(set(a[idx])), len(set(b[idx])), len(set(y[idx]))) > 1:
            diffs.append(kendalltau(a[idx], y[idx]).statistic - kendalltau(b[idx], y[idx]).statistic)
    tau_a, tau_b = kendalltau(a, y).statistic, kendalltau(b, y).statistic
    return {"difference": _finite(tau_a - tau_b), "ci": _ci(diffs)}


def rankings_against(
    truth: list[float], rankers: dict[str, list[float]], seed: int = 0, reference: str = "supernet"
) -> dict[str, dict[str, Any]]:
    """:func:`rank_stats` of every ranking in ``rankers`` against ``truth``; every one but
    ``reference`` also gets ``<reference>_minus_tau``, the paired :func:`tau_difference` of the
    reference ranking and it."""
    stats = {name: rank_stats(values, truth, seed=seed) for name, values in rankers.items()}
    for name, values in rankers.items():
        if name != reference:
            stats[name][f"{reference}_minus_tau"] = tau_difference(rankers[reference], values, truth, seed=seed)
    return stats


def _finite(value: float) -> float | None:
    return None if value != value else float(value)


def _ci(values: list[float]) -> list[float] | None:
    values = [v for v in values if v == v]
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if values else None


#: The costs a comparison's random frontier is fitted against: row key -> (name in the summary, what x is).
FRONTIER_COSTS = {"macs": ("log_macs", "ln(MACs)"), "latency_ms": ("latency_ms", "predicted latency (ms)")}


def random_frontier(rows: Sequence[dict], level: float = 0.95) -> dict[str, dict[str, Any]]:
    """The random frontier of a comparison: the random networks' (``rows[1:]``) mean top-1 fitted by least
    squares against ln(MACs) and against predicted latency, and how far the searched network (``rows[0]``)
    lies above (or below) each line at its own cost.

    Equal MES is not equal cost: a searched network that spends its budget on MACs may beat random networks
    only by being bigger. The residual asks whether it beats what random networks of its cost reach. Its
    interval is a t-interval with k - 2 degrees of freedom (k random networks) whose variance is the fitted
    line's at the searched network's cost, s^2 (1/k + (x - mean x)^2 / Sxx), plus the searched network's own
    seed noise, var / n over its n seeds (not included with one seed: ``seed_noise_included``): the interval of
    how far its true mean top-1 lies from the random networks' mean at its cost. Each cost also gets where the
    searched network ranks on it (1: the most costly). With fewer than 3 random networks, no spread in cost
    or no latency, the fit is not estimable (``estimable`` False and a ``reason``)."""
    from scipy import stats

    searched, randoms = rows[0], list(rows[1:])
    seeds = [float(v) for v in searched.get("top1_seeds") or [searched["top1"]]]
    seed_var = statistics.variance(seeds) / len(seeds) if len(seeds) > 1 else 0.0
    out: dict[str, dict[str, Any]] = {}
    for key, (name, label) in FRONTIER_COSTS.items():
        entry: dict[str, Any] = {"x": label, "networks": len(rows)}
        out[name] = entry
        costs = [r.get(key) for r in rows]
        if any(c is None for c in costs):
            entry.update(estimable=False, reason=f"no {label} for every network")
            continue
        entry["searched_rank_by_cost"] = 1 + sum(c > costs[0] for c in costs[1:])
        entry["searched_cost_over_random_mean"] = float(costs[0] / statistics.fmean(costs[1:])) if randoms else None
        x = np.log(np.asarray(costs, dtype=float)) if key == "macs" else np.asarray(costs, dtype=float)
        xs, xr = float(x[0]), x[1:]
        yr = np.asarray([r["top1"] for r in randoms], dtype=float)
        k = len(randoms)
        sxx = float(((xr - xr.mean()) ** 2).sum()) if k else 0.0
        if k < 3:
            entry.update(estimable=False, reason=f"fewer than 3 random networks ({k})")
            continue
        if not sxx > 1e-12 * max(1.0, float(np.abs(xr).max()) ** 2):
            entry.update(estimable=False, reason="the random networks' costs do not vary")
            continue
        slope = float(((xr - xr.mean()) * (yr - yr.mean())).sum() / sxx)
        intercept = float(yr.mean() - slope * xr.mean())
        dof = k - 2
        rss = float(((yr - (intercept + slope * xr)) ** 2).sum())
        s2 = rss / dof if dof > 0 else float("nan")
        fitted = intercept + slope * xs
        residual = float(searched["top1"]) - fitted
        se = math.sqrt(s2 * (1 / k + (xs - xr.mean()) ** 2 / sxx) + seed_var)
        if not se > 0:  # a degenerate interval is no interval
            entry.update(estimable=False, reason="the random networks lie exactly on a line and no seed noise is known")
            continue
        t = float(stats.t.ppf(0.5 + level / 2, dof))
        entry.update(
            estimable=True,
            slope=slope,
            slope_ci=[slope - t * math.sqrt(s2 / sxx), slope + t * math.sqrt(s2 / sxx)],
            intercept=intercept,
            residual_std=math.sqrt(s2),
            searched_x=xs,
            fitted_top1=fitted,
            residual=residual,
            residual_se=se,
            residual_ci=[residual - t * se, residual + t * se],
            p_above=float(stats.t.sf(residual / se, dof)),  # one-sided: the searched network above the line
            dof=dof,
            ci_level=level,
            randoms=k,
            searched_seeds=len(seeds),
            seed_noise_included=len(seeds) > 1,
            extrapolated=not float(xr.min()) <= xs <= float(xr.max()),
        )
    return out
