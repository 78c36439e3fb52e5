"""Trials: sub-networks evaluated one by one (optuna, random search), and the one chosen among them.

Both strategies write one JSON line per trial (``trials.jsonl``: ``trial``, ``accuracy``, ``params``,
``latency_ms``, ``mes``, ``digest``, ``arch``; optuna adds the ``run`` that evaluated it) and choose
the trial of best accuracy among those that meet the objective's target (ties: the better objective
value, then the earlier trial), written as ``arch.yaml`` and described in ``result.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.typed_yaml import write_text_atomic
from nas.runs.folder import RunFolder
from nas.search.objective import Cost, Objective
from nas.search.strategy import SearchContext


def trial_record(number: int, arch: ArchConfig, accuracy: float, cost: Cost) -> dict[str, Any]:
    """One line of ``trials.jsonl``."""
    return {"trial": number, "accuracy": accuracy, **cost.to_dict(), "digest": arch.digest, "arch": arch.to_dict()}


def record_cost(record: dict[str, Any]) -> Cost:
    """The cost side of a trial record."""
    return Cost(record["params"], record["latency_ms"])


def write_trials(run: Path, records: Sequence[dict[str, Any]]) -> None:
    """``trials.jsonl``: one line per record."""
    write_text_atomic(run / "trials.jsonl", "".join(json.dumps(r) + "\n" for r in records))


def best_within_target(records: Sequence[dict[str, Any]], objective: Objective) -> dict[str, Any] | None:
    """The record of best accuracy among those that meet ``objective`` (None: none does)."""
    met = [r for r in records if objective.met(record_cost(r))]
    if not met:
        return None
    sign = 1 if objective.higher_is_better else -1
    return max(met, key=lambda r: (r["accuracy"], sign * objective.value(record_cost(r)), -r["trial"]))


def choose(
    context: SearchContext,
    records: Sequence[dict[str, Any]],
    strategy: str,
    retry: str = "search again with more --trials",
    **extra: Any,
) -> dict[str, Any]:
    """Write the best trial within the target as ``arch.yaml`` and the result as ``result.json``;
    return the result (``extra`` after the strategy and trial count). A :class:`NasError` if no trial
    meets the target (saying ``retry`` or choose an easier target)."""
    objective = context.objective
    best = best_within_target(records, objective)
    if best is None:
        raise NasError(
            f"none of the {len(records)} trials in {context.run / 'trials.jsonl'} meets {objective.name} "
            f"{objective.target:g} ({objective.unit}); {retry}, or choose an easier --target"
        )
    ArchConfig.from_dict(best["arch"]).save(context.run / "arch.yaml")
    result = {
        "strategy": strategy,
        "trials": context.trials,
        **extra,
        "arch": best["arch"],
        "digest": best["digest"],
        "accuracy": best["accuracy"],
        **record_cost(best).to_dict(),
        "latency_interval_ms": context.latency_interval(best["latency_ms"]),
        "within_target": sum(objective.met(record_cost(r)) for r in records),
        "evaluations": len(context.pool.cache.values),
        "latency_source": context.config.latency_source,
        "img_size": context.config.img_size,  # cost priced at
        "train_img_size": context.config.train_img_size,  # the supernet trained and scores at
        "scored_images": context.pool.scored_images,
        "provenance": context.clock.summary(),
    }
    RunFolder(context.run).write_result(result)
    return result
