"""``nas demo``: the whole pipeline on built-in data, in minutes on a laptop CPU.

1. the latency table: the predicted iPhone 12 table of the tiny EfficientFormerV2 space (built if
   it is missing),
2. a supernet trained with the sandwich rule on scikit-learn's digits (no download),
3. greedy slimming to an MES target ``target_fraction`` of the way from the largest sub-network's
   MES to the smallest's (halfway by default),
4. the searched network and ``n_random`` random sub-networks of its MES trained from scratch,
5. the comparison table, with where every number comes from.

Each stage writes into its own folder under the run and is skipped when already done (and resumed
when interrupted), so running the demo again continues it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.config.recipe import DEMO_SUPERNET_EPOCHS, DEMO_TRAIN_EPOCHS, Recipe, load_recipe
from nas.config.spaces import load_space
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.latency import LatencyTable
from nas.latency.predicted import keep, table_for
from nas.reports.html import write_report
from nas.runs.folder import COMPARISON, SEARCH, TRAINING, RunFolder
from nas.runs.writers import write_json
from nas.search.engine import SearchRequest, search
from nas.search.objective import Objective, cost_function, reachable_range
from nas.studies.compare import CompareRequest, compare
from nas.studies.trainings import TrainingPool
from nas.train.supernet import SupernetTrainingRequest, train_supernet

log = logging.getLogger(__name__)

DEMO_SPACE = "efficientformerv2-tiny"
DEMO_DEVICE = "iphone12"
DIGITS_CLASSES = 10


@dataclass(frozen=True)
class DemoRequest:
    """What ``nas demo`` is asked to do (the CLI's flags, as one object)."""

    run: str | Path = "runs/demo"  # the demo's folder: one folder per stage inside
    seed: int = 0
    supernet_recipe: Recipe | None = None  # None: the demo recipe for DEMO_SUPERNET_EPOCHS
    train_recipe: Recipe | None = None  # None: the demo recipe for DEMO_TRAIN_EPOCHS
    n_random: int = 3  # random sub-networks compared with the searched one
    workers: int = 0  # Ray workers for the search and the trainings
    target_fraction: float = 0.5  # the MES target, as a fraction of the way from the largest's to the smallest's
    progress: bool = True


def ensure_table(device: str, space, img_size: int = 224) -> LatencyTable:
    """The device's table for ``space`` at ``img_size``: the shipped one, or a predicted one built now
    (phones) when there is none. A corrupt or mismatched table stays an error: it is not overwritten."""
    return keep(table_for(device, space, img_size))


def demo_target(space, table, num_classes: int = DIGITS_CLASSES, fraction: float = 0.5) -> float:
    """An MES ``fraction`` of the way from the largest sub-network's to the smallest's, priced at the
    table's input size."""
    cost = cost_function(table, table.header.img_size, num_classes)
    largest, smallest = reachable_range(space, cost, Objective("mes", 1.0))
    return round(largest + fraction * (smallest - largest), 1)


def demo(request: DemoRequest, on_stage: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run (or continue) the demo in ``request.run``, which it locks while it works; ``on_stage`` is
    told what each stage does as it starts (default: the log)."""
    if not 0 < request.target_fraction <= 1:  # checked before minutes of training, not after
        raise NasError(f"--target-fraction must be in (0, 1], got {request.target_fraction}")
    with RunFolder(request.run).hold("demo"):
        return _Demo(request, on_stage or (lambda text: log.info("%s", text))).run()


class _Demo:
    """The demo's stages in turn, each in its own folder under the run, timed."""

    def __init__(self, request: DemoRequest, say: Callable[[str], None]):
        self.request, self.say = request, say
        self.run_path = Path(request.run)
        self.supernet_recipe = request.supernet_recipe or dataclasses.replace(
            load_recipe("demo"), epochs=DEMO_SUPERNET_EPOCHS
        )
        self.train_recipe = request.train_recipe or dataclasses.replace(load_recipe("demo"), epochs=DEMO_TRAIN_EPOCHS)
        self.seconds: dict[str, float] = {}

    @contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.seconds[stage] = time.perf_counter() - start

    def run(self) -> dict[str, Any]:
        """Every stage, then ``demo.json`` and the HTML report."""
        started = time.perf_counter()
        space = load_space(DEMO_SPACE)
        with self._timed("table"):
            # At the size the supernet trains at: the search and the comparison price there too.
            table = ensure_table(DEMO_DEVICE, space, self.supernet_recipe.img_size)
        self.say(f"[1/4] latency table: {table.path} ({table.describe_source()})")
        with self._timed("supernet"):
            supernet_result = self._supernet(space)
        with self._timed("search"):
            target, search_result = self._search(space, table)
        with self._timed("compare"):
            comparison = self._compare(space)
        self.seconds["total"] = time.perf_counter() - started
        result = {
            "run": str(self.run_path),
            "space": DEMO_SPACE,
            "device": DEMO_DEVICE,
            "target_mes": target,
            "supernet": {k: v for k, v in supernet_result.items() if not isinstance(v, dict)},
            "search": search_result,
            "comparison": comparison,
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            "recipes": {
                "supernet": dataclasses.asdict(self.supernet_recipe),
                "train": dataclasses.asdict(self.train_recipe),
            },
        }
        write_json(self.run_path / "demo.json", result)

        result["report"] = str(write_report(self.run_path))
        self.say(f"report: {result['report']}")
        return result

    def _supernet(self, space: SearchSpace) -> dict[str, Any]:
        """Stage 2: the supernet, trained with the sandwich rule on the digits."""
        run, recipe = self.run_path / "supernet", self.supernet_recipe
        self.say(f"[2/4] supernet: {DEMO_SPACE}, sandwich rule, {recipe.epochs} epochs on scikit-learn digits -> {run}")
        return RunFolder(run, TRAINING).finished_or_run(
            lambda resume: train_supernet(
                SupernetTrainingRequest(
                    space,
                    recipe=recipe,
                    data=None,
                    run=run,
                    seed=self.request.seed,
                    resume=resume,
                    progress=self.request.progress,
                )
            )
        )

    def _search(self, space: SearchSpace, table: LatencyTable) -> tuple[float, dict[str, Any]]:
        """Stage 3: greedy slimming to the demo's MES target; the target and the search's result."""
        target = demo_target(space, table, fraction=self.request.target_fraction)
        run = self.run_path / "search"
        self.say(f"[3/4] search: greedy slimming to MES {target:g} on the {DEMO_DEVICE} table -> {run}")
        result = RunFolder(run, SEARCH).finished_or_run(
            lambda resume: search(
                SearchRequest(
                    self.run_path / "supernet",
                    Objective("mes", target),
                    run,
                    DEMO_DEVICE,
                    seed=self.request.seed,
                    strategy="greedy",
                    workers=self.request.workers,
                    resume=resume,
                    progress=self.request.progress,
                )
            ).to_dict()
        )
        return target, result

    def _compare(self, space: SearchSpace) -> dict[str, Any]:
        """Stage 4: the searched network and random ones of its MES, trained from scratch."""
        request, run = self.request, self.run_path / "compare"
        self.say(
            f"[4/4] compare: the searched network and {request.n_random} random ones of its MES, trained from "
            f"scratch for {self.train_recipe.epochs} epochs -> {run}"
        )
        arch_path = self.run_path / "search" / "arch.yaml"
        return compare(
            CompareRequest(
                searched=ArchConfig.load(arch_path),
                space=space,
                recipe=self.train_recipe,
                out=run,
                n_random=request.n_random,
                seed=request.seed,
                objective="mes",
                device=DEMO_DEVICE,
                supernet=str(self.run_path / "supernet"),
                pool=TrainingPool(request.workers),
                resume=RunFolder(run, COMPARISON).started,
                recipe_name="demo",
                searched_label=str(arch_path),
                progress=request.progress,
            )
        )
