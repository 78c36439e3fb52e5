"""Search strategies behind one interface, found by name in a registry.

A strategy (:class:`SearchStrategy`) declares its options as a frozen dataclass (``options``: every
field a :func:`nas.core.typed_yaml.setting` with its default and meaning; ``nas search --strategy
NAME --set key=value`` sets them, and ``config.yaml`` records them so a resumed search is checked
against them). Its ``run`` gets a :class:`SearchContext`, what every strategy searches with, and
returns a :class:`StrategyOutcome`: its choice and the networks it would choose among. ``nas
search`` then scores the best of those again at a higher fidelity (:mod:`nas.search.finalists`) and
prints the :class:`nas.search.finalists.SearchResult` without knowing the strategy.

The engine comes with ``evolution`` (constrained evolution in a budget band,
:mod:`nas.search.evolution`), ``greedy`` (greedy slimming, :mod:`nas.search.greedy.strategy`), ``optuna``
(NSGA-II, :mod:`nas.search.optuna_nsga`) and ``random`` (random search in the band,
:mod:`nas.search.random_search`). Another package adds one by naming its module in the
``nas.strategies`` entry-point group (the module calls :func:`register_strategy`), or by calling
:func:`register_strategy` itself.

This module imports nothing heavy, so listing the names (``nas search --help``) loads no torch: a
strategy's module is imported when the strategy is first asked for, and registers it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import yaml

from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.registry import LazyRegistry
from nas.core.typed_yaml import from_mapping

if TYPE_CHECKING:
    from nas.core.arch import ArchConfig
    from nas.core.space import SearchSpace
    from nas.latency import LatencyTable
    from nas.runs.config import SearchRunConfig
    from nas.runs.provenance import RunClock
    from nas.search.objective import CostFn, Objective
    from nas.search.pool import EvaluatorPool
    from nas.search.supernet_run import SupernetRun

T = TypeVar("T")

log = logging.getLogger(__name__)

#: The entry-point group through which other packages name modules that register strategies.
ENTRY_POINT_GROUP = "nas.strategies"


@dataclass(frozen=True)
class Scored:
    """A sub-network and its accuracy at the search's fidelity."""

    arch: ArchConfig
    accuracy: float


@dataclass(frozen=True)
class SearchContext:
    """What every strategy searches with; the run folder is checked, locked and holds ``config.yaml``."""

    supernet: SupernetRun  # the trained supernet run searched (its space, sizes, checkpoint)
    pool: EvaluatorPool  # accuracies of sub-networks (``pool(archs)``), cached in the run folder
    cost: CostFn  # parameters and latency of a sub-network, known without evaluating it
    objective: Objective  # what to optimise, and the target a chosen sub-network must meet
    run: Path
    config: SearchRunConfig  # the settings recorded in config.yaml
    clock: RunClock
    seed: int = 0
    resume: bool = False  # continue what the run folder holds
    table: LatencyTable | None = None
    # What this run evaluated before this search began (a family's earlier targets): a band strategy may
    # start from those inside its band, at no evaluation's cost (nas.search.family).
    known: tuple[Scored, ...] = ()
    in_family: bool = False  # one band of a family: networks named for other bands are left to those

    @property
    def space(self) -> SearchSpace:
        """The space searched: the supernet's."""
        return self.supernet.space

    # One resume protocol for every strategy that holds state between evaluations: it gives its state as a
    # JSON-ready dict (``state_dict()``) and rebuilds itself from one; the engine writes and reads the file.

    def save_state(self, name: str, state: dict[str, Any]) -> None:
        """Write the strategy's resume state as ``NAME.json`` in the run folder, atomically, and tick the
        run's clock (what a resumed search continues from)."""
        write_text_atomic(self.run / f"{name}.json", json.dumps(state, indent=1) + "\n")
        self.clock.tick()

    def saved_state(self, name: str, load: Callable[[dict[str, Any]], T], what: str) -> T | None:
        """The state the strategy saved as ``NAME.json``, rebuilt with ``load``, when the search resumes and
        one was saved (else None); a corrupt file is one :class:`NasError` naming it and ``what`` it held."""
        path = self.run / f"{name}.json"
        if not (self.resume and path.exists()):
            return None
        try:
            return load(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as exc:
            raise NasError(f"{path}: corrupt {what} ({type(exc).__name__}: {exc}); start a new --run") from None

    def latency_interval(self, ms: float | None) -> list[float] | None:
        """The latency's prediction interval ``[low, high]`` where the table has one."""
        bounds = self.table.interval(ms) if self.table is not None and ms is not None else None
        return list(bounds) if bounds is not None else None


@dataclass(frozen=True)
class StrategyOutcome:
    """What a strategy found.

    ``chosen`` is its own choice; ``candidates`` are the evaluated networks it would choose among
    (every one meets the target; a strategy that searches a band gives only those in it), the
    finalists are the best of them. ``lines`` say what the search did, for ``nas search`` to print;
    ``record`` holds the strategy's own fields of ``result.json``."""

    chosen: Scored
    candidates: tuple[Scored, ...]
    lines: tuple[str, ...] = ()
    record: dict[str, Any] = dataclasses.field(default_factory=dict)
    # For the search's picture (nas.search.picture): a generation per network (digest) to colour by, and a
    # path to draw as a line (greedy slimming's steps from the largest network).
    generation: dict[str, int] = dataclasses.field(default_factory=dict)
    path: tuple[ArchConfig, ...] = ()


@runtime_checkable
class SearchStrategy(Protocol):
    """A way of searching: ``run`` writes its own outputs in ``context.run`` and returns what it found."""

    name: str
    options: type  # a frozen dataclass of the strategy's options; its defaults are what runs without --set

    def run(self, context: SearchContext, options: Any) -> StrategyOutcome:
        """Search (resuming what ``context.run`` holds when ``context.resume``) and return the outcome."""
        ...


# A strategy may also define ``continue_from(previous_run, run) -> bool``: in a family search
# (nas.search.family) it prepares the next target's folder from the previous target's (greedy: one path)
# and says whether the next search resumes from it.


def _refused(strategy: Any) -> str:
    if not isinstance(strategy, SearchStrategy):
        return (
            f"register_strategy needs a name, an options dataclass and a run(context, options) method, "
            f"got {type(strategy).__name__}"
        )
    return f"strategy {strategy.name!r}: options must be a dataclass, got {strategy.options!r}"


# The registry, like the families': the built-in strategies' modules register them when imported.
_STRATEGIES: LazyRegistry[SearchStrategy] = LazyRegistry(
    "search strategy",
    ENTRY_POINT_GROUP,
    accepts=lambda obj: isinstance(obj, SearchStrategy) and dataclasses.is_dataclass(obj.options),
    refuse=_refused,
    unknown="unknown search strategy {name}; choose one of {names}",
    builtin={
        "evolution": "nas.search.evolution",
        "greedy": "nas.search.greedy.strategy",
        "optuna": "nas.search.optuna_nsga",
        "random": "nas.search.random_search",
    },
)


def register_strategy(strategy: SearchStrategy) -> SearchStrategy:
    """Make ``strategy`` known by its name (registering a name again replaces the old strategy)."""
    return _STRATEGIES.register(strategy)


def strategy_names() -> list[str]:
    """The names of the built-in, plug-in and registered strategies, sorted (nothing is imported)."""
    return _STRATEGIES.names()


def get_strategy(name: str) -> SearchStrategy:
    """The strategy ``name``; an unknown one is a :class:`NasError` that lists the known."""
    return _STRATEGIES.get(name)


def parse_assignments(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["key=value", ...]`` (``--set``) as a mapping; a pair without ``=`` is a :class:`NasError`."""
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise NasError(f"--set {pair!r}: give key=value")
        settings[key.strip().replace("-", "_")] = value.strip()
    return settings


def strategy_options(strategy: SearchStrategy, settings: dict[str, Any] | None = None) -> Any:
    """``strategy``'s options with ``settings`` (``key: value``, values as YAML text or already typed)
    applied to its defaults; an unknown key or a bad value is one :class:`NasError` line that names
    the strategy and the allowed keys."""
    fields = {f.name: f for f in dataclasses.fields(strategy.options)}
    data: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        if isinstance(value, str):
            try:
                value = yaml.safe_load(value) if value else None
            except yaml.YAMLError:
                pass  # a plain string, checked against the field's type below
            if isinstance(value, str):  # YAML 1.1 reads 1e-9 as a string
                try:
                    value = float(value)
                except ValueError:
                    pass
            if key in fields and isinstance(value, str) and isinstance(fields[key].default, tuple):
                value = [value]  # one entry of a list option
        data[key] = value
    try:
        return from_mapping(strategy.options, data, "--set")
    except NasError as exc:
        raise NasError(f"strategy {strategy.name}: {exc}") from None


def options_dict(options: Any) -> dict[str, Any]:
    """Options as plain data (``config.yaml``), tuples as lists."""

    def plain(value):
        return [plain(v) for v in value] if isinstance(value, (list, tuple)) else value

    return {key: plain(value) for key, value in dataclasses.asdict(options).items()}
