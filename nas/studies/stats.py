"""Statistics of the studies (``nas compare``, ``nas rank-check``), and nowhere else.

A comparison asks whether the searched network beats networks drawn at random at the same budget,
with the few seeds and networks users can afford (3 seeds, 5 random networks). Every interval and
test here is chosen to keep its nominal coverage at those sizes (``tests/test_stats_coverage.py``
simulates it), and a quantity the data cannot estimate (one seed, no variance, one network) is
reported as not estimable with the reason, never as a zero-width interval:

- the searched network against each random network: a Welch t-interval of the difference of their
  means over seeds and a one-sided Welch test of "searched > that network"; "beats every random
  network" is every Holm-adjusted one-sided p-value below ``alpha``;
- the margin over the random networks' mean: a two-level t-interval (the random networks are a
  sample of the budget band, so the spread of their means enters, plus the searched network's seed
  noise) with Welch-Satterthwaite degrees of freedom, and its one-sided p-value;
- the margin over the best random network: the Welch interval against that network, named.

(The percentile bootstrap used before resampled 3 seeds with replacement, which shrinks their
variance to 2/3: its intervals covered about 81% for a nominal 95%.)

A ranking study asks how well a cheap ranking (the supernet's, a proxy's) orders networks as
training them from scratch does: Kendall's tau and Spearman's rho with Fisher-z intervals
(Fieller et al. 1957; Bonett and Wright 2000), and paired differences of tau between two rankings
with a U-statistic standard error (Hoeffding 1948); a bootstrap over so few networks resamples ties.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Every interval's level, and the one-sided tests' significance level.
LEVEL = 0.95
ALPHA = 0.05

#: How the comparison's intervals and tests are computed, in words (``result.json``'s ``intervals``).
COMPARISON_METHOD = (
    "searched vs each random network: Welch t-interval of the difference of means over seeds and one-sided Welch "
    "p-value for 'searched > that network', Holm-adjusted over the random networks; beats every random network: "
    "every Holm-adjusted p below alpha. Margin over the random mean: t-interval with Welch-Satterthwaite degrees "
    "of freedom from the spread of the random networks' means (a sample of the band) and the searched network's "
    "seed variance, one-sided p for a margin above zero. Margin over the best random network: the Welch interval "
    "against that network (a bootstrap of a maximum is biased)"
)
#: How a ranking study's intervals are computed, in words (``result.json``'s ``sources.intervals``).
RANKING_METHOD = (
    "95% Fisher-z intervals: Kendall's tau with variance 0.437/(n-4) (Fieller et al. 1957), Spearman's rho with "
    "(1 + rho^2/2)/(n-3) (Bonett and Wright 2000); not estimable at |tau| = 1 or too few networks; paired "
    "differences of tau: the U-statistic difference with its Hoeffding-projection standard error and a normal "
    "quantile, not estimable when every network contributes the same difference"
)


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


def t_interval(
    estimate: float, parts: Sequence[tuple[float, int]], level: float = LEVEL, why: str = ""
) -> dict[str, Any]:
    """A t-interval of ``estimate`` whose squared standard error is the sum of ``parts``, each a
    variance term and its degrees of freedom, combined by Welch-Satterthwaite; with the one-sided
    p-value of "the true value is above zero". A part with no degrees of freedom, or a zero standard
    error, makes it not estimable (``ci`` and ``p`` None, ``reason`` says why)."""
    if any(dof < 1 for _, dof in parts):
        return _not_estimable(estimate, why or "one seed or one network: no variance to estimate")
    if not sum(v for v, _ in parts) > 1e-18:  # a standard error below 1e-9: rounding, not noise
        return _not_estimable(estimate, "zero variance: the seeds give identical accuracies")
    low, high, p, dof = t_bounds(estimate, parts, level)
    return {"estimate": estimate, "ci": [float(low), float(high)], "p": float(p), "dof": float(dof), "reason": None}


def over_comparisons(values: Sequence[float], level: float = LEVEL) -> dict[str, Any]:
    """The mean of one figure (a margin, a difference of two searched networks) over independent
    comparisons, one per supernet seed, with the t-interval of that mean over them. The spread between
    comparisons holds the supernet seed's, the random draw's and the trainings' noise, so the interval
    speaks for a comparison of a new supernet seed in the same setting; one comparison has no spread."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return _not_estimable(mean, "one comparison: no spread between comparisons to estimate")
    return t_interval(mean, [(statistics.variance(values) / len(values), len(values) - 1)], level)


def t_bounds(estimate, parts: Sequence[tuple[Any, int]], level: float = LEVEL) -> tuple[Any, Any, Any, Any]:
    """The arithmetic of :func:`t_interval` on numbers or numpy arrays alike (many comparisons at once,
    as the coverage test simulates them): lower and upper bound, one-sided p-value of "above zero" and
    the Welch-Satterthwaite degrees of freedom. Every variance must be positive."""
    from scipy import stats

    se2 = sum(v for v, _ in parts)
    dof = se2**2 / sum(np.asarray(v) ** 2 / d for v, d in parts)
    se = np.sqrt(se2)
    half = stats.t.ppf(0.5 + level / 2, dof) * se
    return estimate - half, estimate + half, stats.t.sf(estimate / se, dof), dof


def _not_estimable(estimate: float, reason: str) -> dict[str, Any]:
    return {"estimate": estimate, "ci": None, "p": None, "dof": None, "reason": f"not estimable: {reason}"}


def welch(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> dict[str, Any]:
    """Mean of ``a`` minus mean of ``b`` (each a network's accuracy over seeds): Welch's t-interval
    and the one-sided p-value of "``a`` is better" (scipy's ``ttest_ind(equal_var=False)``), in the
    form of :func:`t_interval`."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    estimate = float(a.mean() - b.mean())
    if min(len(a), len(b)) < 2:
        return _not_estimable(estimate, "one seed per network: no seed variance to estimate")
    if not float(a.var(ddof=1)) / len(a) + float(b.var(ddof=1)) / len(b) > 1e-18:
        return _not_estimable(estimate, "zero variance: the seeds give identical accuracies")
    two_sided = stats.ttest_ind(a, b, equal_var=False)
    ci = two_sided.confidence_interval(level)
    p = stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue
    return {
        "estimate": estimate,
        "ci": [float(ci.low), float(ci.high)],
        "p": float(p),
        "dof": float(two_sided.df),
        "reason": None,
    }


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of ``p_values`` (None stays None and counts as untestable)."""
    known = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m, running = len(known), 0.0
    adjusted: list[float | None] = [None] * len(p_values)
    for k, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - k) * p))
        adjusted[i] = running
    return adjusted


def margins(
    searched: Sequence[float],
    randoms: Sequence[Sequence[float]],
    names: Sequence[str] | None = None,
    level: float = LEVEL,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """The searched network (its accuracies over seeds) against the random networks (each one's
    over seeds): per network a Welch interval and Holm-adjusted one-sided p-value; whether it beats
    every one; its margin over their mean (two-level interval) and over the best of them.

    The margin over the best random network is the Welch interval against that one network, named
    (``best_random_network``), not a bootstrap of the maximum: the maximum of a few noisy means is a
    biased, non-smooth statistic, so resampling it gives a lower bound from seed noise alone and an
    upper bound inflated by redrawing networks, with no coverage to speak of. Against a named network
    the interval is an ordinary two-sample one. (It is chosen as the best by the same data, so its
    mean is slightly optimistic and the margin slightly pessimistic: a conservative choice.)

    The margin over the random mean treats the random networks as a sample of the budget band: the
    random-network term is the variance of their means over networks divided by their number (which
    carries both the band's spread and their seed noise), the searched term its seed variance over
    its seeds, combined with Welch-Satterthwaite degrees of freedom."""
    s = np.asarray(searched, dtype=float)
    groups = [np.asarray(g, dtype=float) for g in randoms]
    names = list(names) if names is not None else [f"random-{i}" for i in range(len(groups))]
    means = np.array([g.mean() for g in groups])
    each = [{"network": n, **welch(s, g, level)} for n, g in zip(names, groups)]
    for row, p in zip(each, holm([row["p"] for row in each])):
        row["p_holm"] = p
    adjusted = [row["p_holm"] for row in each]
    testable = all(p is not None for p in adjusted)
    over_mean_estimate = float(s.mean() - means.mean())
    if len(groups) < 2:
        over_mean = _not_estimable(over_mean_estimate, "fewer than 2 random networks: no band spread to estimate")
    elif len(s) < 2:
        over_mean = _not_estimable(over_mean_estimate, "one seed: no seed variance to estimate")
    else:
        over_mean = t_interval(
            over_mean_estimate,
            [(float(means.var(ddof=1)) / len(groups), len(groups) - 1), (float(s.var(ddof=1)) / len(s), len(s) - 1)],
            level,
        )
    best = int(np.argmax(means))
    over_best = each[best]
    return {
        "margin_over_random_mean": over_mean["estimate"],
        "margin_over_random_mean_ci": over_mean["ci"],
        "margin_over_random_mean_p": over_mean["p"],
        "margin_over_random_mean_reason": over_mean["reason"],
        "best_random_network": names[best],
        "margin_over_best_random": over_best["estimate"],
        "margin_over_best_random_ci": over_best["ci"],
        "margin_over_best_random_p": over_best["p"],
        "margin_over_best_random_reason": over_best["reason"],
        "vs_random": [
            {k: row[k] for k in ("network", "estimate", "ci", "dof", "p", "p_holm", "reason")} for row in each
        ],
        "beats_every_random": (max(adjusted) < alpha) if testable else None,
        "beats_every_random_p": max(adjusted) if testable else None,
        "ci_level": level,
        "alpha": alpha,
        "intervals": COMPARISON_METHOD,
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


def searched_vs_random(rows: Sequence[dict], with_supernet: bool) -> dict[str, Any]:
    """A comparison's summary: the searched network (``rows[0]``) against the random ones (the
    rest) by mean top-1 over seeds (``top1``, ``top1_seeds``): its rank, its margins with their
    intervals and p-values (:func:`margins`), the seed noise, the band's headroom and,
    ``with_supernet``, Kendall's tau between the supernet's ranking (``supernet_top1``) and the
    from-scratch one. Deterministic: the same rows give the same summary."""
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
        **margins(
            searched_row["top1_seeds"], [r["top1_seeds"] for r in random_rows], [r["network"] for r in random_rows]
        ),
    }
    summary.update(headroom(summary["random_top1_std"], summary["pooled_seed_std"], len(random_rows)))
    if with_supernet:
        tau = kendalltau([r["supernet_top1"] for r in rows], [r["top1"] for r in rows]).statistic
        summary["kendall_tau_supernet_vs_scratch"] = None if tau != tau else float(tau)  # NaN when all tie
    return summary


def searched_vs_baselines(searched: dict, baselines: Sequence[dict], level: float = LEVEL) -> list[dict[str, Any]]:
    """The searched network (a comparison row: ``top1_seeds``) against each named baseline (rows of the
    published variants a user would otherwise copy): Welch's interval of searched minus baseline and its
    one-sided p-value for "the searched network is better". Each baseline answers its own question (is the
    search worth it at this variant's cost?), so the p-values are not adjusted across baselines. A baseline
    outside the comparison's band (``in_band`` False) keeps its test but is marked: it is not a comparison at
    equal cost."""
    out = []
    for row in baselines:
        test = welch(searched["top1_seeds"], row["top1_seeds"], level)
        sd = pooled_std([searched["top1_seeds"], row["top1_seeds"]])
        out.append(
            {
                "network": row["network"],
                **{k: test[k] for k in ("estimate", "ci", "dof", "p", "reason")},
                "ci_level": level,
                "in_band": row.get("in_band"),
                "seeds_needed": seeds_to_resolve(test["estimate"], sd, level),
            }
        )
    return out


def seeds_to_resolve(margin: float, seed_std: float, level: float = LEVEL, most: int = 100) -> int | None:
    """Training seeds per network for a two-sample t-interval at ``level`` to exclude zero, if the true margin
    were ``margin`` and each network's seed noise ``seed_std``: the smallest n whose half-width
    t(2n - 2) * std * sqrt(2 / n) lies below ``|margin|`` (None: none up to ``most``, or no noise measured). What a
    comparison says of how many seeds its margin needs; a planning figure, not a test."""
    from scipy import stats

    if not seed_std > 0 or margin == 0:
        return None
    for n in range(2, most + 1):
        if stats.t.ppf(0.5 + level / 2, 2 * n - 2) * seed_std * math.sqrt(2 / n) < abs(margin):
            return n
    return None


def correlation_interval(
    value: float | None, n: int, kind: str, level: float = LEVEL
) -> tuple[list[float] | None, str | None]:
    """A Fisher-z interval of Kendall's tau (``kind="kendall"``, variance 0.437/(n-4), Fieller et al.
    1957) or Spearman's rho (``"spearman"``, (1 + rho^2/2)/(n-3), Bonett and Wright 2000) from ``n``
    pairs: an interval with known, near-nominal coverage for small ``n`` where a bootstrap over so
    few networks degenerates (every resample of a perfect ranking is perfect). ``(None, reason)``
    when not estimable: no value, too few networks, or a perfect (anti)correlation, whose z is
    infinite."""
    low = {"kendall": 5, "spearman": 4}[kind]
    if value is None:
        return None, "not estimable: every network ties on one side"
    if n < low:
        return None, f"not estimable: {n} networks, at least {low} needed"
    if abs(value) > 1 - 1e-9:
        return (
            None,
            f"not estimable: a perfect ranking of {n} networks ({value:+.0f}) has no interval of known coverage",
        )
    low, high = fisher_z_bounds(value, n, kind, level)
    return [float(low), float(high)], None


def fisher_z_bounds(value, n: int, kind: str, level: float = LEVEL) -> tuple[Any, Any]:
    """The arithmetic of :func:`correlation_interval` on numbers or numpy arrays alike: the bounds
    tanh(atanh(value) -+ z * sd) for ``|value| < 1``."""
    from scipy.stats import norm

    value = np.asarray(value, dtype=float)
    var = 0.437 / (n - 4) if kind == "kendall" else (1 + value**2 / 2) / (n - 3)
    half = norm.ppf(0.5 + level / 2) * np.sqrt(var)
    z = np.arctanh(value)
    return np.tanh(z - half), np.tanh(z + half)


def rank_stats(proxy: list[float], truth: list[float], top_fraction: float = 0.25) -> dict[str, Any]:
    """Kendall's tau and Spearman's rho of ``proxy`` against ``truth`` with 95% Fisher-z intervals
    (:func:`correlation_interval`; a ``*_reason`` says why one is not estimable), and the overlap of
    their top ``top_fraction``."""
    from scipy.stats import kendalltau, spearmanr

    x, y = np.asarray(proxy, dtype=float), np.asarray(truth, dtype=float)
    k = max(1, int(round(top_fraction * len(x))))
    top = len(set(np.argsort(-x)[:k]) & set(np.argsort(-y)[:k])) / k
    tau, rho = _finite(kendalltau(x, y).statistic), _finite(spearmanr(x, y).statistic)
    tau_ci, tau_reason = correlation_interval(tau, len(x), "kendall")
    rho_ci, rho_reason = correlation_interval(rho, len(x), "spearman")
    return {
        "kendall_tau": tau,
        "kendall_tau_ci": tau_ci,
        "kendall_tau_reason": tau_reason,
        "spearman_rho": rho,
        "spearman_rho_ci": rho_ci,
        "spearman_rho_reason": rho_reason,
        f"top{k}_overlap": top,
    }


def tau_difference(first: list[float], second: list[float], truth: list[float], level: float = LEVEL) -> dict[str, Any]:
    """Kendall's tau of ``first`` minus that of ``second`` (both against ``truth``), with a paired interval:
    the difference is a U-statistic over pairs of networks, and its standard error comes from its
    Hoeffding projection (each network's mean contribution; Hoeffding 1948), with a normal quantile. Two
    rankings of the same networks share their noise, so their difference is known far better than their
    separate intervals suggest. Unlike a percentile bootstrap, whose resamples of so few networks are
    full of ties, this keeps its coverage: 93-96% for a nominal 95% over 20 networks in simulation
    (``tests/test_stats_coverage.py``). Not estimable (``reason``) with fewer than 5 networks or when every
    network contributes the same difference (two rankings that agree or disagree on every pair)."""
    from scipy.stats import kendalltau

    a, b, y = (np.asarray(v, dtype=float) for v in (first, second, truth))
    n = len(y)
    difference = _finite(kendalltau(a, y).statistic - kendalltau(b, y).statistic)
    if difference is None or n < 5:
        reason = "every network ties on one side" if difference is None else f"{n} networks, at least 5 needed"
        return {"difference": difference, "ci": None, "reason": f"not estimable: {reason}"}
    low, high = paired_tau_bounds(a[None], b[None], y[None], level)
    if not high[0] - low[0] > 1e-12:
        reason = "not estimable: every network contributes the same difference, so it has no spread to measure"
        return {"difference": difference, "ci": None, "reason": reason}
    half = (high[0] - low[0]) / 2
    return {"difference": difference, "ci": [difference - half, difference + half], "reason": None}


def paired_tau_bounds(first, second, truth, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The arithmetic of :func:`tau_difference` on arrays of shape (replicates, networks): the bounds of the
    U-statistic tau difference (ties count 0, as in Kendall's tau-a) plus or minus a normal quantile times its
    projection standard error, ``sqrt(4 * sum((h_i - d)^2) / (n (n - 1)))``."""
    from scipy.stats import norm

    def signs(v):
        v = np.asarray(v, dtype=float)
        return np.sign(v[:, :, None] - v[:, None, :])

    kernel = (signs(first) - signs(second)) * signs(truth)
    n = kernel.shape[-1]
    d = kernel.sum(axis=(1, 2)) / (n * (n - 1))
    h = kernel.sum(axis=2) / (n - 1)
    se = np.sqrt(4 * ((h - d[:, None]) ** 2).sum(axis=1) / (n * (n - 1)))
    half = norm.ppf(0.5 + level / 2) * se
    return d - half, d + half


def rankings_against(
    truth: list[float], rankers: dict[str, list[float]], reference: str = "supernet"
) -> dict[str, dict[str, Any]]:
    """:func:`rank_stats` of every ranking in ``rankers`` against ``truth``; every one but
    ``reference`` also gets ``<reference>_minus_tau``, the paired :func:`tau_difference` of the
    reference ranking and it."""
    stats = {name: rank_stats(values, truth) for name, values in rankers.items()}
    for name, values in rankers.items():
        if name != reference:
            stats[name][f"{reference}_minus_tau"] = tau_difference(rankers[reference], values, truth)
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
