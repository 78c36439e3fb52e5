"""``nas search``: a search strategy of a trained supernet to a target, then its finalists scored again.

The run folder gets the settings (``config.yaml``, the strategy's options included), the cache of
evaluated accuracies (``evaluations.jsonl``, every fidelity), what the strategy writes
(:mod:`nas.search.strategy`: evolution its population, greedy slimming its steps and state, optuna
and random search their trials), and the chosen ``arch.yaml`` and ``result.json``
(:mod:`nas.search.finalists`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nas.config.spaces import load_space, recorded_source
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.latency import LatencyTable
from nas.latency.predicted import keep, table_for
from nas.runs.checkpoint import file_digest
from nas.runs.config import SearchRunConfig
from nas.runs.folder import SEARCH, RunFolder
from nas.search.command_choices import DEFAULT_STRATEGY
from nas.search.evaluator import DiskCache, EvalSpec
from nas.search.family import member_arch_path
from nas.search.family import search_family as run_family
from nas.search.finalists import FinalScoring, SearchResult, finalize
from nas.search.input_size import price_size, warn_if_apart
from nas.search.objective import Objective, cost_function, require_reachable, require_table
from nas.search.pool import EvaluatorPool
from nas.search.progress import watched
from nas.search.strategy import SearchContext, SearchStrategy, get_strategy, options_dict, strategy_options
from nas.search.supernet_run import SupernetRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchRequest:
    """What ``nas search`` is asked to do (the CLI's flags, as one object)."""

    supernet: str | Path  # run folder of `nas train-supernet`
    objective: Objective
    run: str | Path  # the search's run folder
    device: str | None = None  # latency table device (needed for mes and latency)
    img_size: int | None = None  # input size cost is priced at (None: the supernet's training size)
    seed: int = 0
    space: str | None = None  # check that the supernet's space is this one
    bn_calib_batches: int | None = None  # override the supernet recipe's
    search_images: int | None = None  # score a class-balanced subset of the search split (None: all)
    strategy: str = DEFAULT_STRATEGY  # a name of nas.search.strategy's registry
    options: dict[str, Any] = field(default_factory=dict)  # the strategy's options to set (--set key=value)
    final: FinalScoring = FinalScoring()  # noise and finalists (nas.search.finalists)
    workers: int = 0  # Ray workers (0: evaluate in this process)
    ray_address: str | None = None  # join an existing Ray cluster
    resume: bool = False
    # Several targets: one network per target from one run (nas.search.family); () or one: a single search.
    targets: tuple[float, ...] = ()
    progress: bool = True  # evaluations done, the best so far and the time left, on stderr (-q: off)


@dataclass(frozen=True)
class PreparedSearch:
    """Everything a search checks and builds before its run folder is touched."""

    supernet: SupernetRun
    spec: EvalSpec
    cost: Any
    config: SearchRunConfig
    context: dict
    options: Any
    table: LatencyTable | None = None

    @property
    def space(self) -> SearchSpace:
        """The supernet's space (loaded once, with the run)."""
        return self.supernet.space


def search(request: SearchRequest) -> SearchResult:
    """Search the supernet in ``request.supernet`` for its objective with ``request.strategy``, then
    score its finalists (:func:`nas.search.finalists.finalize`).

    Every input (the supernet run and its checkpoint, the space, the table, the data, the strategy's
    options) is checked before the run folder is created; the folder is locked while the search
    runs; ``resume`` continues it only with the same settings (:class:`nas.runs.config.SearchRunConfig`)."""
    if len(request.targets) > 1:
        raise NasError("search() searches one target; search_family() several")

    def one_target(strategy, prepared: PreparedSearch, pool: EvaluatorPool, folder: RunFolder) -> SearchResult:
        context = SearchContext(
            supernet=prepared.supernet,
            pool=pool,
            cost=prepared.cost,
            objective=request.objective,
            run=folder.path,
            config=prepared.config,
            clock=folder.clock(request.resume),
            seed=request.seed,
            resume=request.resume,
            table=prepared.table,
        )
        label = f"search {request.objective.target:g} {request.objective.unit}"
        shown = (label, request.objective, prepared.cost, prepared.options, request.progress, pool.searched)
        with watched(pool, *shown, pool.evaluated()):
            return finalize(context, strategy.run(context, prepared.options), request.final)

    return _in_run_folder(request, one_target)


def search_family(request: SearchRequest) -> dict[str, Any]:
    """Search the supernet for every target of ``request.targets`` in one run folder with one evaluation
    cache (:mod:`nas.search.family`); every input is checked, every target's reachability included, before
    the folder is created. Returns the family's ``result.json``."""
    return _in_run_folder(request, functools.partial(run_family, request))


def _in_run_folder(request: SearchRequest, body: Callable[..., Any]) -> Any:
    """Check every input, open the evaluators and start the locked run folder, then ``body(strategy, prepared,
    pool, folder)``: what a single search and a family search share."""
    strategy = get_strategy(request.strategy)
    run = Path(request.run)
    folder = RunFolder(run, SEARCH)  # opened once: _prepare reads the size a resumed search recorded
    prepared = _prepare(request, strategy, folder)
    folder.check(prepared.config, request.resume)
    # The evaluators read the data and weights now: bad data fails before the folder exists.
    cache = DiskCache(run / "evaluations.jsonl", prepared.context)
    pool = EvaluatorPool(prepared.spec, request.workers, request.ray_address, cache, space=prepared.space)
    try:
        with folder.start(prepared.config, request.resume):  # checked again, now that no one else writes
            return body(strategy, prepared, pool, folder)
    finally:
        pool.close()


def _prepare(request: SearchRequest, strategy: SearchStrategy, folder: RunFolder) -> PreparedSearch:
    """Read and check the supernet run, space, table, objective and options; the run's config."""
    options = strategy_options(strategy, request.options)
    supernet = SupernetRun.read(request.supernet)  # every evaluator (one per Ray actor) loads the weights
    spec, space = supernet.eval_spec(request.bn_calib_batches, request.search_images), supernet.space
    if request.space and load_space(request.space).name != space.name:
        raise NasError(f"--space {request.space} does not match the supernet run's space {space.name}")
    objective, device = request.objective, request.device
    require_table(objective.name, device)
    num_classes, trained = supernet.num_classes, supernet.img_size
    # Priced where accuracy is measured unless asked otherwise; a resumed search keeps what it recorded.
    recorded = folder.recorded_setting("img_size", request.resume)
    img_size = price_size(request.img_size, recorded, trained)
    warn_if_apart(img_size, trained, "the supernet trained", "the search")
    table = table_for(device, space, img_size) if device else None
    cost = cost_function(table, img_size, num_classes)  # parameters of the network the run trains
    for target in request.targets or (objective.target,):  # before any folder exists
        require_reachable(space, cost, Objective(objective.name, target), space.largest())
    for name in getattr(options, "include", ()):  # networks a strategy is told to start from
        space.resolve(member_arch_path(name))
    check = getattr(strategy, "check", None)  # a strategy's own checks, before any folder exists
    if check is not None:
        check(supernet, objective, cost, options)
    table = keep(table) if table is not None else None  # a table predicted just now is saved once all is checked
    context = spec.context()
    config = SearchRunConfig(
        supernet=str(request.supernet),
        space=space.name,
        space_file=recorded_source(space),
        objective=objective.name,
        target=objective.target,
        device=device,
        img_size=img_size,
        train_img_size=trained,
        seed=request.seed,
        num_classes=num_classes,
        supernet_digest=context["supernet_digest"],
        bn_calib_batches=context["bn_calib_batches"],
        data=spec.data,
        data_fingerprint=context["data_fingerprint"],
        split_seed=spec.seed,
        table_digest=file_digest(table.path) if table is not None else None,
        latency_source=table.describe_source() if table else None,
        strategy=request.strategy,
        strategy_options=options_dict(options),
        final_scoring=request.final.recorded(),
        search_images=request.search_images,
        targets=tuple(float(t) for t in request.targets) if len(request.targets) > 1 else (),
    )
    return PreparedSearch(supernet, spec, cost, config, context, options, table)
