"""Multi-objective search with optuna's NSGA-II (``--strategy optuna``): accuracy up and the
objective (MES up, latency or parameters down), within its target.

The target is a constraint of the study: NSGA-II prefers sub-networks that meet it, the Pareto front
(``pareto.yaml``, ``pareto.png``) holds only those, and the most accurate of them is the chosen
``arch.yaml``. Each trial proposes one value per choice of the space (depth, width and attention count per
stage; block type per position for EfficientFormer; expansion ratio per block slot); values that
do not fit together are repaired (attention capped by depth, EfficientFormer's 3D blocks moved
behind its 4D ones). Accuracies come from the same evaluator and cache as the greedy search.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import dump_yaml, setting
from nas.runs.writers import pyplot, save_figure
from nas.search.objective import Objective, SearchProblem
from nas.search.strategy import SearchContext, StrategyOutcome, register_strategy
from nas.search.trials import trials_outcome, write_trials

log = logging.getLogger(__name__)


def arch_from_trial(space: SearchSpace, trial) -> ArchConfig:
    """The sub-network an optuna ``trial`` suggests: one value per choice of the space
    (:meth:`SearchSpace.choice_options`, whose names are the trial's parameters), repaired into it."""
    options = space.choice_options()
    return space.repair({name: trial.suggest_categorical(name, list(allowed)) for name, allowed in options.items()})


def default_storage(run: Path) -> str:
    """The study's database when no ``--storage`` is given: SQLite in the run folder
    (``optuna-dashboard sqlite:///runs/X/optuna.db`` opens it)."""
    return f"sqlite:///{(Path(run) / 'optuna.db').resolve()}"


def open_study(storage: str, study_name: str, seed: int, objective: Objective, population: int = 16):
    """The NSGA-II study in ``storage`` (created, or loaded to continue it) of accuracy and ``objective``.
    Trials of a process that died stay RUNNING only until their heartbeat expires; then they count as
    failed. A study records its objective and target, and one of another is refused."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kwargs = {"connect_args": {"timeout": 60}} if storage.startswith("sqlite") else {}
    directions = ["maximize", "maximize" if objective.higher_is_better else "minimize"]
    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats
                rdb = optuna.storages.RDBStorage(storage, heartbeat_interval=10, grace_period=30, engine_kwargs=kwargs)
                study = optuna.create_study(
                    study_name=study_name,
                    storage=rdb,
                    load_if_exists=True,
                    directions=directions,
                    sampler=optuna.samplers.NSGAIISampler(population_size=population, seed=seed),
                )
                break
        except (ImportError, ValueError, optuna.exceptions.OptunaError) as exc:
            raise NasError(f"--storage {storage}: cannot open the optuna study ({str(exc).splitlines()[0]})") from None
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy: two processes creating one new database race
            if attempt == 4:
                raise NasError(
                    f"--storage {storage}: cannot open the optuna study ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0]})"
                ) from None
            time.sleep(0.5 * (attempt + 1))
    _check_objective(study, objective, storage, study_name)
    return study


def _check_objective(study, objective: Objective, storage: str, study_name: str) -> None:
    """Record ``objective`` in a new study; refuse a study of another objective or target (or of an
    earlier version, which recorded none and may have optimised latency whatever the objective).

    The objective and its target are one user attribute, written at once: written as two, a second
    process opening the study between the writes read a half-recorded study and was refused."""
    wanted = {"name": objective.name, "target": objective.target}
    saved = _recorded_objective(study)
    if saved is None and not study.get_trials(deepcopy=False):
        study.set_user_attr("objective", wanted)
        saved = _recorded_objective(study)  # two new processes racing: the last write holds
    if saved == wanted:
        return
    held = (
        f"{saved['name']} {saved['target']:g}"
        if saved is not None
        else "trials that record no objective (an earlier version of nas)"
    )
    raise NasError(
        f"--storage {storage}: study {study_name} holds {held}, not {objective.name} {objective.target:g}; "
        "choose another --study-name or --storage"
    )


def _recorded_objective(study) -> dict | None:
    """``{"name", "target"}`` as the study records it (earlier versions wrote two attributes, read still)."""
    attrs = study.user_attrs
    saved = attrs.get("objective")
    if isinstance(saved, dict):
        return saved
    if saved is not None and attrs.get("target") is not None:
        return {"name": saved, "target": attrs["target"]}
    return None


def violation(objective: Objective, value: float) -> float:
    """How far ``value`` is from meeting the target, relative to it (0 or less: it meets it)."""
    return (objective.target - value if objective.higher_is_better else value - objective.target) / objective.target


def nsga_search(
    problem: SearchProblem,
    trials: int,
    seed: int,
    run: Path,
    storage: str | None = None,
    study_name: str = "nas-search",
    population: int = 16,
) -> tuple[list[dict], list[dict]]:
    """Run NSGA-II until the study holds ``trials`` finished trials; write trials.jsonl, pareto.yaml
    and pareto.png (of every finished trial of the study, whoever ran it); return the trials and the
    Pareto front of those within the target, from the smallest (``params``) or the fastest.

    The second objective is ``objective``'s value (parameters, latency or MES) and its target a
    constraint. The study lives in a database (``storage``, default SQLite in ``run``), so an
    interrupted search continues where it stopped and several processes (each with its own ``--run``)
    can add trials to one study."""
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    space, accuracy, cost, objective = problem.space, problem.accuracy, problem.cost, problem.objective
    study = open_study(storage or default_storage(run), study_name, seed, objective, population)

    def evaluate(trial):
        arch = arch_from_trial(space, trial)
        acc = accuracy([arch])[0]
        c = cost(arch)
        for key, value in {
            **c.to_dict(),
            "accuracy": acc,
            "digest": arch.digest,
            "arch": arch.to_dict(),
            "run": str(run),
        }.items():
            trial.set_user_attr(key, value)
        value = objective.value(c)
        trial.set_constraint("target", violation(objective, value))
        return acc, value

    finished = (TrialState.COMPLETE,)
    if len(study.get_trials(deepcopy=False, states=finished)) < trials:
        study.optimize(evaluate, n_trials=trials, callbacks=[MaxTrialsCallback(trials, states=finished)])
    done = study.get_trials(deepcopy=False, states=finished)
    records = [
        {
            "trial": t.number,
            **{k: t.user_attrs[k] for k in ("accuracy", "params", "latency_ms", "mes", "digest", "arch", "run")},
        }
        for t in done
    ]
    write_trials(run, records)
    front_ids = {t.number for t in study.best_trials}  # the constraint holds: only trials within the target
    order = "params" if objective.name == "params" else "latency_ms"
    front = sorted((r for r in records if r["trial"] in front_ids), key=lambda r: r[order])
    write_text_atomic(run / "pareto.yaml", dump_yaml(front))
    _plot(run, records, front, objective)
    return records, front


@dataclass(frozen=True)
class NsgaOptions:
    """``--strategy optuna``'s options (``--set key=value``)."""

    evaluations: int = setting(64, low=1, help="finished trials the study should hold (sub-networks evaluated)")
    population: int = setting(16, low=2, help="NSGA-II's population per generation")
    storage: str | None = setting(
        None,
        help="database URL of the study, shared by processes that add trials to it (default: sqlite:///RUN/optuna.db)",
    )
    study_name: str = setting("nas-search", help="the study's name in storage")


class NsgaStrategy:
    """``optuna``: NSGA-II over accuracy and the objective, within the target (:func:`nsga_search`)."""

    name = "optuna"
    options = NsgaOptions

    def run(self, context: SearchContext, options: NsgaOptions) -> StrategyOutcome:
        """Run (or continue) the study; choose its most accurate trial within the target."""
        records, front = nsga_search(
            SearchProblem(context.space, context.pool, context.cost, context.objective),
            options.evaluations,
            context.seed,
            context.run,
            options.storage,
            options.study_name,
            options.population,
        )
        storage = options.storage or default_storage(context.run)
        retry = f"add trials to the study from a new --run with --set storage={storage} and more evaluations"
        lines = [f"study        {storage} ({options.study_name}: {len(records)} trials)"]
        lines.append(f"pareto       {context.run}/pareto.yaml ({len(front)} sub-networks), {context.run}/pareto.png")
        lines += [
            f"  top-1 {100 * r['accuracy']:.2f}%  params {r['params'] / 1e6:.3f} M"
            + (f"  latency {r['latency_ms']:.3f} ms  MES {r['mes']:.1f}" if r["latency_ms"] is not None else "")
            for r in front
        ]
        return trials_outcome(context, records, retry, tuple(lines), pareto=front)


_AXIS = {"params": ("params", "parameters"), "latency": ("latency_ms", "latency (ms)"), "mes": ("mes", "MES")}


def _plot(run: Path, records: list[dict], front: list[dict], objective: Objective) -> None:
    plt = pyplot()
    key, label = _AXIS[objective.name]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([r[key] for r in records], [100 * r["accuracy"] for r in records], s=10, alpha=0.4, label="trials")
    front = sorted(front, key=lambda r: r[key])
    ax.plot([r[key] for r in front], [100 * r["accuracy"] for r in front], "o-", color="C3", label="Pareto front")
    ax.axvline(objective.target, color="0.5", linestyle="--", linewidth=1, label=f"target {objective.target:g}")
    ax.set_xlabel(label)
    ax.set_ylabel("top-1 on the search split (%)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, run / "pareto.png")


register_strategy(NsgaStrategy())
