"""Sub-network evaluation in-process or on a pool of Ray actors.

Each actor builds its own evaluator (supernet copy and data) once and sets its own torch thread
count; tasks carry plain data (the architecture as a dict) and return plain results. ``workers=0``
evaluates in-process; ``workers=N`` starts a local Ray instance for the command; ``address``
joins an existing cluster. An actor whose process dies is restarted and its task retried, so a
search's result does not depend on failures.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from nas.cluster import start_ray
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.search.evaluator import DiskCache, EvalSpec, SubnetEvaluator

log = logging.getLogger(__name__)


def _actor_class():
    import ray

    @ray.remote(max_restarts=4, max_task_retries=4)
    class EvalActor:
        def __init__(self, spec: dict, threads: int):
            import torch

            torch.set_num_threads(threads)
            self.evaluator = SubnetEvaluator(EvalSpec(**spec))

        def pid(self) -> int:
            return os.getpid()

        def scored_images(self) -> int:
            return self.evaluator.scored_images

        def evaluate(self, arch: dict) -> float:
            return self.evaluator.accuracy(ArchConfig.from_dict(arch))

    return EvalActor


def actor_error(exc: BaseException) -> str:
    """The one-line reason a Ray actor died: the :class:`NasError` its creation raised (bad data,
    a refused checkpoint), else the last line of Ray's report."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    prefix = f"{NasError.__module__}.{NasError.__name__}: "
    for line in reversed(lines):
        if line.startswith(prefix):
            return line[len(prefix) :]
    return f"a Ray evaluator died: {lines[-1] if lines else type(exc).__name__}"


class EvaluatorPool:
    """``pool(archs) -> accuracies`` with an in-memory and on-disk cache in front."""

    def __init__(
        self,
        spec: EvalSpec,
        workers: int = 0,
        address: str | None = None,
        cache: DiskCache | None = None,
        threads_per_worker: int = 1,
    ):
        self.spec, self.cache, self.actors, self._started_ray = spec, cache, [], False
        self.local = None
        self.evaluations = 0
        self._memory: dict[str, float] = {}
        if workers == 0 and address is None:
            self.local = SubnetEvaluator(spec)
            self.scored_images = self.local.scored_images
            return
        import ray

        self._started_ray = start_ray(address, workers)
        actor = _actor_class()
        n = workers or int(ray.cluster_resources().get("CPU", 1))
        self.actors = [actor.remote(dict(spec.__dict__), threads_per_worker) for _ in range(n)]
        try:
            self.worker_pids()  # every actor has built its evaluator: bad data or weights fail here
            #: Images each sub-network is scored on (every actor scores the same ones).
            self.scored_images: int = ray.get(self.actors[0].scored_images.remote())
        except BaseException:
            self.close()
            raise

    @property
    def resolution(self) -> float:
        """The smallest accuracy difference an evaluation resolves: one scored image
        (:func:`nas.search.objective.greedy_key`)."""
        return 1 / self.scored_images

    def worker_pids(self) -> list[int]:
        import ray

        try:
            return ray.get([a.pid.remote() for a in self.actors])
        except ray.exceptions.RayActorError as exc:
            raise NasError(actor_error(exc)) from None

    def __call__(self, archs: Sequence[ArchConfig]) -> list[float]:
        known = self.cache.values if self.cache is not None else self._memory
        todo = [a for a in dict.fromkeys(archs) if a.digest not in known]
        if todo:
            if self.local is not None:
                results = [self.local.accuracy(a) for a in todo]
            else:
                from ray.util import ActorPool

                results = list(
                    ActorPool(self.actors).map(lambda actor, arch: actor.evaluate.remote(arch.to_dict()), todo)
                )
            self.evaluations += len(todo)
            for arch, acc in zip(todo, results):
                if self.cache is not None:
                    self.cache.add(arch, acc)
                else:
                    known[arch.digest] = acc
        return [known[a.digest] for a in archs]

    def close(self) -> None:
        if self._started_ray:
            import ray

            ray.shutdown()
