"""A running search's progress: evaluations done of the strategy's budget, the best network so far that
the strategy may choose, and the time left (:class:`nas.runs.progress.Progress` shows it).

The evaluator pool reports every new evaluation at the search's fidelity and the end of every batch it
was asked for (a generation, a greedy step, a batch of trials). A band strategy's status is the best
score in its band; greedy slimming, which has no budget, says its step and how near its path came to the
target, and its time left is scaled from that share of the way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from nas.core.arch import ArchConfig
from nas.runs.progress import Display, Progress
from nas.search.objective import CostFn, Objective

if TYPE_CHECKING:
    from nas.search.pool import EvaluatorPool


def _value_words(objective: Objective, value: float) -> str:
    return f"{value / 1e6:.2f} M parameters" if objective.name == "params" else f"{value:.3g} {objective.unit}"


class SearchProgress:
    """The progress of one search (one target of a family): fed by :class:`nas.search.pool.EvaluatorPool`."""

    def __init__(
        self,
        label: str,
        objective: Objective,
        cost: CostFn,
        options: Any,
        known: list[tuple[ArchConfig, float]] = (),
        counted: int = 0,
        enabled: bool = True,
        display: Display = Display(),
    ):
        self.objective, self.cost = objective, cost
        self.tolerance = getattr(options, "tolerance", None)
        self.banded = self.tolerance is not None
        self.batches = 0
        self.rescored = 0  # finalists scored again at a higher fidelity (nas.search.finalists)
        self.best: tuple[float, float] | None = None  # (accuracy, objective value) of the best choosable
        self.start: float | None = None  # the objective value of the first network evaluated
        self.nearest: float | None = None  # the value nearest the target evaluated so far
        for arch, accuracy in known:  # a resumed search's evaluations: the best so far, not counted again
            self._see(arch, accuracy)
        self.progress = Progress(
            label,
            total=getattr(options, "evaluations", None),
            done=counted,
            unit="evaluated",
            enabled=enabled,
            status=self.status,
            fraction=self.fraction,
            display=display,
        )

    def evaluated(self, arch: ArchConfig, accuracy: float) -> None:
        """One new sub-network scored at the search's fidelity."""
        self._see(arch, accuracy)
        self.progress.advance()

    def finalist_scored(self) -> None:
        """A finalist scored again at the final fidelity (after the strategy's search)."""
        self.rescored += 1
        self.progress.advance(0)

    def batch_done(self) -> None:
        """A batch the strategy asked for is scored (a generation, a greedy step)."""
        self.batches += 1
        self.progress.mark()

    def close(self) -> None:
        self.progress.close()

    def status(self) -> str:
        """The best choosable network so far, or, for greedy slimming, its step and how near it came."""
        if self.rescored:
            return f"finalists scored again: {self.rescored}"
        unit = "in band" if self.banded else "meeting the target"
        best = (
            f"best {unit} {100 * self.best[0]:.2f}% at {_value_words(self.objective, self.best[1])}"
            if self.best is not None
            else f"none {unit} yet"
        )
        if self.banded or self.progress.total is not None:
            return best
        near = (
            f", nearest {_value_words(self.objective, self.nearest)} (target {self.objective.target:.4g})"
            if self.nearest is not None and self.best is None
            else ""
        )
        return f"step {self.batches}{near}, {best}"

    def fraction(self) -> float | None:
        """The share of the way from the first network evaluated to the target (greedy slimming's path)."""
        if self.start is None or self.nearest is None or self.start == self.objective.target:
            return None
        if self.best is not None and not self.banded:
            return 1.0
        return min(max((self.start - self.nearest) / (self.start - self.objective.target), 0.0), 1.0)

    def _see(self, arch: ArchConfig, accuracy: float) -> None:
        cost = self.cost(arch)
        value = self.objective.value(cost)
        if self.start is None:
            self.start = value
        nearer = (lambda a, b: a > b) if self.objective.higher_is_better else (lambda a, b: a < b)
        if self.nearest is None or nearer(value, self.nearest):
            self.nearest = value
        if self.objective.in_band(cost, self.tolerance) and (self.best is None or accuracy > self.best[0]):
            self.best = (accuracy, value)


@contextmanager
def watched(
    pool: EvaluatorPool,
    label: str,
    objective: Objective,
    cost: CostFn,
    options: Any,
    enabled: bool,
    counted: int,
    known: list[tuple[ArchConfig, float]],
) -> Iterator[SearchProgress]:
    """Show ``pool``'s evaluations as one search's progress while the block runs (``counted``: evaluations
    of this search made before, by a resumed run; ``known``: what the run evaluated before it began)."""
    progress = SearchProgress(label, objective, cost, options, known, counted, enabled)
    pool.progress = progress
    try:
        yield progress
    finally:
        pool.progress = None
        progress.close()
