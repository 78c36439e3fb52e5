"""``nas search``: a search strategy (greedy slimming by default) of a trained supernet to a target.

The run folder gets the settings (``config.yaml``), the cache of evaluated accuracies
(``evaluations.jsonl``), and what the strategy writes (:mod:`nas.search.strategy`): the chosen
``arch.yaml`` and ``result.json`` always; greedy slimming its steps and state
(:mod:`nas.search.slimming`), optuna and random search their trials (:mod:`nas.search.nsga`,
:mod:`nas.search.random_search`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.latency import LatencyTable
from nas.latency.predicted import keep, table_for
from nas.runs.checkpoint import file_digest, load_checkpoint
from nas.runs.config import SearchRunConfig
from nas.runs.folder import SEARCH, RunFolder
from nas.search.evaluator import SUPERNET_KEYS, DiskCache, EvalSpec
from nas.search.greedy import SearchState, require_reachable
from nas.search.objective import Objective, cost_function, require_table
from nas.search.pool import EvaluatorPool
from nas.search.resolution import price_size, warn_if_apart
from nas.search.screen import ScreenConfig
from nas.search.strategy import SearchContext, get_strategy
from nas.space_files import load_space, recorded_source
from supernets import get_family

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
    strategy: str = "greedy"  # nas.search.strategy: greedy (EfficientFormerV2 alg. 1), optuna (NSGA-II), random
    screen: ScreenConfig = ScreenConfig()  # greedy: which shrinks each step evaluates (keep=0: all)
    trials: int = 64  # optuna: finished trials the study should hold; random: sub-networks evaluated
    storage: str | None = None  # optuna: database URL (default sqlite:///RUN/optuna.db)
    study_name: str = "nas-search"
    workers: int = 0  # Ray workers (0: evaluate in this process)
    ray_address: str | None = None  # join an existing Ray cluster
    resume: bool = False


@dataclass(frozen=True)
class _Prepared:
    """Everything checked and built before the run folder is touched."""

    spec: EvalSpec
    space: SearchSpace
    cost: Any
    actions: Any
    config: SearchRunConfig
    context: dict
    table: LatencyTable | None = None


def search(request: SearchRequest) -> dict[str, Any]:
    """Search the supernet in ``request.supernet`` for its objective with ``request.strategy``.

    Every input (the supernet run and its checkpoint, the space, the table, the data) is checked
    before the run folder is created; the folder is locked while the search runs; ``resume``
    continues it only with the same settings (:class:`nas.runs.config.SearchRunConfig`)."""
    strategy = get_strategy(request.strategy)
    prepared = _prepare(request)
    run = Path(request.run)
    folder = RunFolder(run, SEARCH)
    folder.check(prepared.config, request.resume)
    state = _saved_state(run, request.resume)
    # The evaluators read the data and weights now: bad data fails before the folder exists.
    pool = EvaluatorPool(
        prepared.spec, request.workers, request.ray_address, DiskCache(run / "evaluations.jsonl", prepared.context)
    )
    try:
        with folder.start(prepared.config, request.resume):  # checked again, now that no one else writes
            state = _saved_state(run, request.resume)
            clock = folder.clock(request.resume)
            return strategy.run(
                SearchContext(
                    space=prepared.space,
                    pool=pool,
                    cost=prepared.cost,
                    objective=request.objective,
                    run=run,
                    config=prepared.config,
                    clock=clock,
                    seed=request.seed,
                    resume=request.resume,
                    table=prepared.table,
                    state=state,
                    actions=prepared.actions,
                    screen=request.screen,
                    trials=request.trials,
                    storage=request.storage,
                    study_name=request.study_name,
                )
            )
    finally:
        pool.close()


def _prepare(request: SearchRequest) -> _Prepared:
    """Read and check the supernet run, space, table and objective; the run's config."""
    spec = EvalSpec.from_run(request.supernet, request.bn_calib_batches, request.search_images)
    space = load_space(spec.space)
    if request.space and load_space(request.space).name != space.name:
        raise NasError(f"--space {request.space} does not match the supernet run's space {space.name}")
    objective, device, greedy = request.objective, request.device, request.strategy == "greedy"
    require_table(objective.name, device)
    # Metadata only (tensors mapped, not read); every evaluator (one per Ray actor) loads the weights.
    checkpoint = load_checkpoint(spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS, mmap=True)
    num_classes, trained = checkpoint["num_classes"], int(checkpoint["img_size"])
    # Priced where accuracy is measured unless asked otherwise; a resumed search keeps what it recorded.
    recorded = RunFolder(request.run, SEARCH).recorded_setting("img_size", request.resume)
    img_size = price_size(request.img_size, recorded, trained)
    warn_if_apart(img_size, trained, "the supernet trained", "the search")
    table = table_for(device, space, img_size) if device else None
    cost = cost_function(table, img_size, num_classes)  # parameters of the network the run trains
    # A family may slim by its own moves (EfficientFormer alg. 1: by the importance of its choices).
    actions, actions_note = None, None
    if greedy:
        try:
            chosen = get_family(space.family).greedy_actions(space, checkpoint, objective.name)
        except NasError as exc:
            raise NasError(f"{spec.checkpoint}: {exc}") from None
        if chosen is not None:
            actions, actions_note = chosen
    require_reachable(space, cost, objective, space.largest())  # before any folder exists
    table = keep(table) if table is not None else None  # a table predicted just now is saved once all is checked
    context = spec.context()
    optuna = request.strategy == "optuna"
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
        trials=request.trials if not greedy else None,
        actions=actions_note,
        storage=request.storage if optuna else None,
        study_name=request.study_name if optuna else None,
        evaluate_top=request.screen.keep if greedy else 0,
        explore=request.screen.explore if greedy and request.screen.enabled else 0,
        search_images=request.search_images,
    )
    return _Prepared(spec, space, cost, actions, config, context, table)


def _saved_state(run: Path, resume: bool) -> SearchState | None:
    """The greedy state a resumed search continues from (None: start afresh)."""
    state_path = run / "state.json"
    return SearchState.read(state_path) if resume and state_path.exists() else None
