"""Training many networks from scratch, and scoring them with supernet weights: what the studies share.

A job is one network trained from scratch with one seed: ``nas train``'s request, which Ray pickles
to a worker. It has its own ``nas train`` run folder, skipped when finished and resumed when
interrupted, so a study that is run again (or a Ray task that is retried) continues where it stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.config.recipe import LOADER_WORKERS_AUTO, Recipe
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.data import load_splits
from nas.latency.predicted import keep, table_for
from nas.runs.checkpoint import file_digest
from nas.runs.folder import TRAINING, RunFolder
from nas.runs.progress import Progress
from nas.runs.provenance import RunClock
from nas.runs.ray_cluster import start_ray
from nas.search.evaluator import DiskCache
from nas.search.input_size import price_size, warn_if_apart
from nas.search.objective import cost_function
from nas.search.pool import EvaluatorPool
from nas.train.fixed import FixedTrainingRequest, train_fixed


@dataclass(frozen=True)
class TrainingPool:
    """Where a study trains its networks: one after another in this process (no workers, no address),
    or on Ray workers of a local cluster the study starts, or of the cluster at ``ray_address``."""

    workers: int = 0  # Ray workers (0: train in this process)
    ray_address: str | None = None  # join an existing Ray cluster
    threads_per_worker: int = 1  # torch threads (CPUs held) per Ray worker


def read_data_identity(data: str | None, recipe: Recipe, seed: int) -> tuple[int, str]:
    """``(num_classes, fingerprint)`` of the images a study trains on, read before its folder is made so
    that bad data fails first, with nothing written."""
    splits = load_splits(data, recipe, seed, hold_out_search=False)
    return splits.num_classes, splits.fingerprint


def read_finished_result(out: str | Path, what: str) -> tuple[Path, dict[str, Any]]:
    """``(path, result)`` of the ``result.json`` of a finished study (``what``: "comparison", ...) in ``out``,
    for judging it again; a missing or unreadable file is one :class:`NasError`."""
    path = Path(out) / "result.json"
    if not path.is_file():
        raise NasError(f"{out} holds no finished {what} (no result.json)")
    try:
        return path, json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NasError(f"{path} is not a {what}'s result: {exc}") from None


def price_networks(
    recorded: int | None,
    given: int | None,
    default: int,
    trained_here: int,
    device: str | None,
    space: SearchSpace,
    num_classes: int,
    subject: str,
) -> tuple[int, Any, Any]:
    """Where a study of networks trained from scratch prices their cost: the size (``given``, else the one
    a resumed study ``recorded``, else ``default``), warning when it is not ``trained_here``, where they
    train and are scored; the device's table at that size (built and saved when predicted) and the cost
    function. Returns ``(img_size, table, cost)``."""
    img_size = price_size(given, recorded, default)
    warn_if_apart(img_size, trained_here, "the networks train and are scored", subject)
    table = keep(table_for(device, space, img_size)) if device else None
    return img_size, table, cost_function(table, img_size, num_classes)


def trainings_recorded(request, img_size: int, fingerprint: str, table) -> dict[str, Any]:
    """What the config of a study of networks trained from scratch (``compare``, ``headroom``) records
    of their trainings and pricing, from its request (``device``, ``data``, ``seed``, ``recipe``,
    ``recipe_name``, ``max_steps``): a resumed study that differs in any of them is refused."""
    return {
        "device": request.device,
        "img_size": img_size,
        "data": request.data,
        "seed": request.seed,
        "recipe": request.recipe,
        "recipe_name": request.recipe_name,
        "max_steps": request.max_steps,
        "data_fingerprint": fingerprint,
        "table_digest": file_digest(table.path) if table is not None else None,
    }


def seeded_jobs(
    networks: list[tuple[str, ArchConfig]],
    seeds: list[int],
    request,
    runs: Path,
    data: str | None,
    max_steps: int | None,
) -> list[FixedTrainingRequest]:
    """Every network trained with every seed (network by network), each in ``runs/<name>[-seedK]``
    (:func:`seed_run_name`), on ``request``'s recipe, space and progress setting."""
    return [
        FixedTrainingRequest(
            arch,
            recipe=request.recipe,
            data=data,
            run=runs / seed_run_name(name, k),
            seed=s,
            progress=request.progress,
            max_steps=max_steps,
            label=name,
            space=request.space.name,
        )
        for name, arch in networks
        for k, s in enumerate(seeds)
    ]


def train_one(job: FixedTrainingRequest, threads: int | None = None) -> dict[str, Any]:
    """Train one network of a study (it may run in a Ray worker); resumes from the run's checkpoint
    when there is one, so a retried task continues where it stopped."""

    if threads:
        import torch

        torch.set_num_threads(threads)
    if threads and job.recipe.loader_workers == LOADER_WORKERS_AUTO:
        # A Ray task holds `threads` CPUs: its loader workers share them (auto would take the node's).
        job = dataclasses.replace(job, recipe=dataclasses.replace(job.recipe, loader_workers=threads - 1))
    return RunFolder(job.run, TRAINING).finished_or_run(
        lambda resume: train_fixed(dataclasses.replace(job, resume=resume))
    )


def seed_run_name(network: str, k: int) -> str:
    """The run folder of a network's ``k``-th seed: ``searched``, ``searched-seed1``, ... (the
    first seed keeps the network's name, so single-seed comparisons keep their layout)."""
    return network if k == 0 else f"{network}-seed{k}"


def train_all(jobs: list[FixedTrainingRequest], pool: TrainingPool, clock: RunClock | None = None) -> list[dict]:
    """Train every job on ``pool``, in job order; ``clock`` records the wall time after each network and
    every minute while they train (a network's own checkpoints are in its folder, not the study's)."""
    with clock.ticking() if clock is not None else contextlib.nullcontext():
        return _train_all(jobs, pool, clock)


def _train_all(jobs: list[FixedTrainingRequest], pool: TrainingPool, clock: RunClock | None) -> list[dict]:
    workers, address, threads = pool.workers, pool.ray_address, pool.threads_per_worker
    before = [RunFolder(job.run).finished for job in jobs]  # trained earlier, or copied: counted done at once
    finished = all(before)
    shown = (jobs[0].progress if jobs else False) and not finished
    todo = len(jobs) - sum(before)
    if finished or (workers == 0 and address is None):
        done = []
        with Progress("networks trained", total=todo, unit="trained", enabled=shown) as bar:
            for job, was in zip(jobs, before):
                done.append(train_one(job))
                if not was:
                    bar.advance()
                    bar.mark()
                if clock is not None:
                    clock.tick()
        return done
    import ray

    started = start_ray(address, workers * threads)
    try:
        # A task whose worker dies is retried; it resumes from the run's last checkpoint.
        remote = ray.remote(num_cpus=threads, max_retries=3)(train_one)
        pending = {remote.remote(dataclasses.replace(job, progress=False), threads): i for i, job in enumerate(jobs)}
        results: list[dict | None] = [None] * len(jobs)
        with Progress("networks trained", total=todo, unit="trained", enabled=shown) as bar:
            while pending:
                # a line at least every 30 s while the trainings run (a finished one or the time passed)
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=bar.every_s)
                for ref in ready:
                    i = pending.pop(ref)
                    results[i] = ray.get(ref)
                    if not before[i]:
                        bar.advance()
                        bar.mark()
                    if clock is not None:
                        clock.tick()
                if not ready:
                    bar.advance(0)
        return results  # type: ignore[return-value]
    finally:
        if started:
            ray.shutdown()


def supernet_accuracies(spec, context: dict, archs: list[ArchConfig], out: Path) -> list[float]:
    """Supernet top-1 of each of ``archs`` (``spec``'s weights, in this process), cached in
    ``out/supernet_evaluations.jsonl`` under ``context``."""
    pool = EvaluatorPool(spec, cache=DiskCache(out / "supernet_evaluations.jsonl", context))
    try:
        return pool(archs)
    finally:
        pool.close()


def train_images_words(result: dict, recipe: Recipe) -> str:
    """How many images a training saw, and whether they were a subset (the recipe's ``train_images``)."""
    n = result.get("train_images")
    if n is None:  # runs written before the count was recorded
        return "the training images"
    return f"{n} training images" + (" (a class-balanced subset)" if recipe.train_images else "")
