"""The results pages' pictures, drawn from the committed files by ``generate.py`` (beside this script)."""

from __future__ import annotations

from pathlib import Path


def draw_rank_checks(ranks: list[dict], path: Path) -> Path:
    """A forest plot of the ranking studies: the supernet's Kendall tau with its interval against the from-scratch
    ranking, beside the best ranking that needs no training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw_strategies(rows: list[dict], path: Path, title: str) -> Path:
    """The strategies benchmark as a dot plot: each strategy's chosen network scored on the held-out images, one
    dot per seed (greedy slimming's search draws nothing, so it is one dot), the mean as a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw_all(here: Path, rank_checks: list[dict]) -> None:
    """Every picture the results pages and the benchmarks page show."""
    import json

    draw_rank_checks(rank_checks, here / "rank-checks.png")
    for space in ("main", "tiny"):
        rows = json.loads((here / f"search-strategies-{space}.json").read_text(encoding="utf-8"))["rows"]
        rows = [r for r in rows if r.get("budget") in (None, 100)]
        draw_strategies(rows, here / f"search-strategies-{space}.png", f"search strategies, {space} space")
