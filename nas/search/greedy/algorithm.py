"""Greedy slimming from the largest sub-network (EfficientFormerV2 §4.2.3 alg. 1; EfficientFormer
§4.2 alg. 1).

At every step every frontier action (a one-step shrink, :meth:`SearchSpace.shrink_actions`) whose
cost side makes progress is evaluated, and the one with the smallest accuracy drop per unit gained
(MES gained, ms or parameters saved) is taken, until the target is met. The cost side needs no
evaluation, so actions that cannot help are never evaluated; accuracies of a step are requested
as one batch, so an evaluator can spread them over workers. With a :class:`ScreenConfig`, an
accuracy predictor fitted on the search's own evaluations picks the few shrinks worth evaluating
(:mod:`nas.search.greedy.screen`); each step records what was predicted and what was evaluated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.family import ActionsFn
from nas.search.greedy.screen import Observation, ScreenConfig, screen_step
from nas.search.objective import Cost, SearchProblem, greedy_key, require_reachable


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
    candidates: int  # shrinks that move towards the target at this step
    # Screened steps: per candidate its action, gain, predicted and measured accuracy (None: not
    # predicted / not evaluated), and the evaluated ones' architectures (what the predictor learns from).
    screen: tuple[dict, ...] = ()

    @property
    def evaluated(self) -> int:
        """Candidates evaluated at this step: those a screened step measured, else every one."""
        return sum(r["accuracy"] is not None for r in self.screen) if self.screen else self.candidates

    def to_dict(self) -> dict:
        extra = {"evaluated": self.evaluated, "screen": list(self.screen)} if self.screen else {}
        return {
            "step": self.index,
            "action": self.action,
            "delta_accuracy": self.delta_accuracy,
            "gain": self.gain,
            "accuracy": self.accuracy,
            **self.cost.to_dict(),
            "digest": self.arch.digest,
            "candidates": self.candidates,
            **extra,
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

    def observations(self) -> tuple[list[Observation], dict[tuple[str, int], int]]:
        """Every evaluation recorded by screened steps (the start included), and per (action kind,
        stage) the last step that evaluated such a shrink."""
        observations = [Observation(self.start, self.start_accuracy, 0)]
        recent: dict[tuple[str, int], int] = {}
        for step in self.steps:
            for record in step.screen:
                if record["accuracy"] is not None:
                    arch = ArchConfig.from_dict(record["arch"])
                    observations.append(Observation(arch, record["accuracy"], step.index))
                    recent[record["kind"], record["stage"]] = step.index
        return observations, recent

    def state_dict(self) -> dict[str, Any]:
        """The state as ``state.json`` holds it (what :meth:`from_state_dict` rebuilds)."""
        steps = [s.to_dict() for s in self.steps]
        return {"start": self.start.to_dict(), "start_accuracy": self.start_accuracy, "steps": steps}

    @classmethod
    def from_state_dict(cls, data: dict[str, Any]) -> SearchState:
        """The state :meth:`state_dict` gave (a ``ValueError``, ``KeyError`` or ``TypeError`` if it is not one)."""
        steps = [
            Step(
                s["step"],
                s["action"],
                ArchConfig.from_dict(s["arch"]),
                s["accuracy"],
                Cost(s["params"], s["latency_ms"]),
                s["delta_accuracy"],
                s["gain"],
                s["candidates"],
                tuple(s.get("screen", ())),
            )
            for s in data["steps"]
        ]
        return cls(ArchConfig.from_dict(data["start"]), data["start_accuracy"], steps)


def greedy_slim(
    problem: SearchProblem,
    start: ArchConfig | None = None,
    actions: ActionsFn | None = None,
    state: SearchState | None = None,
    on_step: Callable[[SearchState], None] | None = None,
    max_steps: int = 10_000,
    screen: ScreenConfig | None = None,
    accuracy_step: float = 0.0,
) -> SearchState:
    """Slim ``start`` (default: the largest sub-network) until ``problem.objective`` is met; with ``screen``,
    evaluate only the shrinks its predictor picks at each step. ``accuracy_step``: the smallest accuracy
    difference ``accuracy`` resolves (1/N for N scored images; :func:`greedy_key`)."""
    space, accuracy, cost, objective = problem.space, problem.accuracy, problem.cost, problem.objective
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
        chosen, predicted = list(range(len(frontier))), [None] * len(frontier)
        screened = screen is not None and screen.enabled
        if screened:
            observations, recent = state.observations()
            picked = screen_step(
                space,
                screen,
                current,
                observations,
                recent,
                [(action, new, gain) for action, new, _, gain in frontier],
                len(state.steps) + 1,
                accuracy_step,
            )
            chosen, predicted = list(picked.evaluate), list(picked.predicted)
        measured = dict(zip(chosen, accuracy([frontier[i][1] for i in chosen])))
        here = state.current_accuracy
        best = min(chosen, key=lambda i: greedy_key(here - measured[i], frontier[i][3], i, accuracy_step))
        action, new, new_cost, gain = frontier[best]
        records = ()
        if screened:
            records = tuple(
                {
                    "action": a.describe(),
                    "kind": a.kind,
                    "stage": a.stage,
                    "gain": g,
                    "predicted": predicted[i],
                    "accuracy": measured.get(i),
                    "digest": arch.digest,
                    **({"arch": arch.to_dict()} if i in measured else {}),
                }
                for i, (a, arch, _, g) in enumerate(frontier)
            )
        state.steps.append(
            Step(
                len(state.steps) + 1,
                action.describe(),
                new,
                measured[best],
                new_cost,
                state.current_accuracy - measured[best],
                gain,
                len(frontier),
                records,
            )
        )
        if on_step:
            on_step(state)
    return state
