"""Greedy slimming from the largest sub-network (EfficientFormerV2 §4.2.3 alg. 1; EfficientFormer
§4.2 alg. 1).

At every step every frontier action (a one-step shrink, :meth:`SearchSpace.shrink_actions`) whose
cost side makes progress is evaluated, and the one with the smallest accuracy drop per unit gained
(MES gained, ms or parameters saved) is taken, until the target is met. The cost side needs no
evaluation, so actions that cannot help are never evaluated; accuracies of a step are requested
as one batch, so an evaluator can spread them over workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.family import ActionsFn
from nas.core.space import SearchSpace
from nas.search.objective import Cost, Objective

AccuracyFn = Callable[[Sequence[ArchConfig]], list[float]]
CostFn = Callable[[ArchConfig], Cost]


@dataclass(frozen=True)
class Step:
    """One greedy step: the action taken and where it led."""

    index: int
    action: str
    arch: ArchConfig
    accuracy: float
    cost: Cost
    delta_accuracy: float  # accuracy lost by this step
    gain: float  # progress towards the target (objective units)
    candidates: int  # actions evaluated at this step

    def to_dict(self) -> dict:
        return {
            "step": self.index,
            "action": self.action,
            "delta_accuracy": self.delta_accuracy,
            "gain": self.gain,
            "accuracy": self.accuracy,
            **self.cost.to_dict(),
            "digest": self.arch.digest,
            "candidates": self.candidates,
            "arch": self.arch.to_dict(),
        }


@dataclass
class SearchState:
    """Where a search stands; saved after every step so that it can resume."""

    start: ArchConfig
    start_accuracy: float
    steps: list[Step] = field(default_factory=list)

    @property
    def current(self) -> ArchConfig:
        return self.steps[-1].arch if self.steps else self.start

    @property
    def current_accuracy(self) -> float:
        return self.steps[-1].accuracy if self.steps else self.start_accuracy


def reachable_range(space: SearchSpace, cost: CostFn, objective: Objective) -> tuple[float, float]:
    """The objective's values at the largest and the smallest sub-networks: every target a greedy
    slimming from the largest can meet lies between them (params, latency and MES are monotone
    in every shrink)."""
    return objective.value(cost(space.largest())), objective.value(cost(space.smallest()))


def require_reachable(space: SearchSpace, cost: CostFn, objective: Objective, start: ArchConfig | None = None) -> None:
    """A one-line error with the reachable range if no sub-network (slimmed from ``start``) meets the target."""
    first = objective.value(cost(start or space.largest()))
    lo, hi = sorted((first, objective.value(cost(space.smallest()))))
    if not (lo <= objective.target <= hi or objective.met(cost(start or space.largest()))):
        raise NasError(
            f"{objective.name} target {objective.target:g} is out of reach: sub-networks of space "
            f"{space.name} span {objective.name} {lo:.4g} to {hi:.4g} ({objective.unit})"
        )


def greedy_slim(
    space: SearchSpace,
    accuracy: AccuracyFn,
    cost: CostFn,
    objective: Objective,
    start: ArchConfig | None = None,
    actions: ActionsFn | None = None,
    state: SearchState | None = None,
    on_step: Callable[[SearchState], None] | None = None,
    max_steps: int = 10_000,
) -> SearchState:
    """Slim ``start`` (default: the largest sub-network) until ``objective`` is met."""
    start = start or space.largest()
    require_reachable(space, cost, objective, start)
    actions = actions or space.shrink_actions
    if state is None:
        state = SearchState(start, accuracy([start])[0])
        if on_step:
            on_step(state)
    while not objective.met(cost(state.current)):
        if len(state.steps) >= max_steps:
            raise NasError(f"no solution within {max_steps} steps")
        current, current_cost = state.current, cost(state.current)
        frontier = []
        for action, new in actions(current):
            new_cost = cost(new)
            gain = objective.gain(current_cost, new_cost)
            if gain > 0:  # only actions that move towards the target are worth evaluating
                frontier.append((action, new, new_cost, gain))
        if not frontier:
            raise NasError(f"no shrink of {current.short()} moves {objective.name} towards {objective.target:g}")
        accuracies = accuracy([new for _, new, _, _ in frontier])
        # Smallest accuracy drop per unit of gain; among equals (typically no drop at all) the
        # larger step, so a search does not creep towards its target by the smallest moves.
        best = min(
            range(len(frontier)),
            key=lambda i: ((state.current_accuracy - accuracies[i]) / frontier[i][3], -frontier[i][3], i),
        )
        action, new, new_cost, gain = frontier[best]
        state.steps.append(
            Step(
                len(state.steps) + 1,
                action.describe(),
                new,
                accuracies[best],
                new_cost,
                state.current_accuracy - accuracies[best],
                gain,
                len(frontier),
            )
        )
        if on_step:
            on_step(state)
    return state
