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

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.runs.ray_cluster import start_ray
from nas.search.evaluator import DiskCache, EvalSpec, Fidelity, SubnetEvaluator, cache_key

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

        def scored_images(self, fidelity: dict | None = None) -> int:
            return self.evaluator.images(Fidelity.from_dict(fidelity) if fidelity else None)

        def evaluate(self, arch: dict, fidelity: dict | None = None) -> float:
            return self.evaluator.accuracy(
                ArchConfig.from_dict(arch), Fidelity.from_dict(fidelity) if fidelity else None
            )

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
        space: SearchSpace | None = None,  # spec's space, already loaded (the in-process evaluator takes it)
    ):
        self.spec, self.cache, self.actors, self._started_ray = spec, cache, [], False
        self.fidelity = spec.fidelity  # what a search scores at; score() takes others
        self.local = None
        self.evaluations = 0
        # what the user sees of the search (nas.search.progress.SearchProgress), set by the engine per search
        self.progress = None
        self._memory: dict[str, float] = {}
        self._memory_archs: dict[str, dict] = {}
        if workers == 0 and address is None:
            self.local = SubnetEvaluator(spec, space=space)
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
    def accuracy_step(self) -> float:
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
        """Accuracies of ``archs`` at the search's fidelity (what every strategy chooses on)."""
        return self.score(archs)

    def score(self, archs: Sequence[ArchConfig], fidelity: Fidelity | None = None) -> list[float]:
        """Accuracies of ``archs`` at ``fidelity`` (default: the search's), each evaluated once: cached
        by digest and fidelity, spread over the workers."""
        fidelity = fidelity or self.fidelity
        known = self.cache.values if self.cache is not None else self._memory
        keys = {a.digest: cache_key(a, fidelity, self.fidelity) for a in archs}
        todo = [a for a in dict.fromkeys(archs) if keys[a.digest] not in known]
        if todo:
            wire = None if fidelity == self.fidelity else fidelity.to_dict()
            # Results are lazy and in order: each lands in the cache as it arrives, so a search killed in a
            # long batch (greedy's full step: every shrink) loses only the evaluations in flight.
            if self.local is not None:
                results = (self.local.accuracy(a, fidelity) for a in todo)
            else:
                from ray.util import ActorPool

                results = ActorPool(self.actors).map(
                    lambda actor, arch: actor.evaluate.remote(arch.to_dict(), wire), todo
                )
            for arch, acc in zip(todo, results):
                if self.cache is not None:
                    self.cache.add(arch, acc, keys[arch.digest], fidelity)
                else:
                    known[keys[arch.digest]] = acc
                    self._memory_archs[arch.digest] = arch.to_dict()
                if fidelity == self.fidelity:
                    self.evaluations += 1
                    if self.progress is not None:
                        self.progress.evaluated(arch, acc)
                elif self.progress is not None:
                    self.progress.finalist_scored()
            if fidelity == self.fidelity and self.progress is not None:
                self.progress.batch_done()
        return [known[keys[a.digest]] for a in archs]

    def images(self, fidelity: Fidelity | None = None) -> int:
        """How many images a score at ``fidelity`` counts (default: the search's)."""
        if fidelity is None or fidelity == self.fidelity:
            return self.scored_images
        if self.local is not None:
            return self.local.images(fidelity)
        import ray

        return ray.get(self.actors[0].scored_images.remote(fidelity.to_dict()))

    def evaluated(self) -> list[tuple[ArchConfig, float]]:
        """Every sub-network scored at the search's fidelity in this run, with its accuracy, in the order scored."""
        known = self.cache.values if self.cache is not None else self._memory
        archs = self.cache.archs if self.cache is not None else self._memory_archs
        return [
            (ArchConfig.from_dict(archs[key]), acc) for key, acc in known.items() if "@" not in key and key in archs
        ]

    @property
    def searched(self) -> int:
        """Distinct sub-networks scored at the search's fidelity in this run (resumed runs included)."""
        known = self.cache.values if self.cache is not None else self._memory
        return sum("@" not in key for key in known)

    def close(self) -> None:
        if self._started_ray:
            import ray

            ray.shutdown()
