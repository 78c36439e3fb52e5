"""``nas search``: greedy slimming of a trained supernet to a target, with its outputs.

The run folder gets one JSON line per step (``search.jsonl``), the state after every step
(``state.json``, for ``--resume``), the cache of evaluated accuracies (``evaluations.jsonl``), the
chosen ``arch.yaml``, a Markdown summary and a plot of accuracy against the objective along the
trajectory.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import write_text_atomic
from nas.latency import LatencyTable
from nas.runs.checkpoint import file_digest, load_checkpoint
from nas.runs.config import SearchRunConfig
from nas.runs.folder import SEARCH, RunFolder
from nas.runs.provenance import RunClock
from nas.runs.tboard import Curves
from nas.runs.writers import markdown_table, pyplot, save_figure, write_json
from nas.search.evaluator import SUPERNET_KEYS, DiskCache, EvalSpec
from nas.search.greedy import SearchState, Step, greedy_slim, require_reachable
from nas.search.nsga import nsga_search
from nas.search.objective import Cost, Objective, cost_function, require_table
from nas.search.pool import EvaluatorPool
from nas.search.screen import ScreenConfig
from nas.space_files import load_space, recorded_source
from supernets import get_family

log = logging.getLogger(__name__)


def _state_to_json(state: SearchState) -> str:
    return (
        json.dumps(
            {
                "start": state.start.to_dict(),
                "start_accuracy": state.start_accuracy,
                "steps": [s.to_dict() for s in state.steps],
            },
            indent=1,
        )
        + "\n"
    )


def _state_from_json(path: Path) -> SearchState:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
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
        return SearchState(ArchConfig.from_dict(data["start"]), data["start_accuracy"], steps)
    except (ValueError, KeyError, TypeError) as exc:
        raise NasError(f"{path}: corrupt search state ({type(exc).__name__}: {exc}); start a new --run") from None


@dataclass(frozen=True)
class SearchRequest:
    """What ``nas search`` is asked to do (the CLI's flags, as one object)."""

    supernet: str | Path  # run folder of `nas train-supernet`
    objective: Objective
    run: str | Path  # the search's run folder
    device: str | None = None  # latency table device (needed for mes and latency)
    img_size: int = 224  # input size the latency is priced at
    seed: int = 0
    space: str | None = None  # check that the supernet's space is this one
    bn_calib_batches: int | None = None  # override the supernet recipe's
    search_images: int | None = None  # score a class-balanced subset of the search split (None: all)
    strategy: str = "greedy"  # greedy (EfficientFormerV2 alg. 1) or optuna (NSGA-II)
    screen: ScreenConfig = ScreenConfig()  # greedy: which shrinks each step evaluates (keep=0: all)
    trials: int = 64  # optuna: finished trials the study should hold
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
    """Greedy slimming (or NSGA-II) of the supernet in ``request.supernet`` to its objective.

    Every input (the supernet run and its checkpoint, the space, the table, the data) is checked
    before the run folder is created; the folder is locked while the search runs; ``resume``
    continues it only with the same settings (:class:`nas.runs.config.SearchRunConfig`)."""
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
            if request.strategy == "optuna":
                front = nsga_search(
                    prepared.space,
                    pool,
                    prepared.cost,
                    request.trials,
                    request.seed,
                    run,
                    request.storage,
                    request.study_name,
                )
                return {
                    "strategy": "optuna",
                    "trials": request.trials,
                    "pareto": front,
                    "evaluations": len(pool.cache.values),
                    "latency_source": prepared.config.latency_source,
                    "provenance": clock.summary(),
                }
            return _greedy(
                run,
                prepared.space,
                pool,
                prepared.cost,
                request.objective,
                prepared.actions,
                state,
                prepared.config,
                clock,
                request.screen,
                prepared.table,
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
    table = LatencyTable.load(device, space, request.img_size) if device else None
    # Metadata only (tensors mapped, not read); every evaluator (one per Ray actor) loads the weights.
    checkpoint = load_checkpoint(spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS, mmap=True)
    num_classes = checkpoint["num_classes"]
    cost = cost_function(table, request.img_size, num_classes)  # parameters of the network the run trains
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
    context = spec.context()
    optuna = request.strategy == "optuna"
    config = SearchRunConfig(
        supernet=str(request.supernet),
        space=space.name,
        space_file=recorded_source(space),
        objective=objective.name,
        target=objective.target,
        device=device,
        img_size=request.img_size,
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
        trials=request.trials if optuna else None,
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
    return _state_from_json(state_path) if resume and state_path.exists() else None


def _greedy(
    run: Path,
    space,
    pool,
    cost,
    objective: Objective,
    actions,
    state: SearchState | None,
    config: SearchRunConfig,
    clock: RunClock,
    screen: ScreenConfig,
    table: LatencyTable | None = None,
) -> dict[str, Any]:
    # TensorBoard: the trajectory, one point per step (0: the largest sub-network). A resumed search
    # logs its last saved point again and hides what the interrupted process logged from there on.
    resumed = any(run.glob("events.out.tfevents.*"))
    curves = Curves(run, purge_from=(len(state.steps) if state else 0) if resumed else None)

    def log_point(current: SearchState) -> None:
        step, arch, accuracy = (
            (current.steps[-1].index, current.steps[-1].arch, current.steps[-1].accuracy)
            if current.steps
            else (0, current.start, current.start_accuracy)
        )
        curves.add("search", {"accuracy": accuracy, **cost(arch).to_dict()}, step)

    if state is not None:
        log_point(state)

    def save(current: SearchState) -> None:
        write_text_atomic(run / "state.json", _state_to_json(current))
        clock.tick()
        write_text_atomic(
            run / "search.jsonl",
            "".join(
                json.dumps({**_log_record(s), "latency_source": config.latency_source}) + "\n" for s in current.steps
            ),
        )
        log_point(current)

    try:
        state = greedy_slim(
            space,
            pool,
            cost,
            objective,
            actions=actions,
            state=state,
            on_step=save,
            screen=screen,
            resolution=pool.resolution,
        )
    finally:
        curves.close()
    final = state.current
    final.save(run / "arch.yaml")
    result = {
        "arch": final.to_dict(),
        "digest": final.digest,
        "accuracy": state.current_accuracy,
        "start_accuracy": state.start_accuracy,
        "steps": len(state.steps),
        **cost(final).to_dict(),
        "latency_interval_ms": _interval(table, cost(final).latency_ms),
        "latency_source": config.latency_source,
        "evaluations": len(pool.cache.values),
        # What the full greedy search (alg. 1 as written) would have evaluated along this path.
        "shrinks_considered": 1 + sum(s.candidates for s in state.steps),
        "evaluate_top": config.evaluate_top,
        "scored_images": pool.scored_images,
        "provenance": clock.summary(),
    }
    _write_summary(run, state, cost, objective, config, table)
    _plot(run, state, cost, objective)
    write_json(run / "result.json", result)
    return result


def _log_record(step: Step) -> dict:
    """``step`` for search.jsonl: without architectures (state.json keeps them)."""
    record = {k: v for k, v in step.to_dict().items() if k != "arch"}
    if step.screen:
        record["screen"] = [{k: v for k, v in r.items() if k != "arch"} for r in step.screen]
    return record


def _interval(table, ms: float | None) -> list[float] | None:
    """The latency's prediction interval ``[low, high]`` where the table has one."""
    bounds = table.interval(ms) if table is not None and ms is not None else None
    return list(bounds) if bounds is not None else None


def _write_summary(
    run: Path, state: SearchState, cost, objective: Objective, config: SearchRunConfig, table=None
) -> None:
    rows = [("start (largest)", state.start, state.start_accuracy)] + [
        (s.action, s.arch, s.accuracy) for s in state.steps
    ]
    lines = [
        f"# Greedy slimming to {objective.name} {objective.target:g}",
        "",
        f"Supernet `{config.supernet}`, space `{config.space}`; accuracy: top-1 on the supernet run's "
        "search split after BatchNorm recalibration (supernet weights, not trained from scratch).",
        "",
    ]
    if config.latency_source:
        lines += [f"Latency: {config.latency_source}.", ""]
    if config.search_images:
        lines += [
            f"Scored on a fixed, class-balanced {config.search_images} images of the search split; BatchNorm "
            f"recalibrated on {config.bn_calib_batches} batches of training images.",
            "",
        ]
    if config.evaluate_top:
        evaluated = 1 + sum(s.evaluated for s in state.steps)
        considered = 1 + sum(s.candidates for s in state.steps)
        lines += [
            f"Screened: after the first step, the {config.evaluate_top} shrinks an accuracy predictor fitted on "
            f"this search's evaluations ranked best, plus {config.explore} of the least recently evaluated "
            f"kind, were evaluated: {evaluated} of the {considered} sub-networks greedy slimming would have "
            "evaluated on this path.",
            "",
        ]
    cells = []
    evaluated_cells = ["1"] + [f"{s.evaluated} / {s.candidates}" for s in state.steps]
    for i, (action, arch, acc) in enumerate(rows):
        c = cost(arch)
        cells.append(
            [
                i,
                action,
                evaluated_cells[i],
                f"{100 * acc:.2f}%",
                f"{c.params / 1e6:.3f}",
                table.format_latency(c.latency_ms, unit=False)
                if table is not None and c.latency_ms is not None
                else f"{c.latency_ms:.3f}"
                if c.latency_ms is not None
                else "-",
                f"{c.mes:.1f}" if c.mes is not None else "-",
            ]
        )
    latency_head = "latency (ms)" + (
        f" ({100 * table.interval_level:.0f}% interval)" if table is not None and table.interval_level else ""
    )
    lines += markdown_table(["step", "action", "evaluated", "top-1", "params (M)", latency_head, "MES"], cells)
    write_text_atomic(run / "summary.md", "\n".join(lines) + "\n")


def _plot(run: Path, state: SearchState, cost, objective: Objective) -> None:
    plt = pyplot()
    archs = [state.start] + [s.arch for s in state.steps]
    accs = [state.start_accuracy] + [s.accuracy for s in state.steps]
    costs = [cost(a) for a in archs]
    x = [c.latency_ms for c in costs] if costs[0].latency_ms is not None else [c.params / 1e6 for c in costs]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, [100 * a for a in accs], "o-")
    ax.annotate("largest", (x[0], 100 * accs[0]))
    ax.set_xlabel("latency (ms)" if costs[0].latency_ms is not None else "parameters (M)")
    ax.set_ylabel("top-1 on the search split (%)")
    ax.set_title(f"greedy slimming to {objective.name} {objective.target:g}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, run / "trajectory.png")
