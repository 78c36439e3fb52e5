"""Random search (``--strategy random``): the most accurate of sub-networks drawn uniformly within the target.

Sub-networks are drawn uniformly from the space (:meth:`SearchSpace.sample`, seeded by ``--seed``);
those whose cost side meets the objective's target (known without evaluating them) are kept,
distinct, until there are ``--trials`` of them, and evaluated in batches through the search's
evaluator pool (Ray workers share a batch; every accuracy lands in the run's cache). After every
batch the trials so far are written (``trials.jsonl``); a resumed search draws the same sub-networks
again and finds the accuracies of those evaluated before in the cache. The most accurate trial is
``arch.yaml`` (:mod:`nas.search.trials`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.search.greedy import AccuracyFn, CostFn
from nas.search.objective import Objective
from nas.search.sample import sample_distinct
from nas.search.strategy import SearchContext, register_strategy
from nas.search.trials import choose, trial_record, write_trials

log = logging.getLogger(__name__)


def random_search(
    space: SearchSpace,
    accuracy: AccuracyFn,
    cost: CostFn,
    objective: Objective,
    trials: int,
    rng: random.Random,
    batch: int = 8,
    on_batch: Callable[[list[dict[str, Any]]], None] | None = None,
    max_draws: int = 20_000,
) -> list[dict[str, Any]]:
    """The trial records (:func:`nas.search.trials.trial_record`) of ``trials`` distinct sub-networks
    drawn with ``rng`` that meet ``objective``, evaluated ``batch`` at a time (``on_batch`` gets the
    records so far after each). Fewer if ``max_draws`` draws find fewer; a :class:`NasError` if none."""
    archs = sample_distinct(space, trials, lambda arch: objective.met(cost(arch)), rng, max_draws)
    if not archs:
        raise NasError(
            f"none of {max_draws} random sub-networks of {space.name} meets {objective.name} "
            f"{objective.target:g} ({objective.unit}); choose an easier --target"
        )
    if len(archs) < trials:
        log.warning(
            "only %d distinct sub-networks of %d random draws meet %s %g; evaluating those",
            len(archs),
            max_draws,
            objective.name,
            objective.target,
        )
    records: list[dict[str, Any]] = []
    for first in range(0, len(archs), batch):
        chunk = archs[first : first + batch]
        for arch, acc in zip(chunk, accuracy(chunk)):
            records.append(trial_record(len(records), arch, acc, cost(arch)))
        if on_batch:
            on_batch(records)
    return records


class RandomStrategy:
    """``random``: the most accurate of ``--trials`` uniform samples within the target (:func:`random_search`)."""

    name = "random"

    def run(self, context: SearchContext) -> dict[str, Any]:
        """Draw, evaluate (a batch per round of the pool's workers) and choose; resumable from the cache."""

        def save(records: list[dict[str, Any]]) -> None:
            write_trials(context.run, records)
            context.clock.tick()

        records = random_search(
            context.space,
            context.pool,
            context.cost,
            context.objective,
            context.trials,
            random.Random(context.seed),
            batch=max(8, len(getattr(context.pool, "actors", ()))),
            on_batch=save,
        )
        return choose(context, records, self.name)


register_strategy(RandomStrategy())
