"""Trials: sub-networks evaluated one by one (optuna, random search), and the one chosen among them.

Both strategies write one JSON line per trial (``trials.jsonl``: ``trial``, ``accuracy``, ``params``,
``latency_ms``, ``mes``, ``digest``, ``arch``; optuna adds the ``run`` that evaluated it) and choose
the trial of best accuracy among those that meet the objective's target (ties: the better objective
value, then the earlier trial); every trial that meets it is a candidate for the finalists
(:mod:`nas.search.finalists`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.search.objective import Cost, Objective
from nas.search.strategy import Scored, SearchContext, StrategyOutcome


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


def trials_outcome(
    context: SearchContext,
    records: Sequence[dict[str, Any]],
    retry: str = "search again with more evaluations (--set evaluations=N)",
    lines: tuple[str, ...] = (),
    **record: Any,
) -> StrategyOutcome:
    """The best trial within the target as the strategy's choice, every trial within it a candidate;
    ``record``: the strategy's own fields of ``result.json``. A :class:`NasError` if no trial meets
    the target (saying ``retry`` or choose an easier target)."""
    objective = context.objective
    best = best_within_target(records, objective)
    if best is None:
        raise NasError(
            f"none of the {len(records)} trials in {context.run / 'trials.jsonl'} meets {objective.name} "
            f"{objective.target:g} ({objective.unit}); {retry}, or choose an easier --target"
        )
    met = [r for r in records if objective.met(record_cost(r))]
    return StrategyOutcome(
        chosen=Scored(ArchConfig.from_dict(best["arch"]), best["accuracy"]),
        candidates=tuple(Scored(ArchConfig.from_dict(r["arch"]), r["accuracy"]) for r in met),
        lines=lines,
        record={"trials": len(records), "within_target": len(met), **record},
    )
