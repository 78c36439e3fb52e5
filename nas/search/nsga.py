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
from pathlib import Path

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace, block_slots
from nas.core.typed_yaml import dump_yaml, write_text_atomic
from nas.runs.writers import pyplot, save_figure
from nas.search.greedy import AccuracyFn, CostFn
from nas.search.objective import Objective
from nas.search.strategy import SearchContext, register_strategy
from nas.search.trials import choose, write_trials

log = logging.getLogger(__name__)


def arch_from_trial(space: SearchSpace, trial) -> ArchConfig:
    """The sub-network an optuna ``trial`` suggests (per stage: width, depth and attention or block
    choice, a ratio per slot), repaired to a valid arch of ``space``."""
    depths, widths, attention, hidden, types = [], [], [], [], []
    block_choice = space.rules.block_choice
    for s, st in enumerate(space.stages):
        width = trial.suggest_categorical(f"s{s}_width", list(st.widths))
        if block_choice:
            allowed = ["mb4d", "skip"] + (["mb3d"] if st.max_attention > 0 else [])
            chosen = [trial.suggest_categorical(f"s{s}_p{j}", allowed) for j in range(st.max_depth)]
            kept = [j for j, t in enumerate(chosen) if t != "skip"] or [0]
            kept = kept[: st.max_depth]
            while len(kept) not in st.depths:  # repair to an allowed depth
                kept = (
                    kept[:-1]
                    if len(kept) > max(st.depths)
                    else kept + [j for j in range(st.max_depth) if j not in kept][:1]
                )
            n3d = min(sum(chosen[j] == "mb3d" for j in kept), st.max_attention)
            n3d = max(a for a in st.attention_choices(len(kept)) if a <= n3d)
            stage_types = ["skip"] * st.max_depth
            for i, j in enumerate(sorted(kept)):
                stage_types[j] = "mb3d" if i >= len(kept) - n3d else "mb4d"
            types.append(tuple(stage_types))
            depth, att, slots = len(kept), n3d, sorted(kept)
        else:
            depth = trial.suggest_categorical(f"s{s}_depth", list(st.depths))
            att = trial.suggest_categorical(f"s{s}_attention", list(st.attention))
            att = max(a for a in st.attention_choices(depth) if a <= min(att, depth))
            slots = block_slots(depth, att, st.max_depth)
        ratios = [trial.suggest_categorical(f"s{s}_slot{k}_ratio", list(st.ratios_at(k))) for k in range(st.max_depth)]
        depths.append(depth)
        widths.append(width)
        attention.append(att)
        hidden.append(tuple(ratios[k] * width for k in slots))
    arch = ArchConfig(space.family, tuple(depths), tuple(widths), tuple(attention), tuple(hidden), tuple(types))
    return space.validate(arch)


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
    earlier version, which recorded none and may have optimised latency whatever the objective)."""
    wanted = {"objective": objective.name, "target": objective.target}
    saved = {key: study.user_attrs.get(key) for key in wanted}
    if saved == wanted:
        return
    if all(v is None for v in saved.values()) and not study.get_trials(deepcopy=False):
        for key, value in wanted.items():
            study.set_user_attr(key, value)
        return
    held = (
        f"{saved['objective']} {saved['target']:g}"
        if None not in saved.values()
        else "trials that record no objective (an earlier version of nas)"
    )
    raise NasError(
        f"--storage {storage}: study {study_name} holds {held}, not {objective.name} {objective.target:g}; "
        "choose another --study-name or --storage"
    )


def violation(objective: Objective, value: float) -> float:
    """How far ``value`` is from meeting the target, relative to it (0 or less: it meets it)."""
    return (objective.target - value if objective.higher_is_better else value - objective.target) / objective.target


def nsga_search(
    space: SearchSpace,
    accuracy: AccuracyFn,
    cost: CostFn,
    objective: Objective,
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


class NsgaStrategy:
    """``optuna``: NSGA-II over accuracy and the objective, within the target (:func:`nsga_search`)."""

    name = "optuna"

    def run(self, context: SearchContext) -> dict:
        """Run (or continue) the study; choose its most accurate trial within the target."""
        records, front = nsga_search(
            context.space,
            context.pool,
            context.cost,
            context.objective,
            context.trials,
            context.seed,
            context.run,
            context.storage,
            context.study_name,
        )
        storage = context.storage or default_storage(context.run)
        retry = f"add trials to the study from a new --run with --storage {storage} and more --trials"
        return choose(context, records, self.name, retry, pareto=front)


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
