"""``nas search``: greedy slimming of a trained supernet to a target, with its outputs.

The run folder gets one JSON line per step (``search.jsonl``), the state after every step
(``state.json``, for ``--resume``), the cache of evaluated accuracies (``evaluations.jsonl``), the
chosen ``arch.yaml``, a Markdown summary and a plot of accuracy against the objective along the
trajectory.
"""

from __future__ import annotations

import json
import logging

from pathlib import Path
from typing import Any

from nas.arch import ArchConfig
from nas.errors import NasError
from nas.latency import LatencyTable
from nas.checkpoint import file_digest, load_checkpoint
from nas.runconfig import SearchRunConfig, as_dict, read_run_config, require_resumable
from nas.provenance import RunClock
from nas.runlock import RunLock
from nas.search.evaluator import SUPERNET_KEYS, DiskCache, EvalSpec
from nas.search.greedy import SearchState, Step, greedy_slim, require_reachable
from nas.search.objective import Cost, Objective, cost_function
from nas.search.pool import EvaluatorPool
from nas.space import load_space
from nas.tboard import Curves
from nas.typed_yaml import dump_yaml, write_text_atomic

log = logging.getLogger(__name__)


def _state_to_json(state: SearchState) -> str:
    return json.dumps({"start": state.start.to_dict(), "start_accuracy": state.start_accuracy,
                       "steps": [s.to_dict() for s in state.steps]}, indent=1) + "\n"


def _state_from_json(path: Path) -> SearchState:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        steps = [Step(s["step"], s["action"], ArchConfig.from_dict(s["arch"]), s["accuracy"],
                      Cost(s["params"], s["latency_ms"]), s["delta_accuracy"], s["gain"], s["candidates"])
                 for s in data["steps"]]
        return SearchState(ArchConfig.from_dict(data["start"]), data["start_accuracy"], steps)
    except (ValueError, KeyError, TypeError) as exc:
        raise NasError(f"{path}: corrupt search state ({type(exc).__name__}: {exc}); start a new --run") from None


def search(supernet_run: str | Path, objective: Objective, device: str | None, run: str | Path,
           img_size: int = 224, workers: int = 0, ray_address: str | None = None, seed: int = 0,
           resume: bool = False, space_name: str | None = None, bn_calib_batches: int | None = None,
           strategy: str = "greedy", trials: int = 64, storage: str | None = None,
           study_name: str = "nas-search") -> dict[str, Any]:
    """Greedy slimming (or NSGA-II) of the supernet in ``supernet_run`` to ``objective``, in ``run``.

    Every input (the supernet run and its checkpoint, the space, the table, the data) is checked
    before the run folder is created; the folder is locked while the search runs; ``resume``
    continues it only with the same settings (:class:`nas.runconfig.SearchRunConfig`)."""
    spec = EvalSpec.from_run(supernet_run, bn_calib_batches)
    space = load_space(spec.space)
    if space_name and load_space(space_name).name != space.name:
        raise NasError(f"--space {space_name} does not match the supernet run's space {space.name}")
    if objective.name != "params" and not device:
        raise NasError(f"objective {objective.name} needs --device (a latency table)")
    table = LatencyTable.load(device, space, img_size) if device else None
    # Metadata only (tensors mapped, not read); every evaluator (one per Ray actor) loads the weights.
    checkpoint = load_checkpoint(spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS, mmap=True)
    num_classes = checkpoint["num_classes"]
    cost = cost_function(table, img_size, num_classes)  # parameters of the network the run trains
    actions, actions_note = None, None
    if space.family == "efficientformer" and objective.name == "latency" and strategy == "greedy":
        from nas.search.greedy import efficientformer_actions

        importance = checkpoint.get("importance")
        if not isinstance(importance, dict) or not {"blocks", "stages"} <= set(importance):
            raise NasError(f"{spec.checkpoint}: an EfficientFormer supernet checkpoint without importance scores; "
                           "train it with `nas train-supernet efficientformer`")
        actions = efficientformer_actions(space, importance["blocks"], importance["stages"])
        actions_note = "EfficientFormer alg. 1: least important block, first MB3D, least important stage"
    del checkpoint
    if strategy == "greedy":
        require_reachable(space, cost, objective, space.largest())  # before any folder exists
    context = spec.context()
    config = SearchRunConfig(
        supernet=str(supernet_run), space=space.name, objective=objective.name, target=objective.target,
        device=device, img_size=img_size, seed=seed, num_classes=num_classes,
        supernet_digest=context["supernet_digest"], bn_calib_batches=context["bn_calib_batches"], data=spec.data,
        data_fingerprint=context["data_fingerprint"], split_seed=spec.seed,
        table_digest=file_digest(table.path) if table is not None else None,
        latency_source=table.describe_source() if table else None, strategy=strategy,
        trials=trials if strategy == "optuna" else None, actions=actions_note,
        storage=storage if strategy == "optuna" else None, study_name=study_name if strategy == "optuna" else None)
    run = Path(run)
    state = _check_run_folder(run, config, resume)
    # The evaluators read the data and weights now: bad data fails before the folder exists.
    pool = EvaluatorPool(spec, workers, ray_address, DiskCache(run / "evaluations.jsonl", context))
    try:
        run.mkdir(parents=True, exist_ok=True)
        with RunLock(run, "search"):
            state = _check_run_folder(run, config, resume)  # again, now that no one else writes here
            write_text_atomic(run / "config.yaml", dump_yaml(as_dict(config)))
            clock = RunClock(run, resume)
            if strategy == "optuna":
                from nas.search.nsga import nsga_search

                front = nsga_search(space, pool, cost, trials, seed, run, storage, study_name)
                return {"strategy": "optuna", "trials": trials, "pareto": front,
                        "evaluations": len(pool.cache.values), "latency_source": config.latency_source,
                        "provenance": clock.summary()}
            return _greedy(run, space, pool, cost, objective, actions, state, config, clock)
    finally:
        pool.close()


def _check_run_folder(run: Path, config: SearchRunConfig, resume: bool) -> SearchState | None:
    """The saved state to continue from (None: start), after checking ``run`` against ``resume``."""
    config_path, state_path = run / "config.yaml", run / "state.json"
    if not resume:
        if config_path.exists() or state_path.exists() or (run / "trials.jsonl").exists():
            raise NasError(f"{run} already holds a search; pass --resume to continue it or choose another --run")
        return None
    if not config_path.exists():
        raise NasError(f"{run}: nothing to resume (no config.yaml)")
    require_resumable(read_run_config(config_path, SearchRunConfig), config, config_path)
    return _state_from_json(state_path) if state_path.exists() else None


def _greedy(run: Path, space, pool, cost, objective: Objective, actions, state: SearchState | None,
            config: SearchRunConfig, clock: RunClock) -> dict[str, Any]:
    # TensorBoard: the trajectory, one point per step (0: the largest sub-network). A resumed search
    # logs its last saved point again and hides what the interrupted process logged from there on.
    resumed = any(run.glob("events.out.tfevents.*"))
    curves = Curves(run, purge_from=(len(state.steps) if state else 0) if resumed else None)

    def log_point(current: SearchState) -> None:
        step, arch, accuracy = (current.steps[-1].index, current.steps[-1].arch, current.steps[-1].accuracy) \
            if current.steps else (0, current.start, current.start_accuracy)
        curves.add("search", {"accuracy": accuracy, **cost(arch).to_dict()}, step)

    if state is not None:
        log_point(state)

    def save(current: SearchState) -> None:
        write_text_atomic(run / "state.json", _state_to_json(current))
        clock.tick()
        write_text_atomic(run / "search.jsonl", "".join(
            json.dumps({**{k: v for k, v in s.to_dict().items() if k != "arch"},
                        "latency_source": config.latency_source}) + "\n" for s in current.steps))
        log_point(current)

    try:
        state = greedy_slim(space, pool, cost, objective, actions=actions, state=state, on_step=save)
    finally:
        curves.close()
    final = state.current
    final.save(run / "arch.yaml")
    result = {"arch": final.to_dict(), "digest": final.digest, "accuracy": state.current_accuracy,
              "start_accuracy": state.start_accuracy, "steps": len(state.steps), **cost(final).to_dict(),
              "latency_source": config.latency_source, "evaluations": len(pool.cache.values),
              "provenance": clock.summary()}
    _write_summary(run, state, cost, objective, config)
    _plot(run, state, cost, objective)
    write_text_atomic(run / "result.json", json.dumps(result, indent=1) + "\n")
    return result


def _write_summary(run: Path, state: SearchState, cost, objective: Objective, config: SearchRunConfig) -> None:
    rows = [("start (largest)", state.start, state.start_accuracy)] + [(s.action, s.arch, s.accuracy)
                                                                        for s in state.steps]
    lines = [f"# Greedy slimming to {objective.name} {objective.target:g}", "",
             f"Supernet `{config.supernet}`, space `{config.space}`; accuracy: top-1 on the supernet run's "
             "search split after BatchNorm recalibration (supernet weights, not trained from scratch).", ""]
    if config.latency_source:
        lines += [f"Latency: {config.latency_source}.", ""]
    lines += ["| step | action | top-1 | params (M) | latency (ms) | MES |", "|---|---|---|---|---|---|"]
    for i, (action, arch, acc) in enumerate(rows):
        c = cost(arch)
        lat = f"{c.latency_ms:.3f}" if c.latency_ms is not None else "-"
        m = f"{c.mes:.1f}" if c.mes is not None else "-"
        lines.append(f"| {i} | {action} | {100 * acc:.2f}% | {c.params / 1e6:.3f} | {lat} | {m} |")
    write_text_atomic(run / "summary.md", "\n".join(lines) + "\n")


def _plot(run: Path, state: SearchState, cost, objective: Objective) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.savefig(run / "trajectory.png", dpi=120)
    plt.close(fig)
