"""How a comparison (:mod:`nas.studies.compare`) is written down: where its numbers come from, the CSV,
the Markdown table and verdict the CLI prints and ``compare.md`` holds, the cost and frontier words, and
``compare.png``."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np

from nas.config.recipe import Recipe
from nas.runs.config import CompareRunConfig
from nas.runs.writers import csv_text, pyplot, save_figure
from nas.search.input_size import input_size_words
from nas.search.objective import Objective
from nas.studies.trainings import (
    train_images_words,
)


def sources_words(
    config: CompareRunConfig,
    objective: Objective,
    space,
    table,
    recipe: Recipe,
    trained: list[dict],
    num_classes: int,
    draws: dict,
) -> dict[str, str]:
    """Where each column's numbers come from, in words (``trained``: every training's ``result.json``)."""
    first = next((r for r in trained if "val" in r), trained[0])  # one trained here (not a recorded result)
    seeds = [config.seed + k for k in range(config.seeds)]
    sources = {
        "accuracy": f"top-1 on {first['val']} ({first['val_images']} images) after training from scratch for "
        f"{first['step']} steps ({recipe.epochs} epochs planned) on {train_images_words(first, recipe)} with recipe "
        f"{config.recipe_name or 'custom'}, seed{'s' if len(seeds) > 1 else ''} "
        f"{', '.join(map(str, seeds))} per network (mean and standard deviation over seeds), input "
        f"{recipe.img_size}x{recipe.img_size}; data: {config.data or 'scikit-learn digits'}",
        "hardware": hardware_words(trained),
        "cost": f"params and MACs exact (counted), at {config.img_size}x{config.img_size} with a {num_classes}-class "
        "head",
        "resolution": input_size_words(config.img_size, recipe.img_size),
        "latency": table.describe_source() if table is not None else "no latency table (no --device)",
        "sampling": (
            f"random sub-networks of {space.name}, uniform per choice, within {100 * config.tolerance:g}% of "
            f"{'--target' if config.target is not None else 'the searched network'}'s {objective.name} "
            f"{objective.target:.4g} on the side that meets it; " + draws_words(draws)
            if config.random
            else "no random networks (--random 0): the searched network against named baselines only"
        ),
    }
    if config.random:
        sources["frontier"] = (
            "least squares of the random networks' mean top-1 against ln(MACs) and against predicted "
            "latency; the searched network's residual has a t-interval (k - 2 degrees of freedom) of the line at "
            "its cost plus its own seed noise"
        )
    if config.baselines:
        low, high = objective.band(config.tolerance)
        sources["baselines"] = (
            f"named networks of {space.name} (--baseline: the published variants a user would otherwise copy, or "
            "arch YAMLs), trained from scratch with the same recipe, data and seeds; searched minus each by Welch's "
            "t-interval and one-sided p-value, not adjusted across baselines (each answers its own budget's "
            f"question); a baseline outside the band {low:.4g} to {high:.4g} keeps its test but is marked: its cost "
            "differs from the searched network's"
        )
    if config.supernet:
        sources["supernet accuracy"] = (
            f"top-1 of the sub-network with the weights of supernet {config.supernet}, "
            "BatchNorm recalibrated, on that run's search split (what the search saw)"
        )
    return sources


def hardware_words(trained: list[dict]) -> str:
    """Where a study's trainings ran, from each one's provenance: a GPU's name or the CPU, with torch's
    version and how many trainings ran there (a study may train part of its networks on another machine,
    docs/results/studies/trainings_elsewhere.py)."""
    places = Counter(_machine_words(result) for result in trained)
    return "trained on " + "; ".join(f"{where}: {n} of {len(trained)} trainings" for where, n in places.items())


def _machine_words(result: dict) -> str:
    if "reused_result" in result:
        return f"recorded by {Path(result['reused_result']['path']).parent} (its result.json)"
    p = result.get("provenance", {})
    where = f"{p['cuda']} (CUDA)" if p.get("cuda") else f"the CPU ({p.get('cpus', '?')} cores)"
    return f"{where}, torch {p.get('torch', '?')}"


def draws_words(draws: dict) -> str:
    """How a comparison's random networks were chosen, in words."""
    if "random_from" in draws:
        source = draws["random_from"]
        reused = source.get("trainings_reused")
        return f"reused from {source['path']} (plan.json digest {source['plan_digest']}): not an independent draw" + (
            f"; {reused} trainings copied from there (same network, recipe, data and seed)" if reused else ""
        )
    if draws.get("seed_only"):
        return (
            f"drawn with --seed {draws['draw_seed']} alone (a comparison from before draws depended on the searched "
            "network: other comparisons in this space with this seed drew the same networks)"
        )
    return f"drawn with seed {draws['draw_seed']} (SHA-256 of the searched network's digest and --seed)"


CSV_FIELDS = (
    "network",
    "kind",
    "top1",
    "top1_std",
    "top1_ema",
    "supernet_top1",
    "params",
    "macs",
    "latency_ms",
    "latency_low_ms",
    "latency_high_ms",
    "mes",
    "digest",
    "top1_seeds",
)


def to_csv(rows: list[dict]) -> str:
    """The comparison rows as CSV (columns ``CSV_FIELDS``; the per-seed top-1 space-separated)."""
    return csv_text(
        [
            {
                **r,
                "top1_seeds": " ".join(f"{v:.6f}" for v in r.get("top1_seeds", [])),
                "latency_low_ms": (r.get("latency_interval_ms") or [None, None])[0],
                "latency_high_ms": (r.get("latency_interval_ms") or [None, None])[1],
            }
            for r in rows
        ],
        CSV_FIELDS,
    )


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table_lines(rows: list[dict]) -> list[str]:
    """The comparison as a Markdown table (also what the CLI prints)."""
    ema = any(r.get("top1_ema") is not None for r in rows)
    supernet = any(r.get("supernet_top1") is not None for r in rows)
    intervals = any(r.get("latency_interval_ms") for r in rows)
    head = (
        "| network | top-1 (%) |"
        + (" top-1 EMA (%) |" if ema else "")
        + (" supernet top-1 (%) |" if supernet else "")
        + f" params (M) | MACs (M) | latency (ms{', interval' if intervals else ''}) | MES | digest |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        name = _network_cell(r)
        spread = f" ± {100 * r['top1_std']:.2f}" if len(r.get("top1_seeds", [])) > 1 else ""
        cells = [name, _fmt(100 * r["top1"], ".2f") + spread]
        if ema:
            cells.append(_fmt(None if r.get("top1_ema") is None else 100 * r["top1_ema"], ".2f"))
        if supernet:
            cells.append(_fmt(None if r.get("supernet_top1") is None else 100 * r["supernet_top1"], ".2f"))
        cells += [
            _fmt(r["params"] / 1e6, ".3f"),
            _fmt(r["macs"] / 1e6, ".1f"),
            _fmt(r["latency_ms"], ".3f")
            + (" ({:.3f}–{:.3f})".format(*r["latency_interval_ms"]) if r.get("latency_interval_ms") else ""),
            _fmt(r["mes"], ".1f"),
            f"`{r['digest']}`",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _network_cell(row: dict) -> str:
    """A network's name as the tables show it: the searched one in bold, a named baseline in italics."""
    if row["kind"] == "searched":
        return f"**{row['network']}**"
    return f"*{row['network']}*" if row["kind"] == "baseline" else row["network"]


def _p(p: float | None) -> str:
    """A p-value as the text shows it."""
    if p is None:
        return "p not estimable"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _margin_words(s: dict, key: str) -> str:
    """``+0.73 points (95% CI +0.10 to +1.36, one-sided p = 0.031)``, or why it is not estimable."""
    ci = s.get(f"{key}_ci")
    if ci is None:
        reason = s.get(f"{key}_reason") or "not estimable"
        return f"{100 * s[key]:+.2f} points ({reason})"
    level = int(round(100 * s["ci_level"]))
    return (
        f"{100 * s[key]:+.2f} points ({level}% CI {100 * ci[0]:+.2f} to {100 * ci[1]:+.2f}, one-sided "
        f"{_p(s.get(f'{key}_p'))})"
    )


def verdict_words(s: dict) -> str:
    """Whether the searched network beats every random network, with its p-value (Holm-adjusted)."""
    if "beats_every_random" not in s:  # a summary written before these statistics
        return "beats every random network: not judged (no p-values in this result)"
    if s["beats_every_random"] is None:
        return "beats every random network: not estimable (one seed per network or no seed variance)"
    alpha = s.get("alpha", 0.05)
    return (
        f"beats every random network: {'yes' if s['beats_every_random'] else 'no'} (largest Holm-adjusted "
        f"one-sided p {s['beats_every_random_p']:.3f}, alpha {alpha:g})"
    )


def summary_line(result: dict) -> str:
    """The comparison in one line: searched vs random top-1 and rank; over seeds, the margins with their
    intervals and p-values, the verdict on beating every random network with its p-value, and the
    supernet's Kendall's tau when there are."""
    s = result["summary"]
    if "random_top1_mean" not in s:  # --random 0: only baselines
        return "; ".join([f"searched {100 * s['searched_top1']:.2f}%", *baseline_words(result)])
    line = (
        f"searched {100 * s['searched_top1']:.2f}% vs random {100 * s['random_top1_mean']:.2f}% "
        f"+- {100 * s['random_top1_std']:.2f}% (mean +- std of {s['networks'] - 1}; best "
        f"{100 * s['random_top1_best']:.2f}%): the searched network ranks {s['searched_rank']} of {s['networks']}"
    )
    if "margin_over_random_mean_ci" in s:
        best = s.get("best_random_network", "")
        line += (
            f"; over {s.get('seeds', 1)} seed(s) per network: margin over the random mean "
            f"{_margin_words(s, 'margin_over_random_mean')}, over the best random{' (' + best + ')' if best else ''} "
            f"{_margin_words(s, 'margin_over_best_random')}; {verdict_words(s)}; higher mean than "
            f"{s['random_beaten']} of {s['networks'] - 1} random networks; pooled seed std "
            f"{100 * s['pooled_seed_std']:.2f} points"
        )
    if s.get("band_spread_over_seed_noise") is not None:
        line += (
            f"; the random networks spread by {100 * s['random_top1_std']:.2f} points (std), "
            f"{s['band_spread_over_seed_noise']:.1f}x the seed noise: to beat the best of {s['networks'] - 1} by "
            f"more than the seed noise, a network must sit about {100 * s['margin_needed_over_random_mean']:.2f} "
            f"points above the random mean (the searched one: {100 * s['margin_over_random_mean']:+.2f})"
        )
    if "kendall_tau_supernet_vs_scratch" in s:
        tau = s["kendall_tau_supernet_vs_scratch"]
        line += f"; Kendall's tau, supernet vs from-scratch ranking: {'-' if tau is None else format(tau, '.2f')}"
    return "; ".join([line, *baseline_words(result)])


def baseline_words(result: dict) -> list[str]:
    """The searched network against each named baseline, one clause each: the margin with its interval,
    whether the interval lies above zero, or that the baseline lies outside the band (and its cost)."""
    tests = result["summary"].get("vs_baselines", [])
    rows = {r["network"]: r for r in result.get("rows", [])} if tests else {}
    clauses = []
    for test in tests:
        row = rows[test["network"]]
        margin = _margin_words(
            {
                "m": test["estimate"],
                "m_ci": test["ci"],
                "m_p": test["p"],
                "m_reason": test["reason"],
                "ci_level": test["ci_level"],
            },
            "m",
        )
        if test["ci"] is None:
            verdict = "not judged"
        elif test["ci"][0] > 0:
            verdict = "better: the interval lies above zero"
        elif test["ci"][1] < 0:
            verdict = "worse: the interval lies below zero"
        else:
            verdict = "not told apart: the interval spans zero"
        clause = f"against {row['network']} ({100 * row['top1']:.2f}%): {margin}, {verdict}"
        if test["ci"] is not None and not (test["ci"][0] > 0 or test["ci"][1] < 0):
            needed = test.get("seeds_needed")
            clause += (
                f" (at this seed noise about {needed} seeds per network would resolve a margin this size)"
                if needed
                else " (no number of seeds up to 100 would resolve a margin this size at this seed noise)"
            )
        if test.get("in_band") is False:
            clause += f" (but {row['network']} lies outside the band, {_cost_words(row, result)}: not equal cost)"
        clauses.append(clause)
    return clauses


def _cost_words(row: dict, result: dict) -> str:
    """A baseline's objective value against the band, e.g. ``latency 1.590 ms, band 1.140 to 1.200``."""
    name = result["objective"]["name"]
    value = {"latency": row.get("latency_ms"), "mes": row.get("mes"), "params": row.get("params")}.get(name)
    low, high = row.get("band") or (None, None)
    unit = {"latency": " ms", "params": " parameters"}.get(name, "")
    shown = "-" if value is None else f"{value:.4g}"
    return f"{name} {shown}{unit}, band {low:.4g} to {high:.4g}" if low is not None else f"{name} {shown}{unit}"


def baseline_lines(result: dict) -> list[str]:
    """compare.md's section on the named baselines: per baseline its top-1, predicted cost, whether it lies
    in the band, and searched minus it with Welch's interval ([] without baselines)."""
    tests = result["summary"].get("vs_baselines")
    if not tests:
        return []
    rows = {r["network"]: r for r in result["rows"]}
    level = int(round(100 * tests[0]["ci_level"]))
    lines = [
        "## The searched network against the named baselines",
        "",
        f"| baseline | top-1 (%) | latency (ms, interval) | params (M) | in the band | searched minus (points) | "
        f"{level}% CI (Welch) | one-sided p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for test in tests:
        r = rows[test["network"]]
        spread = f" ± {100 * r['top1_std']:.2f}" if len(r.get("top1_seeds", [])) > 1 else ""
        latency = _fmt(r.get("latency_ms"), ".3f") + (
            " ({:.3f}–{:.3f})".format(*r["latency_interval_ms"]) if r.get("latency_interval_ms") else ""
        )
        band = "yes" if test.get("in_band") else f"no ({_cost_words(r, result)})"
        ci = test["reason"] if test["ci"] is None else f"{100 * test['ci'][0]:+.2f} to {100 * test['ci'][1]:+.2f}"
        lines.append(
            f"| *{r['network']}* | {100 * r['top1']:.2f}{spread} | {latency} | {r['params'] / 1e6:.3f} | {band} | "
            f"{100 * test['estimate']:+.2f} | {ci} | {'-' if test['p'] is None else format(test['p'], '.3f')} |"
        )
    return [*lines, ""]


def welch_lines(summary: dict) -> list[str]:
    """The searched network against each random network as a Markdown table: the Welch interval of the
    difference and its one-sided p-value, raw and Holm-adjusted ([] for a summary without them)."""
    if not summary.get("vs_random"):
        return []
    level = int(round(100 * summary["ci_level"]))
    lines = [
        f"| searched minus | difference (points) | {level}% CI (Welch) | one-sided p | Holm-adjusted p |",
        "|---|---|---|---|---|",
    ]
    for row in summary["vs_random"]:
        ci = row["ci"]
        lines.append(
            f"| {row['network']} | {100 * row['estimate']:+.2f} | "
            + (row["reason"] if ci is None else f"{100 * ci[0]:+.2f} to {100 * ci[1]:+.2f}")
            + f" | {'-' if row['p'] is None else format(row['p'], '.3f')} | "
            f"{'-' if row['p_holm'] is None else format(row['p_holm'], '.3f')} |"
        )
    return lines


def _against_words(rows: list[dict]) -> str:
    """What the searched network is set against: "random sub-networks", "named baselines" or both."""
    kinds = {r["kind"] for r in rows}
    words = [w for k, w in (("random", "random sub-networks"), ("baseline", "named baselines")) if k in kinds]
    return " and ".join(words) or "random sub-networks"


def to_markdown(result: dict) -> str:
    """``compare.md``: the budget, the table, the tests against each random network, the summary line
    with the verdict and where the numbers come from."""
    objective = result["objective"]
    s = result["summary"]
    tests = welch_lines(s)
    lines = [
        f"# Searched vs {_against_words(result['rows'])} of {result['space']}",
        "",
        f"Budget: {objective['name']} {objective['target']:.4g} "
        + (
            f"(--target; the searched network, {result['searched'] or 'searched arch'}, meets it)."
            if result.get("target_given")
            else f"(the searched network's own, {result['searched'] or 'searched arch'})."
        ),
        "",
        *table_lines(result["rows"]),
        "",
        *([*tests, ""] if tests else []),
        *baseline_lines(result),
        summary_line(result) + ".",
        "",
        *frontier_lines(result),
        "Where the numbers come from:",
        "",
    ]
    lines += [f"- {key}: {text}" for key, text in result["sources"].items()]
    if s.get("intervals"):
        lines.append(f"- intervals and tests: {s['intervals']}")
    return "\n".join(lines) + "\n"


#: The costs of compare.md's cost table: row key -> (column, what it is, the most and the least of it, format, scale).
_COSTS = {
    "macs": ("MACs (M)", "MACs", ("the most", "the fewest"), ".1f", 1e-6),
    "latency_ms": ("latency (ms)", "predicted latency", ("the highest", "the lowest"), ".3f", 1.0),
}


def _rank_words(rank: int, n: int, key: str) -> str:
    _, what, (most, least), _, _ = _COSTS[key]
    if rank == 1:
        return f"{most} {what} of the {n}"
    if rank == n:
        return f"{least} {what} of the {n}"
    return f"rank {rank} of {n} by {what} (1: {most})"


def _cost_rank(rows: list[dict], i: int, key: str) -> int:
    """Rank of network ``i`` by cost ``key`` among ``rows`` (1: the most costly; ties share the better rank)."""
    return 1 + sum(r[key] > rows[i][key] for r in rows)


def _frontier_words(name: str, fit: dict) -> str:
    what = "ln(MACs)" if name == "log_macs" else "predicted latency"
    if not fit.get("estimable"):
        return f"- against {what}: not estimable ({fit.get('reason', 'no fit')})"
    level = int(round(100 * fit["ci_level"]))
    if name == "log_macs":  # points per doubling reads better than per unit of ln(MACs)
        per, scale = "per doubling of MACs", 100 * math.log(2)
    else:
        per, scale = "per ms", 100.0
    lo, hi = fit["residual_ci"]
    slo, shi = fit["slope_ci"]
    side = "above" if fit["residual"] >= 0 else "below"
    notes = ""
    if not fit.get("seed_noise_included"):
        notes += "; the searched network's seed noise is not included: one seed"
    if fit.get("extrapolated"):
        notes += "; extrapolated: its cost lies outside the random networks' range"
    return (
        f"- against {what}: the random networks' top-1 changes by {scale * fit['slope']:+.2f} points {per} "
        f"({level}% CI {scale * slo:+.2f} to {scale * shi:+.2f}); the searched network lies "
        f"{100 * abs(fit['residual']):.2f} points {side} that line at its cost ({level}% CI {100 * lo:+.2f} to "
        f"{100 * hi:+.2f}, t with {fit['dof']} dof; one-sided p = {fit['p_above']:.3f} for lying above it{notes})"
    )


def frontier_lines(result: dict) -> list[str]:
    """compare.md's frontier section: every network's MACs, latency and MES with its top-1 (most MACs
    first), where the searched network sits on each cost, and how far above or below the random networks'
    fitted accuracy-cost lines (:func:`nas.studies.stats.random_frontier`) it lies. Empty for a result without them."""
    rows, frontier = result["rows"], result.get("summary", {}).get("frontier")
    if frontier is None:
        return []
    n = len(rows)
    costs = [k for k in _COSTS if all(r.get(k) is not None for r in rows)]
    head = (
        "| network | top-1 (%) | "
        + "".join(f"{_COSTS[k][0]} | rank | " for k in costs)
        + "MES | "
        + "".join(f"{_COSTS[k][1]} / searched's | " for k in costs)
    ).rstrip()
    lines = ["## Where each network sits on cost", "", head, "|" + "---|" * (head.count("|") - 1)]
    for i in sorted(range(n), key=lambda i: -(rows[i].get("macs") or 0)):
        r = rows[i]
        cells = [_network_cell(r), _fmt(100 * r["top1"], ".2f")]
        for k in costs:
            cells += [_fmt(r[k] * _COSTS[k][4], _COSTS[k][3]), str(_cost_rank(rows, i, k))]
        cells.append(_fmt(r.get("mes"), ".1f"))
        cells += [f"{r[k] / rows[0][k]:.3f}x" if rows[0][k] else "-" for k in costs]
        lines.append("| " + " | ".join(cells) + " |")
    where = [_rank_words(_cost_rank(rows, 0, k), n, k) for k in costs]
    lines += [
        "",
        (f"The searched network has {' and '.join(where)}." if where else ""),
        "",
        f"The random frontier, the {sum(r['kind'] == 'random' for r in rows)} random networks' mean top-1 fitted by "
        "least squares against each cost:",
        "",
    ]
    lines += [_frontier_words(name, fit) for name, fit in frontier.items()]
    return lines + [""]


#: How compare.png draws each kind of network: marker, size, colour, legend label.
_STYLE = {
    "searched": ("*", 160, "tab:red", "searched"),
    "random": ("o", 40, "tab:blue", None),
    "baseline": ("D", 60, "tab:green", "named baseline"),
}


def _frontier_panel(ax, rows: list[dict], fit: dict) -> None:
    """Top-1 against MACs with the random networks' line (fitted against ln MACs), when there is one."""
    for r in rows:
        marker, size, colour, _ = _STYLE[r["kind"]]
        ax.scatter(r["macs"] / 1e6, 100 * r["top1"], marker=marker, s=size, color=colour, zorder=3)
    if fit.get("estimable"):
        line = lambda m: 100 * (fit["intercept"] + fit["slope"] * np.log(m))  # noqa: E731
        randoms = [r["macs"] for r in rows if r["kind"] == "random"]
        inside = np.geomspace(min(randoms), max(randoms), 50)
        ax.plot(
            inside / 1e6, line(inside), color="tab:blue", alpha=0.6, label="random frontier (least squares on ln MACs)"
        )
        every = np.geomspace(min(r["macs"] for r in rows), max(r["macs"] for r in rows), 50)
        ax.plot(every / 1e6, line(every), color="tab:blue", alpha=0.4, linestyle="--")  # extrapolated part too
        ax.annotate(
            f"{100 * fit['residual']:+.2f} points above the line",
            (rows[0]["macs"] / 1e6, 100 * rows[0]["top1"]),
            textcoords="offset points",
            xytext=(-10, -3),
            fontsize=7,
            ha="right",
            va="center",
        )
        ax.legend(loc="best", fontsize=7)
    ax.set_xlabel("MACs (M)")
    ax.set_ylabel("top-1 (%)")
    ax.set_title("top-1 against MACs")
    ax.grid(alpha=0.3)


def plot(rows: list[dict], with_latency: bool, path: Path, objective: Objective, frontier: dict | None = None) -> None:
    """``compare.png``: top-1 against latency (or parameters) and against MACs with the random frontier."""
    plt = pyplot()
    key, label = (
        ("latency_ms", "latency (ms, see compare.md for its source)") if with_latency else ("params", "parameters")
    )
    fig, (ax, mac_ax) = plt.subplots(1, 2, figsize=(11, 4))
    _frontier_panel(mac_ax, rows, (frontier or {}).get("log_macs", {}))
    labelled = set()
    for r in rows:
        marker, size, colour, label = _STYLE[r["kind"]]
        x = r[key] / (1 if with_latency else 1e6)
        ax.errorbar(
            x, 100 * r["top1"], yerr=100 * r.get("top1_std", 0.0), fmt="none", ecolor="gray", capsize=3, zorder=2
        )
        ax.scatter(
            x,
            100 * r["top1"],
            marker=marker,
            s=size,
            color=colour,
            zorder=3,
            label=label if label not in labelled else None,
        )
        labelled.add(label)
        ax.annotate(r["network"], (x, 100 * r["top1"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel(label if with_latency else "parameters (M)")
    ax.set_ylabel("top-1 (%), from scratch, mean ± std over seeds")
    kinds = {r["kind"] for r in rows}
    against = " and ".join(
        k for k, present in (("random", "random" in kinds), ("named", "baseline" in kinds)) if present
    )
    ax.set_title(f"searched vs {against or 'random'} at {objective.name} {objective.target:.4g}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    save_figure(fig, path)
