"""Random search (``--strategy random``): the most accurate of sub-networks drawn uniformly in the budget band.

Sub-networks are drawn uniformly from the space (:meth:`SearchSpace.sample`, seeded by ``--seed``);
those whose objective lies in the band of equal cost (:meth:`Objective.band`: within ``tolerance``
of the target, on the side that meets it; known without evaluating them) are kept, distinct, until
there are ``evaluations`` of them, and evaluated in batches through the search's evaluator pool (Ray
workers share a batch; every accuracy lands in the run's cache). Drawn in the band, not merely
under the target, so that networks far cheaper than the target do not use up the evaluations: at
equal evaluations it is the baseline every other strategy must beat. After every batch the trials
so far are written (``trials.jsonl``); a resumed search draws the same sub-networks again and finds
the accuracies of those evaluated before in the cache.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nas.core.errors import NasError
from nas.core.typed_yaml import setting
from nas.search.objective import Objective, SearchProblem, band_tolerance
from nas.search.sample import InBand, sample_distinct
from nas.search.strategy import SearchContext, StrategyOutcome, register_strategy
from nas.search.trials import trial_record, trials_outcome, write_trials

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RandomOptions:
    """``--strategy random``'s options (``--set key=value``)."""

    evaluations: int = setting(64, low=1, help="sub-networks drawn in the band and evaluated")
    tolerance: float | None = band_tolerance(anything_that_meets=True)


def random_search(
    problem: SearchProblem,
    trials: int,
    rng: random.Random,
    batch: int = 8,
    on_batch: Callable[[list[dict[str, Any]]], None] | None = None,
    max_draws: int = 20_000,
    tolerance: float | None = None,
) -> list[dict[str, Any]]:
    """The trial records (:func:`nas.search.trials.trial_record`) of ``trials`` distinct sub-networks
    drawn with ``rng`` in ``objective``'s band of ``tolerance`` (None: that meet it), evaluated
    ``batch`` at a time (``on_batch`` gets the records so far after each). Fewer if ``max_draws``
    draws find fewer; a :class:`NasError` if none."""
    space, accuracy, cost, objective = problem.space, problem.accuracy, problem.cost, problem.objective
    archs = sample_distinct(space, trials, lambda arch: objective.in_band(cost(arch), tolerance), rng, max_draws)
    where = f"{objective.name} {objective.target:g}" + (f" within {100 * tolerance:g}%" if tolerance else "")
    if not archs:
        raise NasError(
            f"none of {max_draws} random sub-networks of {space.name} meets {where} ({objective.unit}); "
            "choose an easier --target" + (" or widen the band (--set tolerance=...)" if tolerance else "")
        )
    if len(archs) < trials:
        log.warning(
            "only %d distinct sub-networks of %d random draws meet %s; evaluating those", len(archs), max_draws, where
        )
    records: list[dict[str, Any]] = []
    for first in range(0, len(archs), batch):
        chunk = archs[first : first + batch]
        for arch, acc in zip(chunk, accuracy(chunk)):
            records.append(trial_record(len(records), arch, acc, cost(arch)))
        if on_batch:
            on_batch(records)
    return records


class RandomStrategy(InBand):
    """``random``: the most accurate of ``evaluations`` uniform samples in the band (:func:`random_search`)."""

    name = "random"
    options = RandomOptions

    def run(self, context: SearchContext, options: RandomOptions) -> StrategyOutcome:
        """Draw, evaluate (a batch per round of the pool's workers) and choose; resumable from the cache."""

        def save(records: list[dict[str, Any]]) -> None:
            write_trials(context.run, records)
            context.clock.tick()

        records = random_search(
            SearchProblem(context.space, context.pool, context.cost, context.objective),
            options.evaluations,
            random.Random(context.seed),
            batch=max(8, len(getattr(context.pool, "actors", ()))),
            on_batch=save,
            tolerance=options.tolerance,
        )
        band = context.objective.band(options.tolerance) if options.tolerance else None
        lines = (f"random       {len(records)} sub-networks drawn uniformly {_band_words(context.objective, band)}",)
        return trials_outcome(context, records, lines=lines, band=list(band) if band else None)


def _band_words(objective: Objective, band: tuple[float, float] | None) -> str:
    if band is None:
        return f"among those that meet {objective.name} {objective.target:g}"
    return f"in the band {band[0]:.4g} to {band[1]:.4g} ({objective.unit})"


register_strategy(RandomStrategy())
