"""The results pages' pictures, drawn from the committed files by ``generate.py`` (beside this script)."""

from __future__ import annotations

from pathlib import Path

from nas.runs.writers import pyplot, save_figure


def draw_rank_checks(ranks: list[dict], path: Path) -> Path:
    """A forest plot of the ranking studies: the supernet's Kendall tau with its interval against the from-scratch
    ranking, beside the best ranking that needs no training."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(ranks) + 1.2))
    for y, r in enumerate(reversed(ranks)):
        tau, (low, high) = r["supernet"]["kendall_tau"], r["supernet"]["kendall_tau_ci"]
        ax.errorbar(tau, y, xerr=[[tau - low], [high - tau]], fmt="o", color="tab:blue", capsize=3,
                    label="supernet (95% CI)" if y == 0 else None)  # fmt: skip
        other = r["result"]["rankings"][r["best"]]["kendall_tau"]
        ax.plot(
            other, y, "D", mfc="none", color="tab:orange", label="best ranking without training" if y == 0 else None
        )
    ax.set_yticks(range(len(ranks)), [r["name"].removeprefix("rank-check-") for r in reversed(ranks)], fontsize=8)
    ax.axvline(0, color="gray", lw=0.8)
    ax.set_xlabel("Kendall's tau against the from-scratch ranking")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def draw_strategies(rows: list[dict], path: Path, title: str) -> Path:
    """The strategies benchmark as a dot plot: each strategy's chosen network scored on the held-out images, one
    dot per seed (greedy slimming's search draws nothing, so it is one dot), the mean as a bar."""
    plt = pyplot()

    strategies = sorted({r["strategy"] for r in rows}, key=lambda k: (k.startswith("greedy"), k))
    seeds = sorted({r["seed"] for r in rows if r.get("seed") is not None})
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(strategies) + 1.3))
    colours = plt.get_cmap("tab10")
    for y, strategy in enumerate(strategies):
        mine = [r for r in rows if r["strategy"] == strategy]
        for r in mine:
            k = seeds.index(r["seed"]) if r.get("seed") is not None else None
            ax.plot(100 * r["heldout"], y, "o", color="black" if k is None else colours(k), ms=6, alpha=0.85)
        mean = 100 * sum(r["heldout"] for r in mine) / len(mine)
        ax.plot([mean, mean], [y - 0.3, y + 0.3], "-", color="gray", lw=2)
    for k, seed in enumerate(seeds):
        ax.plot([], [], "o", color=colours(k), label=f"seed {seed}")
    ax.plot([], [], "-", color="gray", lw=2, label="mean")
    ax.set_yticks(range(len(strategies)), strategies)
    ax.set_xlabel("top-1 of the chosen network on the held-out images (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=len(seeds) + 1)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def draw_all(here: Path, rank_checks: list[dict]) -> None:
    """Every picture the results pages and the benchmarks page show."""
    import json

    draw_rank_checks(rank_checks, here / "rank-checks.png")
    draw_latency_predictor(here / "latency-predictor.png")
    for space in ("main", "tiny"):
        rows = json.loads((here / f"search-strategies-{space}.json").read_text(encoding="utf-8"))["rows"]
        rows = [r for r in rows if r.get("budget") in (None, 100)]
        draw_strategies(rows, here / f"search-strategies-{space}.png", f"search strategies, {space} space")


def draw_latency_predictor(path: Path, devices: tuple[str, ...] = ("iphone12", "iphone14", "pixel6")) -> Path:
    """Each phone's cost model against the latencies it was fitted to: every published model's latency beside
    the one predicted with its whole family held out (what the error of a new family's prediction is
    measured on), on log axes with the line of no error."""
    plt = pyplot()
    from matplotlib.ticker import NullFormatter

    from nas.latency.costmodel import fit_cost_model

    models = {device: fit_cost_model(device) for device in devices}
    families = sorted({row[1] for m in models.values() for row in m.held_out_rows})
    colour = {family: plt.get_cmap("tab20")(k % 20) for k, family in enumerate(families)}
    fig, axes = plt.subplots(1, len(devices), figsize=(4.2 * len(devices), 4.4))
    for ax, (device, model) in zip(axes, models.items()):
        for family in sorted({row[1] for row in model.held_out_rows}):
            rows = [row for row in model.held_out_rows if row[1] == family]
            ax.scatter([r[2] for r in rows], [r[3] for r in rows], s=22, color=colour[family])
        values = [v for row in model.held_out_rows for v in row[2:]]
        low, high = min(values) / 1.3, max(values) * 1.3
        ax.plot([low, high], [low, high], "-", color="gray", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("published latency (ms)")
        ax.set_ylabel("predicted, its family held out (ms)")
        ax.set_title(f"{device}: {100 * model.lofo_mean:.1f}% mean error", fontsize=10)
        ax.grid(alpha=0.3, which="both")
    for family in families:
        axes[-1].scatter([], [], s=22, color=colour[family], label=family)
    axes[-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)
