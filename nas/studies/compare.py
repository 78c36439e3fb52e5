"""Searched network against random sub-networks of the same budget, all trained from scratch.

The papers' evidence that search matters (EfficientFormer tab. 5, EfficientFormerV2 §5.3) is
that the searched network beats random sub-networks that meet the same budget when every network
is trained from scratch with the same recipe. :func:`compare` makes that comparison: it draws the
random networks as ``nas sample`` does (uniform per choice, within ``tolerance`` of the searched
network's MES, latency or size, on the side that meets it) from a seed of their own
(:func:`draw_seed`: the searched network and ``--seed``), or reuses another comparison's
(``random_from``), trains each one with
:class:`nas.train.fixed.FixedTrainer` (same recipe, same seed, so the same data order and
augmentation), in this process or as Ray tasks, and writes a Markdown and CSV table and a plot.

Everything lives in one output folder: ``plan.json`` (the networks, fixed before any training,
so ``--resume`` trains the same ones), ``archs/*.yaml``, ``runs/<name>/`` (one ``nas train`` run
each, resumable), ``compare.md``, ``compare.csv``, ``compare.png`` and ``result.json``.

Equal MES is not equal cost, so every comparison also fits the random networks' accuracy against
ln(MACs) and predicted latency (:func:`nas.stats.random_frontier`) and says how far above or below
those lines the searched network lies, and where each network sits on cost.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import write_text_atomic
from nas.data import load_splits
from nas.latency import LatencyTable
from nas.metrics import count_macs
from nas.recipe import Recipe, recipe_from_saved
from nas.runs.checkpoint import file_digest, load_checkpoint
from nas.runs.config import CompareRunConfig
from nas.runs.folder import COMPARISON, PLAN, RunFolder
from nas.runs.writers import csv_text, pyplot, save_figure, write_json
from nas.search.evaluator import SUPERNET_KEYS, EvalSpec
from nas.search.objective import Objective, require_table
from nas.search.resolution import resolution_words
from nas.search.sample import sample_within_budget, within_budget
from nas.space_files import load_space
from nas.stats import mean_std, random_frontier, searched_vs_random
from nas.studies.jobs import (
    price_networks,
    seed_run_name,
    supernet_accuracies,
    train_all,
    train_images_words,
    training_job,
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
    tolerance: float = 0.05  # relative budget band
    device: str | None = None  # latency table device (needed for mes and latency)
    img_size: int | None = None  # input size cost is priced at (None: the supernet's training size, else the recipe's)
    supernet: str | None = None  # also score every network with this supernet run's weights
    bn_calib_batches: int | None = None  # the supernet scores' BatchNorm calibration (None: its recipe's)
    workers: int = 0  # Ray workers (0: train in this process)
    ray_address: str | None = None  # join an existing Ray cluster
    threads_per_worker: int = 1
    resume: bool = False
    max_steps: int | None = None  # stop every training after this many steps (smoke runs)
    recipe_name: str = ""  # how the user named the recipe (for the sources)
    searched_label: str = ""  # how the user named the searched arch
    progress: bool = True
    random_from: str | Path | None = None  # reuse this comparison's random networks instead of drawing them


@dataclass(frozen=True)
class _Prepared:
    """Everything checked and built before the comparison's folder is touched."""

    config: CompareRunConfig
    num_classes: int
    table: LatencyTable | None
    cost: Any
    supernet_spec: EvalSpec | None
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
    prepared = _prepare(request)
    folder = RunFolder(request.out, COMPARISON)
    saved = folder.check(prepared.config, request.resume)
    if saved is not None:
        objective, networks, draws = _saved_plan(folder, saved)
    else:
        objective, networks, draws = _plan(request, prepared)
    plan = {
        "objective": {"name": objective.name, "target": objective.target},
        "networks": [{"name": n, "arch": a.to_dict(), "digest": a.digest} for n, a in networks],
        **{k: v for k, v in draws.items() if k in ("draw_seed", "random_from")},
    }
    with folder.start(prepared.config, request.resume, plan):
        for name, arch in networks:  # written again on resume: a run killed before it wrote them has them
            arch.save(folder.path / "archs" / f"{name}.yaml")
        return _train_and_report(request, prepared, folder, objective, networks, draws)


def draw_seed(searched_digest: str, seed: int) -> int:
    """The seed a comparison draws its random networks from: a stable hash (SHA-256) of the searched
    network's digest and ``--seed``. Comparisons of different searched networks, or with different seeds,
    draw independent random networks; the same comparison run again draws the same ones."""
    return int.from_bytes(hashlib.sha256(f"{searched_digest}:{seed}".encode()).digest()[:4], "big")


def draw_groups(randoms: dict[str, Iterable[str]]) -> list[list[str]]:
    """Comparisons (name -> the digests of their random networks) grouped by shared draws: two comparisons
    that share any random network are in one group, and so are the comparisons linked through them. The
    groups, not the comparisons, are independent results; each group's names in the given order, the groups
    in the order of their first name."""
    names = list(randoms)
    parent = {name: name for name in names}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    owner: dict[str, str] = {}
    for name in names:
        for digest in randoms[name]:
            if digest in owner:
                a, b = sorted((root(owner[digest]), root(name)), key=names.index)
                parent[b] = a
            else:
                owner[digest] = name
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(root(name), []).append(name)
    return list(groups.values())


def _check_request(request: CompareRequest) -> None:
    """The settings alone, before anything is read."""
    request.space.validate(request.searched, where=request.searched_label or "searched arch")
    Objective(request.objective, 1.0)  # an unknown objective fails before anything else
    require_table(request.objective, request.device)
    if request.n_random is not None and request.n_random < 1:
        raise NasError(f"--random must be at least 1, got {request.n_random}")
    if request.seeds < 1:
        raise NasError(f"--seeds must be at least 1, got {request.seeds}")
    if not 0 < request.tolerance < 1:
        raise NasError(f"--tolerance must be between 0 and 1, got {request.tolerance}")


def _prepare(request: CompareRequest) -> _Prepared:
    """Read and check the data, the supernet run and the table; the comparison's config."""
    space = request.space
    splits = load_splits(request.data, request.recipe, request.seed, hold_out_search=False)  # bad data fails here
    num_classes, fingerprint = splits.num_classes, splits.fingerprint
    del splits
    supernet_spec, supernet_context, supernet_size = None, {}, None
    if request.supernet:
        supernet_spec = EvalSpec.from_run(request.supernet, request.bn_calib_batches)
        if load_space(supernet_spec.space).name != space.name:
            raise NasError(
                f"supernet {request.supernet} is of space {load_space(supernet_spec.space).name}, "
                f"not {space.name}; pass its space's arch or --supernet none"
            )
        checkpoint = load_checkpoint(supernet_spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS, mmap=True)
        supernet_context, supernet_size = supernet_spec.context(), int(checkpoint["img_size"])
    # Priced at the supernet's training size (as its search priced), else at the size the networks train at;
    # a resumed comparison keeps the size it recorded.
    trained_here = request.recipe.img_size
    img_size, table, cost = price_networks(  # cost: the budget
        RunFolder(request.out, COMPARISON),
        request.resume,
        request.img_size,
        supernet_size or trained_here,
        trained_here,
        request.device,
        space,
        num_classes,
        "the comparison",
    )
    reused, reused_digest = _reused_networks(request.random_from, space) if request.random_from else (None, None)
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
        device=request.device,
        img_size=img_size,
        data=request.data,
        seed=request.seed,
        recipe=request.recipe,
        recipe_name=request.recipe_name,
        max_steps=request.max_steps,
        data_fingerprint=fingerprint,
        table_digest=file_digest(table.path) if table is not None else None,
        supernet=request.supernet,
        supernet_digest=supernet_context.get("supernet_digest"),
        bn_calib_batches=supernet_context.get("bn_calib_batches"),
        seeds=request.seeds,
        random_from=str(request.random_from) if request.random_from else None,
        random_from_digest=reused_digest,
    )
    return _Prepared(config, num_classes, table, cost, supernet_spec, supernet_context, reused)


def _reused_networks(path: str | Path, space: SearchSpace) -> tuple[list[tuple[str, ArchConfig]], str]:
    """The random networks of the comparison in ``path`` (``--random-from``), with its plan's digest."""
    plan_path = Path(path) / PLAN
    if not plan_path.is_file():
        raise NasError(f"--random-from {path}: not a comparison folder (no {PLAN})")
    try:
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
        other_space = plan["config"]["space"]
        entries = [(n["name"], n["arch"]) for n in plan["networks"] if n["name"] != "searched"]
    except (ValueError, KeyError, TypeError) as exc:
        raise NasError(f"{plan_path}: corrupt comparison plan ({type(exc).__name__}: {exc})") from None
    if other_space != space.name:
        raise NasError(f"--random-from {path}: its networks are of space {other_space}, not {space.name}")
    if not entries:
        raise NasError(f"--random-from {path}: its plan holds no random networks")
    networks = []
    for name, arch in entries:
        try:
            networks.append((name, ArchConfig.from_dict(arch)))
        except (ValueError, KeyError, TypeError) as exc:
            raise NasError(f"{plan_path}: corrupt comparison plan ({name}: {exc})") from None
        space.validate(networks[-1][1], where=f"{plan_path} {name}")
    return networks, file_digest(plan_path)


def _plan(request: CompareRequest, prepared: _Prepared) -> tuple[Objective, list[tuple[str, ArchConfig]], dict]:
    """The budget (the searched network's own), the networks (the searched one, then the random ones) and
    how the random ones were chosen: drawn from :func:`draw_seed`, or reused from ``random_from`` after
    checking that each meets this budget."""
    searched, cost, config = request.searched, prepared.cost, prepared.config
    target = Objective(request.objective, 1.0).value(cost(searched))
    objective = Objective(request.objective, target)
    if prepared.reused is not None:
        randoms = [arch for _, arch in prepared.reused[: config.random]]
        for name, arch in prepared.reused[: config.random]:
            _require_in_band(request.random_from, name, arch, searched, objective, cost, config.tolerance)
        draws = {"random_from": {"path": config.random_from, "plan_digest": config.random_from_digest}}
    else:
        seed = draw_seed(searched.digest, config.seed)
        randoms = sample_within_budget(
            request.space,
            config.random,
            objective,
            cost,
            random.Random(seed),
            config.tolerance,
            exclude={searched.digest},
        )
        draws = {"draw_seed": seed}
    return objective, [("searched", searched)] + [(f"random-{i}", a) for i, a in enumerate(randoms)], draws


def _require_in_band(source, name: str, arch: ArchConfig, searched: ArchConfig, objective: Objective, cost, tolerance):
    """Refuse a reused random network that is the searched one or outside this searched network's band."""
    if arch.digest == searched.digest:
        raise NasError(f"--random-from {source}: its {name} is the searched network itself")
    value = objective.value(cost(arch))
    if not within_budget(objective, value, tolerance):
        t = objective.target
        low, high = (t, t * (1 + tolerance)) if objective.higher_is_better else (t * (1 - tolerance), t)
        raise NasError(
            f"--random-from {source}: its {name} has {objective.name} {value:.4g}, outside this searched "
            f"network's band {low:.4g} to {high:.4g} ({100 * tolerance:g}% of {t:.4g} on the side that meets it)"
        )


def _saved_plan(folder: RunFolder, saved: dict) -> tuple[Objective, list[tuple[str, ArchConfig]], dict]:
    """The budget, networks and draws of the plan a resumed comparison recorded (a plan from before draws
    depended on the searched network has no ``draw_seed``: its networks were drawn from ``--seed`` alone)."""
    try:
        objective = Objective(saved["objective"]["name"], saved["objective"]["target"])
        networks = [(n["name"], ArchConfig.from_dict(n["arch"])) for n in saved["networks"]]
        if "random_from" in saved:
            draws = {"random_from": saved["random_from"]}
        elif "draw_seed" in saved:
            draws = {"draw_seed": int(saved["draw_seed"])}
        else:
            draws = {"draw_seed": int(saved["config"]["seed"]), "seed_only": True}
        return objective, networks, draws
    except (ValueError, KeyError, TypeError) as exc:
        raise folder.corrupt(exc) from None


def _train_and_report(
    request: CompareRequest,
    prepared: _Prepared,
    folder: RunFolder,
    objective: Objective,
    networks: list[tuple[str, ArchConfig]],
    draws: dict,
) -> dict[str, Any]:
    """Train every network with every seed, score them with the supernet, write the tables and plot."""
    config, out = prepared.config, folder.path
    clock = folder.clock(request.resume)
    seeds = [config.seed + k for k in range(config.seeds)]
    jobs = [
        training_job(
            name,
            arch,
            request.recipe,
            config.data,
            out / "runs" / seed_run_name(name, k),
            s,
            config.max_steps,
            request.space.name,
            request.progress,
        )
        for name, arch in networks
        for k, s in enumerate(seeds)
    ]
    if "random_from" in draws:
        reused = adopt_trainings(Path(draws["random_from"]["path"]), config, jobs)
        draws = {**draws, "random_from": {**draws["random_from"], "trainings_reused": reused}}
    trained = train_all(jobs, request.workers, request.ray_address, request.threads_per_worker, clock)
    supernet_top1 = (
        supernet_accuracies(prepared.supernet_spec, prepared.supernet_context, [a for _, a in networks], out)
        if prepared.supernet_spec
        else [None] * len(networks)
    )
    rows = _rows(networks, trained, supernet_top1, len(seeds), prepared, config.img_size)
    result = {
        "objective": {"name": objective.name, "target": objective.target},
        "space": request.space.name,
        "searched": request.searched_label,
        "rows": rows,
        "draws": draws,
        "sources": _sources(
            config, objective, request.space, prepared.table, request.recipe, trained[0], prepared.num_classes, draws
        ),
        "summary": comparison_summary(rows, with_supernet=bool(config.supernet)),
        "provenance": {
            **clock.summary(),
            "network_wall_seconds": round(sum(r.get("provenance", {}).get("wall_seconds", 0.0) for r in trained), 1),
        },
    }
    write_text_atomic(out / "compare.csv", to_csv(rows))
    write_text_atomic(out / "compare.md", to_markdown(result))
    _plot(rows, prepared.table is not None, out / "compare.png", objective, result["summary"]["frontier"])
    folder.write_result(result)
    return result


#: Written into a training run copied from ``--random-from``'s folder: where it came from.
REUSED_FROM = "reused_from.json"


def adopt_trainings(source: Path, config: CompareRunConfig, jobs: list[dict[str, Any]]) -> int:
    """Copy into this comparison the finished trainings of ``source`` (a comparison or a ``nas headroom``
    pilot, ``--random-from``) that it would repeat: the same network, recipe, data (fingerprint), step
    limit and seed. Returns how many of this comparison's trainings came from there (copied now or on an
    earlier run of it). A training is deterministic given those, so a copy is the training itself."""
    try:
        plan = json.loads((source / PLAN).read_text(encoding="utf-8"))
        other = plan["config"]
        same_training = (
            recipe_from_saved(other["recipe"]) == config.recipe
            and other.get("data") == config.data
            and other.get("data_fingerprint") == config.data_fingerprint
            and other.get("max_steps") == config.max_steps
        )
        runs = {}  # (digest, seed) -> that training's run folder in source
        for network in plan["networks"]:
            for k in range(int(other.get("seeds", 1))):
                runs[(network["digest"], int(other["seed"]) + k)] = source / "runs" / seed_run_name(network["name"], k)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NasError(f"{source / PLAN}: corrupt plan ({type(exc).__name__}: {exc})") from None
    reused = 0
    for job in jobs:
        run = Path(job["run"])
        if (run / REUSED_FROM).exists():
            reused += 1
            continue
        origin = runs.get((ArchConfig.from_dict(job["arch"]).digest, job["seed"])) if same_training else None
        if origin is None or run.exists() or not RunFolder(origin).finished:
            continue
        shutil.copytree(origin, run, ignore=shutil.ignore_patterns(".lock"))
        write_json(run / REUSED_FROM, {"path": str(origin)})
        reused += 1
    return reused


def comparison_summary(rows: list[dict], with_supernet: bool) -> dict[str, Any]:
    """A comparison's ``summary`` from its rows alone: what :func:`compare` writes and :func:`rejudge`
    recomputes, so a finished comparison can be judged again by the current statistics."""
    return {**searched_vs_random(rows, with_supernet=with_supernet), "frontier": random_frontier(rows)}


def rejudge(out: str | Path) -> dict[str, Any]:
    """Judge a finished comparison in ``out`` again from its committed rows (the per-seed accuracies),
    without training: its ``result.json`` summary, ``compare.md`` and ``compare.png`` (with the random frontier)
    are rewritten with :func:`comparison_summary`; the rows, sources, provenance and CSV stay as they are."""
    out = Path(out)
    path = out / "result.json"
    if not path.is_file():
        raise NasError(f"{out} holds no finished comparison (no result.json)")
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
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
    _plot(rows, with_latency, out / "compare.png", objective, result["summary"]["frontier"])
    return result


def stale(out: str | Path) -> bool:
    """Whether a finished comparison's recorded ``summary`` differs from what the current statistics give from
    its rows (:func:`comparison_summary`): True means :func:`rejudge` would change it."""
    out = Path(out)
    try:
        result = json.loads((out / "result.json").read_text(encoding="utf-8"))
        plan = out / "plan.json"
        supernet = (
            bool(json.loads(plan.read_text(encoding="utf-8"))["config"].get("supernet"))
            if plan.is_file()
            else all(r.get("supernet_top1") is not None for r in result["rows"])
        )
        fresh = comparison_summary(result["rows"], with_supernet=supernet)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise NasError(f"{out} holds no comparison's result: {exc}") from None
    return json.dumps(result.get("summary")) != json.dumps(fresh)


def _rows(
    networks, trained: list[dict], supernet_top1: list, n_seeds: int, prepared: _Prepared, img_size: int
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
                "kind": "searched" if name == "searched" else "random",
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


def _sources(
    config: CompareRunConfig,
    objective: Objective,
    space,
    table,
    recipe: Recipe,
    first: dict,
    num_classes: int,
    draws: dict,
) -> dict[str, str]:
    """Where each column's numbers come from, in words."""
    seeds = [config.seed + k for k in range(config.seeds)]
    sources = {
        "accuracy": f"top-1 on {first['val']} ({first['val_images']} images) after training from scratch for "
        f"{first['step']} steps ({recipe.epochs} epochs planned) on {train_images_words(first, recipe)} with recipe "
        f"{config.recipe_name or 'custom'}, seed{'s' if len(seeds) > 1 else ''} "
        f"{', '.join(map(str, seeds))} per network (mean and standard deviation over seeds), input "
        f"{recipe.img_size}x{recipe.img_size}; data: {config.data or 'scikit-learn digits'}",
        "cost": f"params and MACs exact (counted), at {config.img_size}x{config.img_size} with a {num_classes}-class "
        "head",
        "resolution": resolution_words(config.img_size, recipe.img_size),
        "latency": table.describe_source() if table is not None else "no latency table (no --device)",
        "sampling": f"random sub-networks of {space.name}, uniform per choice, within {100 * config.tolerance:g}% of "
        f"the searched network's {objective.name} {objective.target:.4g} on the side that meets it; "
        + _draws_words(draws),
        "frontier": "least squares of the random networks' mean top-1 against ln(MACs) and against predicted "
        "latency; the searched network's residual has a t-interval (k - 2 degrees of freedom) of the line at its "
        "cost plus its own seed noise",
    }
    if config.supernet:
        sources["supernet accuracy"] = (
            f"top-1 of the sub-network with the weights of supernet {config.supernet}, "
            "BatchNorm recalibrated, on that run's search split (what the search saw)"
        )
    return sources


def _draws_words(draws: dict) -> str:
    """How a comparison's random networks were chosen, in words."""
    if "random_from" in draws:
        source = draws["random_from"]
        reused = source.get("trainings_reused")
        return f"reused from {source['path']} (plan.json digest {source['plan_digest']}): not an independent draw" + (
            f"; {reused} trainings copied from there (same network, recipe, data and seed)" if reused else ""
        )
    if draws.get("seed_only"):
        return (
            f"drawn with --seed {draws['draw_seed']} alone (a comparison from before draws depended on the searched "
            "network: other comparisons in this space with this seed drew the same networks)"
        )
    return f"drawn with seed {draws['draw_seed']} (SHA-256 of the searched network's digest and --seed)"


CSV_FIELDS = (
    "network",
    "kind",
    "top1",
    "top1_std",
    "top1_ema",
    "supernet_top1",
    "params",
    "macs",
    "latency_ms",
    "latency_low_ms",
    "latency_high_ms",
    "mes",
    "digest",
    "top1_seeds",
)


def to_csv(rows: list[dict]) -> str:
    """The comparison rows as CSV (columns ``CSV_FIELDS``; the per-seed top-1 space-separated)."""
    return csv_text(
        [
            {
                **r,
                "top1_seeds": " ".join(f"{v:.6f}" for v in r.get("top1_seeds", [])),
                "latency_low_ms": (r.get("latency_interval_ms") or [None, None])[0],
                "latency_high_ms": (r.get("latency_interval_ms") or [None, None])[1],
            }
            for r in rows
        ],
        CSV_FIELDS,
    )


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table_lines(rows: list[dict]) -> list[str]:
    """The comparison as a Markdown table (also what the CLI prints)."""
    ema = any(r.get("top1_ema") is not None for r in rows)
    supernet = any(r.get("supernet_top1") is not None for r in rows)
    intervals = any(r.get("latency_interval_ms") for r in rows)
    head = (
        "| network | top-1 (%) |"
        + (" top-1 EMA (%) |" if ema else "")
        + (" supernet top-1 (%) |" if supernet else "")
        + f" params (M) | MACs (M) | latency (ms{', interval' if intervals else ''}) | MES | digest |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        name = f"**{r['network']}**" if r["kind"] == "searched" else r["network"]
        spread = f" ± {100 * r['top1_std']:.2f}" if len(r.get("top1_seeds", [])) > 1 else ""
        cells = [name, _fmt(100 * r["top1"], ".2f") + spread]
        if ema:
            cells.append(_fmt(None if r.get("top1_ema") is None else 100 * r["top1_ema"], ".2f"))
        if supernet:
            cells.append(_fmt(None if r.get("supernet_top1") is None else 100 * r["supernet_top1"], ".2f"))
        cells += [
            _fmt(r["params"] / 1e6, ".3f"),
            _fmt(r["macs"] / 1e6, ".1f"),
            _fmt(r["latency_ms"], ".3f")
            + (" ({:.3f}–{:.3f})".format(*r["latency_interval_ms"]) if r.get("latency_interval_ms") else ""),
            _fmt(r["mes"], ".1f"),
            f"`{r['digest']}`",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _p(p: float | None) -> str:
    """A p-value as the text shows it."""
    if p is None:
        return "p not estimable"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _margin_words(s: dict, key: str) -> str:
    """``+0.73 points (95% CI +0.10 to +1.36, one-sided p = 0.031)``, or why it is not estimable."""
    ci = s.get(f"{key}_ci")
    if ci is None:
        reason = s.get(f"{key}_reason") or "not estimable"
        return f"{100 * s[key]:+.2f} points ({reason})"
    level = int(round(100 * s["ci_level"]))
    return (
        f"{100 * s[key]:+.2f} points ({level}% CI {100 * ci[0]:+.2f} to {100 * ci[1]:+.2f}, one-sided "
        f"{_p(s.get(f'{key}_p'))})"
    )


def verdict_words(s: dict) -> str:
    """Whether the searched network beats every random network, with its p-value (Holm-adjusted)."""
    if "beats_every_random" not in s:  # a summary written before these statistics
        return "beats every random network: not judged (no p-values in this result)"
    if s["beats_every_random"] is None:
        return "beats every random network: not estimable (one seed per network or no seed variance)"
    alpha = s.get("alpha", 0.05)
    return (
        f"beats every random network: {'yes' if s['beats_every_random'] else 'no'} (largest Holm-adjusted "
        f"one-sided p {s['beats_every_random_p']:.3f}, alpha {alpha:g})"
    )


def summary_line(result: dict) -> str:
    """The comparison in one line: searched vs random top-1 and rank; over seeds, the margins with their
    intervals and p-values, the verdict on beating every random network with its p-value, and the
    supernet's Kendall's tau when there are."""
    s = result["summary"]
    line = (
        f"searched {100 * s['searched_top1']:.2f}% vs random {100 * s['random_top1_mean']:.2f}% "
        f"+- {100 * s['random_top1_std']:.2f}% (mean +- std of {s['networks'] - 1}; best "
        f"{100 * s['random_top1_best']:.2f}%): the searched network ranks {s['searched_rank']} of {s['networks']}"
    )
    if "margin_over_random_mean_ci" in s:
        best = s.get("best_random_network", "")
        line += (
            f"; over {s.get('seeds', 1)} seed(s) per network: margin over the random mean "
            f"{_margin_words(s, 'margin_over_random_mean')}, over the best random{' (' + best + ')' if best else ''} "
            f"{_margin_words(s, 'margin_over_best_random')}; {verdict_words(s)}; higher mean than "
            f"{s['random_beaten']} of {s['networks'] - 1} random networks; pooled seed std "
            f"{100 * s['pooled_seed_std']:.2f} points"
        )
    if s.get("band_spread_over_seed_noise") is not None:
        line += (
            f"; the random networks spread by {100 * s['random_top1_std']:.2f} points (std), "
            f"{s['band_spread_over_seed_noise']:.1f}x the seed noise: to beat the best of {s['networks'] - 1} by "
            f"more than the seed noise, a network must sit about {100 * s['margin_needed_over_random_mean']:.2f} "
            f"points above the random mean (the searched one: {100 * s['margin_over_random_mean']:+.2f})"
        )
    if "kendall_tau_supernet_vs_scratch" in s:
        tau = s["kendall_tau_supernet_vs_scratch"]
        line += f"; Kendall's tau, supernet vs from-scratch ranking: {'-' if tau is None else format(tau, '.2f')}"
    return line


def welch_lines(summary: dict) -> list[str]:
    """The searched network against each random network as a Markdown table: the Welch interval of the
    difference and its one-sided p-value, raw and Holm-adjusted ([] for a summary without them)."""
    if not summary.get("vs_random"):
        return []
    level = int(round(100 * summary["ci_level"]))
    lines = [
        f"| searched minus | difference (points) | {level}% CI (Welch) | one-sided p | Holm-adjusted p |",
        "|---|---|---|---|---|",
    ]
    for row in summary["vs_random"]:
        ci = row["ci"]
        lines.append(
            f"| {row['network']} | {100 * row['estimate']:+.2f} | "
            + (row["reason"] if ci is None else f"{100 * ci[0]:+.2f} to {100 * ci[1]:+.2f}")
            + f" | {'-' if row['p'] is None else format(row['p'], '.3f')} | "
            f"{'-' if row['p_holm'] is None else format(row['p_holm'], '.3f')} |"
        )
    return lines


def to_markdown(result: dict) -> str:
    """``compare.md``: the budget, the table, the tests against each random network, the summary line
    with the verdict and where the numbers come from."""
    objective = result["objective"]
    s = result["summary"]
    tests = welch_lines(s)
    lines = [
        f"# Searched vs random sub-networks of {result['space']}",
        "",
        f"Budget: {objective['name']} {objective['target']:.4g} (the searched network's own, "
        f"{result['searched'] or 'searched arch'}).",
        "",
        *table_lines(result["rows"]),
        "",
        *([*tests, ""] if tests else []),
        summary_line(result) + ".",
        "",
        *frontier_lines(result),
        "Where the numbers come from:",
        "",
    ]
    lines += [f"- {key}: {text}" for key, text in result["sources"].items()]
    if s.get("intervals"):
        lines.append(f"- intervals and tests: {s['intervals']}")
    return "\n".join(lines) + "\n"


#: The costs of compare.md's cost table: row key -> (column, what it is, the most and the least of it, format, scale).
_COSTS = {
    "macs": ("MACs (M)", "MACs", ("the most", "the fewest"), ".1f", 1e-6),
    "latency_ms": ("latency (ms)", "predicted latency", ("the highest", "the lowest"), ".3f", 1.0),
}


def _rank_words(rank: int, n: int, key: str) -> str:
    _, what, (most, least), _, _ = _COSTS[key]
    if rank == 1:
        return f"{most} {what} of the {n}"
    if rank == n:
        return f"{least} {what} of the {n}"
    return f"rank {rank} of {n} by {what} (1: {most})"


def _cost_rank(rows: list[dict], i: int, key: str) -> int:
    """Rank of network ``i`` by cost ``key`` among ``rows`` (1: the most costly; ties share the better rank)."""
    return 1 + sum(r[key] > rows[i][key] for r in rows)


def _frontier_words(name: str, fit: dict) -> str:
    what = "ln(MACs)" if name == "log_macs" else "predicted latency"
    if not fit.get("estimable"):
        return f"- against {what}: not estimable ({fit.get('reason', 'no fit')})"
    level = int(round(100 * fit["ci_level"]))
    if name == "log_macs":  # points per doubling reads better than per unit of ln(MACs)
        per, scale = "per doubling of MACs", 100 * math.log(2)
    else:
        per, scale = "per ms", 100.0
    lo, hi = fit["residual_ci"]
    slo, shi = fit["slope_ci"]
    side = "above" if fit["residual"] >= 0 else "below"
    notes = ""
    if not fit.get("seed_noise_included"):
        notes += "; the searched network's seed noise is not included: one seed"
    if fit.get("extrapolated"):
        notes += "; extrapolated: its cost lies outside the random networks' range"
    return (
        f"- against {what}: the random networks' top-1 changes by {scale * fit['slope']:+.2f} points {per} "
        f"({level}% CI {scale * slo:+.2f} to {scale * shi:+.2f}); the searched network lies "
        f"{100 * abs(fit['residual']):.2f} points {side} that line at its cost ({level}% CI {100 * lo:+.2f} to "
        f"{100 * hi:+.2f}, t with {fit['dof']} dof; one-sided p = {fit['p_above']:.3f} for lying above it{notes})"
    )


def frontier_lines(result: dict) -> list[str]:
    """compare.md's frontier section: every network's MACs, latency and MES with its top-1 (most MACs
    first), where the searched network sits on each cost, and how far above or below the random networks'
    fitted accuracy-cost lines (:func:`nas.stats.random_frontier`) it lies. Empty for a result without them."""
    rows, frontier = result["rows"], result.get("summary", {}).get("frontier")
    if frontier is None:
        return []
    n = len(rows)
    costs = [k for k in _COSTS if all(r.get(k) is not None for r in rows)]
    head = (
        "| network | top-1 (%) | "
        + "".join(f"{_COSTS[k][0]} | rank | " for k in costs)
        + "MES | "
        + "".join(f"{_COSTS[k][1]} / searched's | " for k in costs)
    ).rstrip()
    lines = ["## Where each network sits on cost", "", head, "|" + "---|" * (head.count("|") - 1)]
    for i in sorted(range(n), key=lambda i: -(rows[i].get("macs") or 0)):
        r = rows[i]
        cells = [f"**{r['network']}**" if r["kind"] == "searched" else r["network"], _fmt(100 * r["top1"], ".2f")]
        for k in costs:
            cells += [_fmt(r[k] * _COSTS[k][4], _COSTS[k][3]), str(_cost_rank(rows, i, k))]
        cells.append(_fmt(r.get("mes"), ".1f"))
        cells += [f"{r[k] / rows[0][k]:.3f}x" if rows[0][k] else "-" for k in costs]
        lines.append("| " + " | ".join(cells) + " |")
    where = [_rank_words(_cost_rank(rows, 0, k), n, k) for k in costs]
    lines += [
        "",
        (f"The searched network has {' and '.join(where)}." if where else ""),
        "",
        f"The random frontier, the {n - 1} random networks' mean top-1 fitted by least squares against each cost:",
        "",
    ]
    lines += [_frontier_words(name, fit) for name, fit in frontier.items()]
    return lines + [""]


def _frontier_panel(ax, rows: list[dict], fit: dict) -> None:
    """Top-1 against MACs with the random networks' line (fitted against ln MACs), when there is one."""
    for r in rows:
        searched = r["kind"] == "searched"
        ax.scatter(
            r["macs"] / 1e6,
            100 * r["top1"],
            marker="*" if searched else "o",
            s=160 if searched else 40,
            color="tab:red" if searched else "tab:blue",
            zorder=3,
        )
    if fit.get("estimable"):
        line = lambda m: 100 * (fit["intercept"] + fit["slope"] * np.log(m))  # noqa: E731
        randoms = [r["macs"] for r in rows[1:]]
        inside = np.geomspace(min(randoms), max(randoms), 50)
        ax.plot(
            inside / 1e6, line(inside), color="tab:blue", alpha=0.6, label="random frontier (least squares on ln MACs)"
        )
        every = np.geomspace(min(r["macs"] for r in rows), max(r["macs"] for r in rows), 50)
        ax.plot(every / 1e6, line(every), color="tab:blue", alpha=0.4, linestyle="--")  # extrapolated part too
        ax.annotate(
            f"{100 * fit['residual']:+.2f} points above the line",
            (rows[0]["macs"] / 1e6, 100 * rows[0]["top1"]),
            textcoords="offset points",
            xytext=(-10, -3),
            fontsize=7,
            ha="right",
            va="center",
        )
        ax.legend(loc="best", fontsize=7)
    ax.set_xlabel("MACs (M)")
    ax.set_ylabel("top-1 (%)")
    ax.set_title("top-1 against MACs")
    ax.grid(alpha=0.3)


def _plot(rows: list[dict], with_latency: bool, path: Path, objective: Objective, frontier: dict | None = None) -> None:
    plt = pyplot()
    key, label = (
        ("latency_ms", "latency (ms, see compare.md for its source)") if with_latency else ("params", "parameters")
    )
    fig, (ax, mac_ax) = plt.subplots(1, 2, figsize=(11, 4))
    _frontier_panel(mac_ax, rows, (frontier or {}).get("log_macs", {}))
    for r in rows:
        searched = r["kind"] == "searched"
        x = r[key] / (1 if with_latency else 1e6)
        ax.errorbar(
            x, 100 * r["top1"], yerr=100 * r.get("top1_std", 0.0), fmt="none", ecolor="gray", capsize=3, zorder=2
        )
        ax.scatter(
            x,
            100 * r["top1"],
            marker="*" if searched else "o",
            s=160 if searched else 40,
            color="tab:red" if searched else "tab:blue",
            zorder=3,
            label="searched" if searched else None,
        )
        ax.annotate(r["network"], (x, 100 * r["top1"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel(label if with_latency else "parameters (M)")
    ax.set_ylabel("top-1 (%), from scratch, mean ± std over seeds")
    ax.set_title(f"searched vs random at {objective.name} {objective.target:.4g}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    save_figure(fig, path)
