"""Searched network against random sub-networks of the same budget, all trained from scratch.

The papers' evidence that search matters (EfficientFormer tab. 5, EfficientFormerV2 §5.3) is
that the searched network beats random sub-networks that meet the same budget when every network
is trained from scratch with the same recipe. :func:`compare` makes that comparison: it draws the
random networks as ``nas sample`` does (uniform per choice, within ``tolerance`` of the searched
network's MES, latency or size, on the side that meets it) from a seed of their own
(:func:`nas.studies.compare_plan.draw_seed`: the searched network and ``--seed``), or reuses another
comparison's (``random_from``, :mod:`nas.studies.compare_plan`), trains each one with
:class:`nas.train.fixed.FixedTrainer` (same recipe, same seed, so the same data order and
augmentation), in this process or as Ray tasks, and writes a Markdown and CSV table and a plot
(:mod:`nas.reports.comparison`).

Everything lives in one output folder: ``plan.json`` (the networks, fixed before any training,
so ``--resume`` trains the same ones), ``archs/*.yaml``, ``runs/<name>/`` (one ``nas train`` run
each, resumable), ``compare.md``, ``compare.csv``, ``compare.png`` and ``result.json``.

Equal MES is not equal cost, so every comparison also fits the random networks' accuracy against
ln(MACs) and predicted latency (:func:`nas.studies.stats.random_frontier`) and says how far above or below
those lines the searched network lies, and where each network sits on cost.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.config.recipe import Recipe
from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.latency import LatencyTable
from nas.metrics import count_macs
from nas.reports.comparison import plot, sources_words, to_csv, to_markdown
from nas.runs.config import CompareRunConfig
from nas.runs.folder import COMPARISON, RunFolder
from nas.runs.writers import write_json
from nas.search.evaluator import EvalSpec
from nas.search.objective import Objective, require_table
from nas.search.supernet_run import SupernetRun
from nas.studies.compare_plan import adopt_trainings, network_kind, plan_networks, reused_networks, saved_plan
from nas.studies.stats import mean_std, pooled_std, random_frontier, searched_vs_baselines, searched_vs_random
from nas.studies.trainings import (
    TrainingPool,
    price_networks,
    read_data_identity,
    read_finished_result,
    seeded_jobs,
    supernet_accuracies,
    train_all,
    trainings_recorded,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompareRequest:
    """What ``nas compare`` is asked to do (the CLI's flags, as one object)."""

    searched: ArchConfig  # the searched network
    space: SearchSpace  # the space it and the random networks belong to
    recipe: Recipe  # how every network is trained from scratch
    out: str | Path  # the comparison's folder
    n_random: int | None = 5  # random sub-networks of the searched network's budget (None: all of random_from's)
    data: str | None = None  # image folder (None: scikit-learn's digits)
    seed: int = 0  # the first training seed; with the searched network, the random networks' draws (draw_seed)
    seeds: int = 1  # training seeds per network: seed, seed + 1, ...
    objective: str = "mes"  # the budget matched: mes, latency or params
    target: float | None = None  # the budget's value (None: the searched network's own; else it must meet it)
    tolerance: float = 0.05  # relative budget band
    device: str | None = None  # latency table device (needed for mes and latency)
    img_size: int | None = None  # input size cost is priced at (None: the supernet's training size, else the recipe's)
    supernet: str | None = None  # also score every network with this supernet run's weights
    bn_calib_batches: int | None = None  # the supernet scores' BatchNorm calibration (None: its recipe's)
    pool: TrainingPool = TrainingPool()  # where the networks train
    resume: bool = False
    max_steps: int | None = None  # stop every training after this many steps (smoke runs)
    recipe_name: str = ""  # how the user named the recipe (for the sources)
    searched_label: str = ""  # how the user named the searched arch
    progress: bool = True
    random_from: str | Path | None = None  # reuse this comparison's random networks instead of drawing them
    # Named networks trained beside them (--baseline: the published variants a user would copy), (label, arch).
    baselines: tuple[tuple[str, ArchConfig], ...] = ()
    reuse_trainings: tuple[str | Path, ...] = ()  # comparisons whose identical finished trainings are copied


@dataclass(frozen=True)
class PreparedComparison:
    """Everything a comparison checks and builds before its folder is touched."""

    config: CompareRunConfig
    num_classes: int
    table: LatencyTable | None
    cost: Any
    supernet_spec: EvalSpec | None  # the supernet scores' evaluator (None: no supernet scores)
    supernet_context: dict
    reused: list[tuple[str, ArchConfig]] | None = None  # random_from's random networks (its names)


def compare(request: CompareRequest) -> dict[str, Any]:
    """Train the searched network and ``n_random`` random sub-networks of its budget from scratch and
    tabulate them. With ``supernet`` (the supernet the search used), every network's supernet
    accuracy (what the search saw) is scored too, with Kendall's tau between the two rankings.

    Every input, the images included (each decoded once), is checked before ``out`` is created;
    ``out`` is locked while the comparison runs; ``resume`` continues it only with the same
    settings (:class:`nas.runs.config.CompareRunConfig`)."""
    _check_request(request)
    folder = RunFolder(request.out, COMPARISON)  # opened once: prepare reads the size a resumed one recorded
    prepared = prepare(request, folder)
    saved = folder.check(prepared.config, request.resume)
    if saved is not None:
        objective, networks, draws = saved_plan(folder, saved)
    else:
        objective, networks, draws = planned_networks(request, prepared)
    plan = {
        "objective": {"name": objective.name, "target": objective.target},
        "networks": [{"name": n, "arch": a.to_dict(), "digest": a.digest} for n, a in networks],
        **{k: v for k, v in draws.items() if k in ("draw_seed", "random_from")},
    }
    with folder.start(prepared.config, request.resume, plan):
        for name, arch in networks:  # written again on resume: a run killed before it wrote them has them
            arch.save(folder.path / "archs" / f"{name}.yaml")
        return _train_and_report(request, prepared, folder, objective, networks, draws)


def planned_networks(
    request: CompareRequest, prepared: PreparedComparison
) -> tuple[Objective, list[tuple[str, ArchConfig]], dict]:
    """The budget (``--target``, else the searched network's own), the networks and how the random ones were
    chosen, for a comparison not yet started (:func:`nas.studies.compare_plan.plan_networks`)."""
    searched, cost = request.searched, prepared.cost
    own = Objective(request.objective, 1.0).value(cost(searched))
    objective = Objective(request.objective, request.target if request.target is not None else own)
    networks, draws = plan_networks(
        request.space, searched, objective, cost, prepared.config, request.baselines, prepared.reused
    )
    return objective, networks, draws


def _check_request(request: CompareRequest) -> None:
    """The settings alone, before anything is read."""
    request.space.validate(request.searched, where=request.searched_label or "searched arch")
    Objective(request.objective, 1.0)  # an unknown objective fails before anything else
    require_table(request.objective, request.device)
    if request.n_random is not None and request.n_random < (0 if request.baselines else 1):
        raise NasError(
            f"--random must be at least 1 (0 only with --baseline: the searched network against named ones), "
            f"got {request.n_random}"
        )
    seen = {request.searched.digest: "the searched network"}
    for label, arch in request.baselines:
        request.space.validate(arch, where=f"--baseline {label}")
        if arch.digest in seen:
            raise NasError(f"--baseline {label} is the same network as {seen[arch.digest]} (digest {arch.digest})")
        seen[arch.digest] = f"--baseline {label}"
    if request.seeds < 1:
        raise NasError(f"--seeds must be at least 1, got {request.seeds}")
    if not 0 < request.tolerance < 1:
        raise NasError(f"--tolerance must be between 0 and 1, got {request.tolerance}")
    if request.target is not None and not request.target > 0:
        raise NasError(f"--target must be positive, got {request.target:g}")
    for source in request.reuse_trainings:
        if not (Path(source) / "plan.json").is_file():
            raise NasError(f"--reuse-trainings {source}: not a comparison folder (no plan.json)")


def prepare(request: CompareRequest, folder: RunFolder | None = None) -> PreparedComparison:
    """Read and check the data, the supernet run and the table; the comparison's config."""
    space = request.space
    num_classes, fingerprint = read_data_identity(request.data, request.recipe, request.seed)
    supernet_spec, supernet_context, supernet_size = None, {}, None
    if request.supernet:
        supernet = SupernetRun.read(request.supernet)
        if supernet.space.name != space.name:
            raise NasError(
                f"supernet {request.supernet} is of space {supernet.space.name}, "
                f"not {space.name}; pass its space's arch or --supernet none"
            )
        supernet_spec = supernet.eval_spec(request.bn_calib_batches)
        supernet_context, supernet_size = supernet_spec.context(), supernet.img_size
    # Priced at the supernet's training size (as its search priced), else at the size the networks train at;
    # a resumed comparison keeps the size it recorded.
    trained_here = request.recipe.img_size
    img_size, table, cost = price_networks(  # cost: the budget
        (folder or RunFolder(request.out, COMPARISON)).recorded_setting("img_size", request.resume),
        request.img_size,
        supernet_size or trained_here,
        trained_here,
        request.device,
        space,
        num_classes,
        "the comparison",
    )
    if request.target is not None:
        budget = Objective(request.objective, request.target)
        own = budget.value(cost(request.searched))
        if not budget.met(cost(request.searched)):
            raise NasError(
                f"--target {request.target:g}: the searched network has {budget.name} {own:.4g}, which does not "
                f"meet it ({'at least' if budget.higher_is_better else 'at most'} the target); leave --target out "
                "to compare at the searched network's own budget"
            )
    reused, reused_digest = reused_networks(request.random_from, space) if request.random_from else (None, None)
    n_random = request.n_random if request.n_random is not None else (len(reused) if reused else 5)
    if reused is not None and n_random > len(reused):
        raise NasError(
            f"--random {n_random}, but --random-from {request.random_from} holds {len(reused)} random networks; "
            "leave --random out to reuse them all"
        )
    config = CompareRunConfig(
        searched=request.searched.to_dict(),
        searched_digest=request.searched.digest,
        space=space.name,
        random=n_random,
        objective=request.objective,
        tolerance=request.tolerance,
        **trainings_recorded(request, img_size, fingerprint, table),
        supernet=request.supernet,
        supernet_digest=supernet_context.get("supernet_digest"),
        bn_calib_batches=supernet_context.get("bn_calib_batches"),
        seeds=request.seeds,
        random_from=str(request.random_from) if request.random_from else None,
        random_from_digest=reused_digest,
        target=request.target,
        baselines=tuple(arch.digest for _, arch in request.baselines),
    )
    return PreparedComparison(config, num_classes, table, cost, supernet_spec, supernet_context, reused)


def _train_and_report(
    request: CompareRequest,
    prepared: PreparedComparison,
    folder: RunFolder,
    objective: Objective,
    networks: list[tuple[str, ArchConfig]],
    draws: dict,
) -> dict[str, Any]:
    """Train every network with every seed, score them with the supernet, write the tables and plot."""
    config, out = prepared.config, folder.path
    clock = folder.clock(request.resume)
    seeds = [config.seed + k for k in range(config.seeds)]
    jobs = seeded_jobs(networks, seeds, request, out / "runs", config.data, config.max_steps)
    if "random_from" in draws:
        reused = adopt_trainings(Path(draws["random_from"]["path"]), config, jobs)
        draws = {**draws, "random_from": {**draws["random_from"], "trainings_reused": reused}}
    for source in request.reuse_trainings:
        adopt_trainings(Path(source), config, jobs)
    trained = train_all(jobs, request.pool, clock)
    supernet_top1 = (
        supernet_accuracies(prepared.supernet_spec, prepared.supernet_context, [a for _, a in networks], out)
        if prepared.supernet_spec
        else [None] * len(networks)
    )
    rows = _rows(networks, trained, supernet_top1, len(seeds), prepared, config.img_size)
    for row in rows:
        if row["kind"] == "baseline":  # compared at equal cost only inside the band
            row["in_band"] = objective.in_band(prepared.cost(ArchConfig.from_dict(row["arch"])), config.tolerance)
            row["band"] = list(objective.band(config.tolerance))
    result = {
        "objective": {"name": objective.name, "target": objective.target},
        **({"target_given": True} if config.target is not None else {}),
        "space": request.space.name,
        "searched": request.searched_label,
        "rows": rows,
        "draws": draws,
        "sources": sources_words(
            config, objective, request.space, prepared.table, request.recipe, trained, prepared.num_classes, draws
        ),
        "summary": comparison_summary(rows, with_supernet=bool(config.supernet)),
        "provenance": {
            **clock.summary(),
            "network_wall_seconds": round(sum(r.get("provenance", {}).get("wall_seconds", 0.0) for r in trained), 1),
        },
    }
    write_text_atomic(out / "compare.csv", to_csv(rows))
    write_text_atomic(out / "compare.md", to_markdown(result))
    plot(rows, prepared.table is not None, out / "compare.png", objective, result["summary"].get("frontier"))
    folder.write_result(result)
    return result


def comparison_summary(rows: list[dict], with_supernet: bool) -> dict[str, Any]:
    """A comparison's ``summary`` from its rows alone: what :func:`compare` writes and :func:`rejudge`
    recomputes, so a finished comparison can be judged again by the current statistics. The searched network
    against the random ones (and their frontier), and against each named baseline (``vs_baselines``)."""
    searched = rows[0]
    randoms = [r for r in rows[1:] if r.get("kind", "random") == "random"]
    if randoms:
        summary = {
            **searched_vs_random([searched, *randoms], with_supernet=with_supernet),
            "frontier": random_frontier([searched, *randoms]),
        }
    else:  # --random 0: only named baselines
        summary = {
            "searched_top1": searched["top1"],
            "networks": len(rows),
            "seeds": len(searched["top1_seeds"]),
            "pooled_seed_std": pooled_std([r["top1_seeds"] for r in rows]),
        }
    baselines = [r for r in rows[1:] if r.get("kind") == "baseline"]
    if baselines:
        summary["vs_baselines"] = searched_vs_baselines(searched, baselines)
    return summary


def rejudge(out: str | Path) -> dict[str, Any]:
    """Judge a finished comparison in ``out`` again from its committed rows (the per-seed accuracies),
    without training: its ``result.json`` summary, ``compare.md`` and ``compare.png`` (with the random frontier)
    are rewritten with :func:`comparison_summary`; the rows, sources, provenance and CSV stay as they are."""
    out = Path(out)
    path, result = read_finished_result(out, "comparison")
    try:
        rows = result["rows"]
        plan = out / "plan.json"
        supernet = (
            bool(json.loads(plan.read_text(encoding="utf-8"))["config"].get("supernet"))
            if plan.is_file()
            else all(r.get("supernet_top1") is not None for r in rows)
        )
        result["summary"] = comparison_summary(rows, with_supernet=supernet)
        objective = Objective(result["objective"]["name"], result["objective"]["target"])
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise NasError(f"{path} is not a comparison's result: {exc}") from None
    write_json(path, result)
    write_text_atomic(out / "compare.md", to_markdown(result))
    with_latency = all(r.get("latency_ms") is not None for r in rows)
    plot(rows, with_latency, out / "compare.png", objective, result["summary"].get("frontier"))
    return result


def stale(out: str | Path) -> bool:
    """Whether a finished comparison's recorded ``summary`` differs from what the current statistics give from
    its rows (:func:`comparison_summary`): True means :func:`rejudge` would change it."""
    out = Path(out)
    path, result = read_finished_result(out, "comparison")
    try:
        plan = out / "plan.json"
        supernet = (
            bool(json.loads(plan.read_text(encoding="utf-8"))["config"].get("supernet"))
            if plan.is_file()
            else all(r.get("supernet_top1") is not None for r in result["rows"])
        )
        fresh = comparison_summary(result["rows"], with_supernet=supernet)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise NasError(f"{path} is not a comparison's result: {exc}") from None
    return json.dumps(result.get("summary")) != json.dumps(fresh)


def _rows(
    networks, trained: list[dict], supernet_top1: list, n_seeds: int, prepared: PreparedComparison, img_size: int
) -> list[dict]:
    """One row per network: its seeds' top-1 (mean, std, each), supernet top-1 and costs."""
    cost, table, num_classes = prepared.cost, prepared.table, prepared.num_classes
    rows = []
    for i, ((name, arch), supernet_acc) in enumerate(zip(networks, supernet_top1)):
        results = trained[i * n_seeds : (i + 1) * n_seeds]
        top1s = [r["top1"] for r in results]
        emas = [r["top1_ema"] for r in results if r.get("top1_ema") is not None]
        c = cost(arch)
        bounds = table.interval(c.latency_ms) if table is not None and c.latency_ms is not None else None
        rows.append(
            {
                "network": name,
                "kind": network_kind(name),
                "top1": mean_std(top1s)[0],
                "top1_std": mean_std(top1s)[1],
                "top1_seeds": top1s,
                "top1_ema": mean_std(emas)[0] if emas else None,
                "supernet_top1": supernet_acc,
                "params": c.params,
                "macs": count_macs(arch, img_size, num_classes),
                "latency_ms": c.latency_ms,
                "latency_interval_ms": list(bounds) if bounds is not None else None,
                "mes": c.mes,
                "digest": arch.digest,
                "arch": arch.to_dict(),
            }
        )
    return rows
