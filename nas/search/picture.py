"""Every search's picture (``search.png``): the supernet's score against the objective for everything the
search evaluated, the band it chose in, the finalists scored again with their noise, and its choice.

Whatever the strategy: greedy slimming's path is drawn as a line through its steps, evolution's networks
are coloured by generation (what the strategy's outcome gives, :class:`nas.search.strategy.StrategyOutcome`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nas.core.arch import ArchConfig
from nas.runs.writers import pyplot, save_figure
from nas.search.objective import CostFn, Objective


def _axis(objective: Objective) -> tuple[str, float]:
    """The x axis of the objective: its label and the factor from its unit."""
    if objective.name == "params":
        return "parameters (M)", 1e-6
    return ("predicted latency (ms)" if objective.name == "latency" else "MES"), 1.0


@dataclass(frozen=True)
class SearchPicture:
    """What a search's picture shows: every network ``evaluated`` with its score, the ``finalists`` (network,
    mean final score, its noise sd or None), the ``chosen`` one, and from the strategy's outcome a
    ``generation`` per digest (colours) and a ``line`` of networks joined in order (greedy's path)."""

    evaluated: Sequence[tuple[ArchConfig, float]]
    finalists: Sequence[tuple[ArchConfig, float, float | None]]
    chosen: ArchConfig
    generation: Mapping[str, int] | None = None
    line: Sequence[ArchConfig] = ()


def plot_search(
    path: Path, picture: SearchPicture, cost: CostFn, objective: Objective, band: tuple[float, float] | None, title: str
) -> Path:
    """Draw ``search.png`` at ``path``: ``picture`` priced by ``cost`` against ``objective`` and its ``band``."""
    evaluated, finalists, chosen = picture.evaluated, picture.finalists, picture.chosen
    generation, line = picture.generation, picture.line
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    label, scale = _axis(objective)
    score = {a.digest: acc for a, acc in evaluated}

    def x_of(arch: ArchConfig) -> float:
        return scale * objective.value(cost(arch))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    if band is not None:
        ax.axvspan(scale * band[0], scale * band[1], color="tab:green", alpha=0.12, label="band")
    ax.axvline(scale * objective.target, color="tab:green", lw=1, ls="--", label=f"target {objective.target:g}")
    xs = [x_of(a) for a, _ in evaluated]
    ys = [100 * acc for _, acc in evaluated]
    if generation:
        colours = [generation.get(a.digest, 0) for a, _ in evaluated]
        dots = ax.scatter(xs, ys, c=colours, cmap="viridis", s=14, alpha=0.8, label="evaluated")
        bar = fig.colorbar(dots, ax=ax, label="generation")
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
    else:
        ax.scatter(xs, ys, s=14, color="tab:gray", alpha=0.6, label="evaluated")
    if line:
        known = [a for a in line if a.digest in score]
        ax.plot([x_of(a) for a in known], [100 * score[a.digest] for a in known], "-", color="tab:blue", lw=1.2)
        ax.plot([], [], "-", color="tab:blue", label="greedy path")
    for k, (arch, final, sd) in enumerate(finalists):
        ax.errorbar(
            x_of(arch),
            100 * final,
            yerr=None if sd is None else 100 * sd,
            fmt="D",
            color="tab:orange",
            ms=6,
            capsize=3,
            label="finalists scored again (mean, noise sd)" if k == 0 else None,
        )
    chosen_score = next(
        (final for arch, final, _ in finalists if arch.digest == chosen.digest), score.get(chosen.digest)
    )
    if chosen_score is not None:
        ax.plot(x_of(chosen), 100 * chosen_score, "*", color="tab:red", ms=16, label="chosen", zorder=5)
    ax.set_xlabel(label)
    ax.set_ylabel("supernet top-1 on the search split (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return save_figure(fig, path)
