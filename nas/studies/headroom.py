"""Headroom before the spend: does a budget band leave a search room to show, on this recipe and data?

A comparison of a searched network with random ones of its budget can only show a win if the random
networks differ by more than a network differs from itself across training seeds. When one epoch on a
few thousand images leaves every network of the band nearly equal, hours of training end in "no room"
(docs/explanation/comparisons.md). :func:`headroom` asks first, cheaply: it draws a few random networks
in the band (as ``nas compare`` draws them), trains each with two or more seeds on the user's recipe and
data, and compares the band's spread (the standard deviation of the networks' mean top-1) with the seed
noise (the pooled standard deviation within a network). The ratio is a one-way random-effects design:
with k networks of n seeds, ``F = n * s_between**2 / s_within**2`` follows ``(n rho**2) F(k-1, k(n-1))``,
``rho`` the true ratio, which gives its interval.

The pilot's folder is laid out as a comparison's (``plan.json`` of random networks, ``runs/``), so
``nas compare --random-from PILOT`` reuses its networks, and the trainings that match (same recipe, data,
seed and step limit) count towards the comparison instead of being trained again.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats as scipy_stats

from nas.config.recipe import Recipe
from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.runs.config import HeadroomRunConfig
from nas.runs.folder import PILOT, RunFolder
from nas.search.objective import Objective, require_table
from nas.search.sample import sample_within_budget
from nas.studies.stats import headroom as margin_needed
from nas.studies.stats import mean_std, pooled_std
from nas.studies.trainings import (
    TrainingPool,
    price_networks,
    read_data_identity,
    seeded_jobs,
    train_all,
    trainings_recorded,
)

log = logging.getLogger(__name__)

#: The band's spread over the seed noise from which a comparison can show a searched network's win
#: (issue 46): below it, the best of a few random draws is within a seed or two of the rest.
ROOM = 1.5
LEVEL = 0.8  # the ratio's interval


@dataclass(frozen=True)
class HeadroomRequest:
    """What ``nas headroom`` is asked to do (the CLI's flags, as one object)."""

    space: SearchSpace
    recipe: Recipe
    out: str | Path
    objective: str
    target: float
    device: str | None = None
    tolerance: float = 0.05
    networks: int = 4
    seeds: int = 2
    planned_random: int = 5  # random networks the comparison to come trains (the margin it needs)
    data: str | None = None
    seed: int = 0
    img_size: int | None = None  # input size cost is priced at (None: the recipe's)
    pool: TrainingPool = TrainingPool()  # where the networks train
    resume: bool = False
    max_steps: int | None = None
    recipe_name: str = ""
    progress: bool = True


def headroom(request: HeadroomRequest) -> dict[str, Any]:
    """Draw ``networks`` random sub-networks in the band of ``target``, train each with ``seeds`` seeds,
    and say whether the band's spread clears :data:`ROOM` times the seed noise. Every input is checked
    before ``out`` is created; ``resume`` continues with the same settings."""
    if request.networks < 2:
        raise NasError(f"--networks must be at least 2 (a spread needs two), got {request.networks}")
    if request.seeds < 2:
        raise NasError(f"--seeds must be at least 2 (the seed noise needs two), got {request.seeds}")
    if not 0 < request.tolerance < 1:
        raise NasError(f"--tolerance must be between 0 and 1, got {request.tolerance}")
    objective = Objective(request.objective, request.target)
    require_table(request.objective, request.device)
    num_classes, fingerprint = read_data_identity(request.data, request.recipe, request.seed)
    trained_here = request.recipe.img_size
    folder = RunFolder(request.out, PILOT)  # opened once: the size a resumed pilot recorded, then its check
    img_size, table, cost = price_networks(
        folder.recorded_setting("img_size", request.resume),
        request.img_size,
        trained_here,
        trained_here,
        request.device,
        request.space,
        num_classes,
        "the pilot",
    )
    config = HeadroomRunConfig(
        space=request.space.name,
        objective=objective.name,
        target=float(request.target),
        tolerance=request.tolerance,
        random=request.networks,
        seeds=request.seeds,
        **trainings_recorded(request, img_size, fingerprint, table),
        planned_random=request.planned_random,
    )
    saved = folder.check(config, request.resume)
    if saved is not None:
        try:
            networks = [(n["name"], ArchConfig.from_dict(n["arch"])) for n in saved["networks"]]
            seed = int(saved["draw_seed"])
        except (ValueError, KeyError, TypeError) as exc:
            raise folder.corrupt(exc) from None
    else:
        seed = pilot_draw_seed(config)
        drawn = sample_within_budget(
            request.space, request.networks, objective, cost, random.Random(seed), request.tolerance
        )
        networks = [(f"random-{i}", arch) for i, arch in enumerate(drawn)]
    plan = {
        "objective": {"name": objective.name, "target": objective.target},
        "networks": [{"name": n, "arch": a.to_dict(), "digest": a.digest} for n, a in networks],
        "draw_seed": seed,
    }
    with folder.start(config, request.resume, plan):
        clock = folder.clock(request.resume)
        seeds = [request.seed + k for k in range(request.seeds)]
        jobs = seeded_jobs(networks, seeds, request, folder.path / "runs", request.data, request.max_steps)
        trained = train_all(jobs, request.pool, clock)
        rows = []
        for i, (name, arch) in enumerate(networks):
            top1s = [r["top1"] for r in trained[i * len(seeds) : (i + 1) * len(seeds)]]
            value = objective.value(cost(arch))
            rows.append(
                {"network": name, "digest": arch.digest, objective.name: value, "top1_seeds": top1s}
                | dict(zip(("top1", "top1_std"), mean_std(top1s)))
            )
        result = {
            "objective": {"name": objective.name, "target": objective.target, "tolerance": request.tolerance},
            "space": request.space.name,
            "rows": rows,
            "summary": pilot_summary([r["top1_seeds"] for r in rows], request.planned_random),
            "draw_seed": seed,
            "recipe": request.recipe_name,
            "data": request.data or "scikit-learn's digits",
            "img_size": img_size,
            "provenance": clock.summary(),
        }
        write_text_atomic(folder.path / "headroom.md", "\n".join(report_lines(result)) + "\n")
        folder.write_result(result)
        return result


def pilot_draw_seed(config: HeadroomRunConfig) -> int:
    """The seed the pilot draws its networks from: a stable hash of its space, budget and ``--seed``."""
    key = f"{config.space}:{config.objective}:{config.target!r}:{config.tolerance!r}:{config.seed}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")


def pilot_summary(top1_seeds: list[list[float]], planned_random: int, level: float = LEVEL) -> dict[str, Any]:
    """The networks' spread against the seed noise, from ``top1_seeds`` (per network, per seed).

    The standard deviation of the networks' means (``band_spread``, what ``nas compare`` reports) holds
    seed noise too: ``s_between**2 = sigma_network**2 + sigma_seed**2 / n``, so with identical networks
    and 2 seeds it is still 0.71 seed deviations. The verdict is on the networks' own spread,
    ``network_spread = sqrt(max(0, s_between**2 - s_within**2 / n))`` over the seed noise ``s_within``
    (pooled within a network), which does not depend on how many seeds the pilot or the comparison
    trains; its ``level`` interval comes from ``F = n * s_between**2 / s_within**2`` (one-way random
    effects, module docstring). The margin a searched network would need over the random mean against
    ``planned_random`` random networks is :func:`nas.studies.stats.headroom`'s."""
    k, n = len(top1_seeds), min(len(s) for s in top1_seeds)
    means = [statistics.fmean(s) for s in top1_seeds]
    band_spread = statistics.stdev(means)
    noise = pooled_std(top1_seeds)
    network_spread = math.sqrt(max(0.0, band_spread**2 - noise**2 / n))
    ratio, interval = math.inf, None
    if noise > 0:
        ratio = network_spread / noise
        f = n * band_spread**2 / noise**2
        df1, df2 = k - 1, k * (n - 1)
        tail = (1 - level) / 2
        interval = [math.sqrt(max(0.0, f / (n * scipy_stats.f.ppf(q, df1, df2)) - 1 / n)) for q in (1 - tail, tail)]
    needed = margin_needed(network_spread, noise, planned_random)
    room = ratio >= ROOM
    return {
        "networks": k,
        "seeds": n,
        "band_spread": band_spread,
        "band_spread_over_seed_noise": band_spread / noise if noise > 0 else None,
        "network_spread": network_spread,
        "seed_noise": noise,
        "spread_over_noise": ratio,
        "spread_over_noise_interval": interval,
        "interval_level": level,
        "room_threshold": ROOM,
        "margin_needed_over_random_mean": needed["margin_needed_over_random_mean"],
        "planned_random": planned_random,
        "room": room,
        "verdict": "room for a search to show"
        if room
        else "no room: train longer, widen the band, or change the target",
    }


def report_lines(result: dict[str, Any]) -> list[str]:
    """What ``nas headroom`` prints and ``headroom.md`` holds: one row per network, then the verdict."""
    s, o = result["summary"], result["objective"]
    lines = [
        f"pilot: {s['networks']} random networks of {result['space']} with {o['name']} within "
        f"{100 * o['tolerance']:g}% of {o['target']:.4g}, {s['seeds']} seeds each "
        f"(recipe {result['recipe']}, data {result['data']}, {result['img_size']} px)",
        "",
        f"| network | {o['name']} | top-1 mean (%) | top-1 per seed (%) |",
        "|---|---|---|---|",
    ]
    for r in result["rows"]:
        seeds = ", ".join(f"{100 * t:.2f}" for t in r["top1_seeds"])
        lines.append(f"| {r['network']} | {r[o['name']]:.4g} | {100 * r['top1']:.2f} | {seeds} |")
    interval = s["spread_over_noise_interval"]
    ratio_words = f"{s['spread_over_noise']:.2f}" + (
        f" ({100 * s['interval_level']:.0f}% interval {interval[0]:.2f} to {interval[1]:.2f})" if interval else ""
    )
    lines += [
        "",
        f"networks' spread {100 * s['network_spread']:.2f} points (std of their means {100 * s['band_spread']:.2f}, "
        f"less the seed noise in it), seed noise {100 * s['seed_noise']:.2f} points (pooled std within a network)",
        f"spread over noise {ratio_words}; room from {s['room_threshold']:g}",
        f"a searched network would need about {100 * s['margin_needed_over_random_mean']:.2f} points over the "
        f"random mean to beat the best of {s['planned_random']} random networks by more than the seed noise",
        f"verdict: {s['verdict']}",
    ]
    return lines
