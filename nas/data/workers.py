"""How many DataLoader worker processes a loader starts, and the DataLoader options that go with them
(shared by the folder loaders of :mod:`nas.data.loader` and the shard streams of :mod:`nas.data.shards`);
whether this process may fork workers at all."""

from __future__ import annotations

import multiprocessing
import os
import sys

from nas.config.recipe import LOADER_WORKERS_AUTO

#: Most worker processes ``loader_workers: auto`` starts per training process: timm's transforms at
#: 224 px run at a few hundred images/s per core, so 8 feed one GPU's step at ImageNet recipes;
#: more only add memory and start-up time.
MAX_AUTO_WORKERS = 8
#: Batches each worker keeps ready (DataLoader's default is 2). Decode time varies per image (ImageNet's
#: JPEGs differ in size tenfold, RandAugment's operations in cost), so a deeper queue lets a slow batch
#: be absorbed by the ones ready behind it; the cost is workers x 4 batches of host memory.
PREFETCH_BATCHES = 4


def available_cores() -> int:
    """CPU cores this process may run on (its affinity where the OS has one, e.g. under a job scheduler)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def fork_is_safe() -> bool:
    """Whether this process may fork worker processes: not where Ray runs in it.

    A forked child holds a copy of every lock in the state the parent's other threads left it; one
    held at the fork is never released, and a child that needs it waits forever. Ray's native
    threads (gRPC's) hold such locks, so a fork pool inside a Ray task or driver can hang
    (ray-project/ray#28328), as ``benchmarks/compare_workers.py``'s Ray part did.
    """
    ray = sys.modules.get("ray")
    return ray is None or not ray.is_initialized()


def cores_per_process() -> int:
    """This process's share of the cores available to it, among the training processes of its node
    (torchrun's ``LOCAL_WORLD_SIZE``), at least 1."""
    try:
        local_world = max(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), 1)
    except ValueError:
        local_world = 1
    return max(available_cores() // local_world, 1)


def resolve_workers(requested: int | str, source: object) -> int:
    """The DataLoader worker count for ``requested`` (``recipe.loader_workers``) reading ``source`` (an
    image folder's or digits' :class:`~nas.data.source.ImageSource`, or a shard split): a number as given;
    ``auto``: 0 when ``source``'s images are decoded in memory (a worker would only add start-up and
    copying; never so for a shard stream), else the cores available to this process shared among the
    training processes of this node (torchrun's ``LOCAL_WORLD_SIZE``), one left for the training
    process, within [1, 8]."""
    if requested != LOADER_WORKERS_AUTO:
        return int(requested)
    if getattr(source, "pixels", None) is not None:
        return 0
    return min(max(cores_per_process() - 1, 1), MAX_AUTO_WORKERS)


def loader_options(workers: int, device_type: str) -> dict:
    """DataLoader keywords for ``workers`` processes feeding a ``device_type`` device (started from a
    fresh interpreter, not forked, where :func:`fork_is_safe` says no: inside a Ray task)."""
    options: dict = {"num_workers": workers, "pin_memory": device_type == "cuda"}  # pinned: async host-to-GPU copy
    if workers > 0:
        # Workers live as long as the loader: no start-up (fork, dataset copy) at every epoch or evaluation.
        options.update(persistent_workers=True, prefetch_factor=PREFETCH_BATCHES)
        if not fork_is_safe():
            options["multiprocessing_context"] = clean_start_method()
    return options


def clean_start_method() -> str:
    """How to start worker processes where a fork is unsafe: from a fresh interpreter that holds none of
    this process's locks (forkserver where the platform has it: one fresh start, then cheap forks of it)."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
