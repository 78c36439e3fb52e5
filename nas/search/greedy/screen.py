"""Which shrinks of a greedy step are worth evaluating: an accuracy predictor fitted on the
evaluations the search has already made.

Greedy slimming (EfficientFormerV2 §4.2.3, alg. 1) evaluates every one-step shrink at every step:
about 45 on the main EfficientFormerV2 space, over 25 steps or more. Most of them are nowhere near
the best. OFA (§3.3) fits an accuracy predictor on architecture encodings to avoid evaluating; here
a predictor (:mod:`nas.search.predictor`, ridge regression by default) is refitted at every step on this
search's own evaluations (recent ones weigh more: the search moves, and what a shrink costs
changes with the network it shrinks). It ranks the step's shrinks by predicted accuracy drop per
unit gained, the greedy rule itself, and only the best ``keep`` of them, plus ``explore`` shrinks of
the kinds evaluated least recently, are evaluated. The step still takes the best *evaluated*
shrink by its measured accuracy, so a wrong prediction costs a worse choice, never a wrong number.

The first ``warmup_steps`` steps have no predictions to go by: they evaluate one shrink of every
(kind, stage), the largest of each, so the predictor starts from a measurement of every kind of
move at the largest networks, the most expensive ones to evaluate, without measuring all of them.
Everything the predictor learns from is in the search state (each step's evaluated shrinks), so a
resumed search predicts exactly what the uninterrupted one did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nas.core.arch import ArchConfig
from nas.core.space import SearchSpace
from nas.core.stage import Action
from nas.search.command_choices import ScreenConfig
from nas.search.objective import greedy_key
from nas.search.predictor import RidgePredictor


@dataclass(frozen=True)
class Observation:
    """An evaluated architecture and the step that evaluated it (0: the start)."""

    arch: ArchConfig
    accuracy: float
    step: int


@dataclass(frozen=True)
class Screened:
    """Which candidates of a step to evaluate, and what was predicted for each (None: no prediction)."""

    evaluate: tuple[int, ...]
    predicted: tuple[float | None, ...]


def screen_step(
    space: SearchSpace,
    config: ScreenConfig,
    current: ArchConfig,
    observations: Sequence[Observation],
    recent: dict[tuple[str, int], int],
    candidates: Sequence[tuple[Action, ArchConfig, float]],
    step: int,
    accuracy_step: float = 0.0,
) -> Screened:
    """The candidates of greedy step ``step`` (1-based) to evaluate, ranked by the greedy rule
    (:func:`nas.search.objective.greedy_key` with ``accuracy_step``) on predicted accuracies.

    ``candidates`` are (action, architecture, gain); ``recent`` maps (action kind, stage) to the last
    step that evaluated one such shrink; ``observations`` are every evaluation so far, which a
    :class:`nas.search.predictor.RidgePredictor` is refitted on.
    """
    n = len(candidates)
    if not config.enabled or n <= config.keep + config.explore:
        return Screened(tuple(range(n)), (None,) * n)
    if step <= config.warmup_steps:
        largest: dict[tuple[str, int], int] = {}
        for i, (action, _, gain) in enumerate(candidates):
            kind = _kind(action)
            if kind not in largest or gain > candidates[largest[kind]][2]:
                largest[kind] = i
        return Screened(tuple(sorted(largest.values())), (None,) * n)
    # Recent evaluations weigh more: the search moves, and what a shrink costs changes with the network.
    weights = [0.5 ** ((step - o.step) / config.halflife) for o in observations]
    predictor = RidgePredictor(space, config.ridge).fit(
        [o.arch for o in observations], [o.accuracy for o in observations], weights
    )
    predicted = predictor.predict([current] + [arch for _, arch, _ in candidates])
    here, accuracies = predicted[0], predicted[1:]
    # The greedy rule on predicted accuracies: the drop is taken between two predictions, so the
    # predictor's bias at the current network cancels.
    order = sorted(range(n), key=lambda i: greedy_key(here - accuracies[i], candidates[i][2], i, accuracy_step))
    chosen = order[: config.keep]
    rest = order[config.keep :]
    for _ in range(config.explore):
        if not rest:
            break
        stalest = min(rest, key=lambda i: (recent.get(_kind(candidates[i][0]), -1), rest.index(i)))
        chosen.append(stalest)
        rest.remove(stalest)
    return Screened(tuple(sorted(chosen)), tuple(float(a) for a in accuracies))


def _kind(action: Action) -> tuple[str, int]:
    return action.kind, action.stage
