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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nas.compare import compare
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.latency import LatencyTable
from nas.latency.predicted import build_predicted_table
from nas.latency.table import table_path
from nas.recipe import DEMO_SUPERNET_EPOCHS, DEMO_TRAIN_EPOCHS, Recipe, load_recipe
from nas.report import write_report
from nas.reports import write_json
from nas.runlock import RunLock
from nas.search.greedy import reachable_range
from nas.search.objective import Objective, cost_function
from nas.search.run import SearchRequest, search
from nas.space import load_space
from nas.train.runfolder import finished_or_run
from nas.train.supernet import train_supernet

log = logging.getLogger(__name__)

DEMO_SPACE = "efficientformerv2-tiny"
DEMO_DEVICE = "iphone12"
DIGITS_CLASSES = 10


def ensure_table(device: str, space, img_size: int = 224) -> LatencyTable:
    """The device's table for ``space``: the shipped one, or a predicted one built now (phones) when
    there is none. A corrupt or mismatched table stays an error: it is not overwritten."""
    if not table_path(device, space.name, img_size).exists():
        log.info("no %s table for %s; building the predicted one", device, space.name)
        build_predicted_table(device, space, img_size, progress=False).save()
    return LatencyTable.load(device, space, img_size)


def demo_target(space, table, num_classes: int = DIGITS_CLASSES, fraction: float = 0.5) -> float:
    """An MES ``fraction`` of the way from the largest sub-network's to the smallest's."""
    cost = cost_function(table, 224, num_classes)
    largest, smallest = reachable_range(space, cost, Objective("mes", 1.0))
    return round(largest + fraction * (smallest - largest), 1)


def demo(
    run: str | Path = "runs/demo",
    seed: int = 0,
    supernet_recipe: Recipe | None = None,
    train_recipe: Recipe | None = None,
    n_random: int = 3,
    workers: int = 0,
    target_fraction: float = 0.5,
    progress: bool = True,
    on_stage: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run (or continue) the demo in ``run``, which it locks while it works."""
    if not 0 < target_fraction <= 1:  # checked before minutes of training, not after
        raise NasError(f"--target-fraction must be in (0, 1], got {target_fraction}")
    run = Path(run)
    run.mkdir(parents=True, exist_ok=True)
    with RunLock(run, "demo"):
        return _demo(run, seed, supernet_recipe, train_recipe, n_random, workers, target_fraction, progress, on_stage)


def _demo(
    run: Path,
    seed: int,
    supernet_recipe: Recipe | None,
    train_recipe: Recipe | None,
    n_random: int,
    workers: int,
    target_fraction: float,
    progress: bool,
    on_stage: Callable[[str], None] | None,
) -> dict[str, Any]:
    supernet_recipe = supernet_recipe or dataclasses.replace(load_recipe("demo"), epochs=DEMO_SUPERNET_EPOCHS)
    train_recipe = train_recipe or dataclasses.replace(load_recipe("demo"), epochs=DEMO_TRAIN_EPOCHS)
    say = on_stage or (lambda text: log.info("%s", text))
    started = time.perf_counter()
    timings: dict[str, float] = {}
    space = load_space(DEMO_SPACE)

    t = time.perf_counter()
    table = ensure_table(DEMO_DEVICE, space)
    timings["table"] = time.perf_counter() - t
    say(f"[1/4] latency table: {table.path} ({table.describe_source()})")

    t = time.perf_counter()
    supernet_run = run / "supernet"
    say(
        f"[2/4] supernet: {DEMO_SPACE}, sandwich rule, {supernet_recipe.epochs} epochs on scikit-learn digits "
        f"-> {supernet_run}"
    )
    supernet_result = finished_or_run(
        supernet_run,
        "checkpoint.pt",
        lambda resume: train_supernet(
            space, supernet_recipe, None, supernet_run, seed=seed, resume=resume, progress=progress
        ),
    )
    timings["supernet"] = time.perf_counter() - t

    t = time.perf_counter()
    target = demo_target(space, table, fraction=target_fraction)
    search_run = run / "search"
    say(f"[3/4] search: greedy slimming to MES {target:g} on the {DEMO_DEVICE} table -> {search_run}")
    search_result = finished_or_run(
        search_run,
        "config.yaml",
        lambda resume: search(
            SearchRequest(
                supernet_run,
                Objective("mes", target),
                search_run,
                DEMO_DEVICE,
                seed=seed,
                workers=workers,
                resume=resume,
            )
        ),
    )
    timings["search"] = time.perf_counter() - t

    t = time.perf_counter()
    compare_run = run / "compare"
    say(
        f"[4/4] compare: the searched network and {n_random} random ones of its MES, trained from scratch for "
        f"{train_recipe.epochs} epochs -> {compare_run}"
    )

    searched = ArchConfig.load(search_run / "arch.yaml")
    comparison = compare(
        searched,
        space,
        n_random,
        train_recipe,
        None,
        compare_run,
        seed=seed,
        device=DEMO_DEVICE,
        objective_name="mes",
        workers=workers,
        resume=(compare_run / "plan.json").exists(),
        recipe_name="demo",
        searched_label=str(search_run / "arch.yaml"),
        progress=progress,
        supernet_run=str(supernet_run),
    )
    timings["compare"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - started
    result = {
        "run": str(run),
        "space": DEMO_SPACE,
        "device": DEMO_DEVICE,
        "target_mes": target,
        "supernet": {k: v for k, v in supernet_result.items() if not isinstance(v, dict)},
        "search": search_result,
        "comparison": comparison,
        "seconds": {k: round(v, 1) for k, v in timings.items()},
        "recipes": {"supernet": dataclasses.asdict(supernet_recipe), "train": dataclasses.asdict(train_recipe)},
    }
    write_json(run / "demo.json", result)

    result["report"] = str(write_report(run))
    say(f"report: {result['report']}")
    return result
