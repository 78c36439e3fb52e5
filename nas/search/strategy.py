"""Search strategies behind one interface, found by name in a registry.

A strategy (:class:`SearchStrategy`) gets a :class:`SearchContext`, everything ``nas search`` has
checked and built (the space, the evaluator pool, the cost function, the objective with its target,
the run folder, the recorded settings, ...), writes its outputs in the run folder and returns the
result ``nas search`` prints. The engine comes with ``greedy`` (greedy slimming,
:mod:`nas.search.slimming`), ``optuna`` (NSGA-II, :mod:`nas.search.nsga`) and ``random`` (random
search, :mod:`nas.search.random_search`); :func:`register_strategy` adds another.

This module imports nothing heavy, so listing the names (``nas search --help``) loads no torch: a
built-in strategy's module is imported when the strategy is first asked for, and registers it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from nas.core.errors import NasError

if TYPE_CHECKING:
    from nas.core.family import ActionsFn
    from nas.core.space import SearchSpace
    from nas.latency import LatencyTable
    from nas.runs.config import SearchRunConfig
    from nas.runs.provenance import RunClock
    from nas.search.greedy import CostFn, SearchState
    from nas.search.objective import Objective
    from nas.search.pool import EvaluatorPool
    from nas.search.screen import ScreenConfig


@dataclass(frozen=True)
class SearchContext:
    """What a strategy searches with; the run folder is checked, locked and holds ``config.yaml``."""

    space: SearchSpace
    pool: EvaluatorPool  # accuracies of sub-networks (``pool(archs)``), cached in the run folder
    cost: CostFn  # parameters and latency of a sub-network, known without evaluating it
    objective: Objective  # what to optimise, and the target a chosen sub-network must meet
    run: Path
    config: SearchRunConfig  # the settings recorded in config.yaml
    clock: RunClock
    seed: int = 0
    resume: bool = False
    table: LatencyTable | None = None
    state: SearchState | None = None  # greedy: the saved state to continue from (None: start)
    actions: ActionsFn | None = None  # greedy: the family's own shrink moves (None: the space's)
    screen: ScreenConfig | None = None  # greedy: which shrinks each step evaluates
    trials: int = 64  # optuna, random: sub-networks to evaluate
    storage: str | None = None  # optuna: database URL of the study (None: optuna.db in the run folder)
    study_name: str = "nas-search"

    def latency_interval(self, ms: float | None) -> list[float] | None:
        """The latency's prediction interval ``[low, high]`` where the table has one."""
        bounds = self.table.interval(ms) if self.table is not None and ms is not None else None
        return list(bounds) if bounds is not None else None


@runtime_checkable
class SearchStrategy(Protocol):
    """A way of searching: ``run`` writes its outputs in ``context.run`` and returns the result."""

    name: str

    def run(self, context: SearchContext) -> dict[str, Any]:
        """Search, write the outputs (``arch.yaml``: the sub-network chosen) and return the result."""
        ...


# Built-in strategies: name -> the module that registers it when imported.
_BUILTIN = {"greedy": "nas.search.slimming", "optuna": "nas.search.nsga", "random": "nas.search.random_search"}
# The registry, like supernets' families: filled by the strategies' modules as they are imported.
_STRATEGIES: dict[str, SearchStrategy] = {}


def register_strategy(strategy: SearchStrategy) -> SearchStrategy:
    """Make ``strategy`` known by its name (registering a name again replaces the old strategy)."""
    if not isinstance(strategy, SearchStrategy):
        raise TypeError(f"register_strategy needs a name and a run(context) method, got {type(strategy).__name__}")
    _STRATEGIES[strategy.name] = strategy
    return strategy


def strategy_names() -> list[str]:
    """The names of the built-in and the registered strategies, sorted (nothing is imported)."""
    return sorted({*_BUILTIN, *_STRATEGIES})


def get_strategy(name: str) -> SearchStrategy:
    """The strategy ``name``; an unknown one is a :class:`NasError` that lists the known."""
    if name not in _STRATEGIES and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise NasError(f"unknown search strategy {name!r}; choose one of {', '.join(strategy_names())}") from None
