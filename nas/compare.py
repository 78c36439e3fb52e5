"""Searched network against random sub-networks of the same budget, all trained from scratch.

The papers' evidence that search matters (EfficientFormer tab. 5, EfficientFormerV2 §5.3) is
that the searched network beats random sub-networks that meet the same budget when every network
is trained from scratch with the same recipe. :func:`compare` makes that comparison: it draws the
random networks as ``nas sample`` does (uniform per choice, within ``tolerance`` of the searched
network's MES, latency or size, on the side that meets it), trains each one with
:class:`nas.train.fixed.FixedTrainer` (same recipe, same seed, so the same data order and
augmentation), in this process or as Ray tasks, and writes a Markdown and CSV table and a plot.

Everything lives in one output folder: ``plan.json`` (the networks, fixed before any training,
so ``--resume`` trains the same ones), ``archs/*.yaml``, ``runs/<name>/`` (one ``nas train`` run
each, resumable), ``compare.md``, ``compare.csv``, ``compare.png`` and ``result.json``.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any

from scipy.stats import kendalltau
from tqdm import tqdm

from nas.checkpoint import file_digest, load_checkpoint
from nas.cluster import start_ray
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import write_text_atomic
from nas.data import data_fingerprint, load_splits
from nas.latency import LatencyTable
from nas.metrics import count_macs
from nas.provenance import RunClock
from nas.recipe import Recipe, recipe_from_saved
from nas.reports import csv_text, pyplot, save_figure, write_json
from nas.runconfig import CompareRunConfig, as_dict, require_resumable, run_config_from
from nas.runlock import RunLock
from nas.search.evaluator import SUPERNET_KEYS, DiskCache, EvalSpec
from nas.search.objective import Objective, cost_function
from nas.search.pool import EvaluatorPool
from nas.search.sample import sample_within_budget
from nas.space import load_space
from nas.stats import bootstrap_margins, headroom, mean_std, pooled_std
from nas.train.fixed import train_fixed
from nas.train.runfolder import finished_or_run

log = logging.getLogger(__name__)


def train_one(job: dict[str, Any], threads: int | None = None) -> dict[str, Any]:
    """Train one network of a comparison from plain data (it may run in a Ray worker); resumes
    from the run's checkpoint when there is one, so a retried task continues where it stopped."""

    if threads:
        import torch

        torch.set_num_threads(threads)
    run = Path(job["run"])
    return finished_or_run(
        run,
        "checkpoint.pt",
        lambda resume: train_fixed(
            ArchConfig.from_dict(job["arch"]),
            recipe_from_saved(job["recipe"]),
            job["data"],
            run,
            seed=job["seed"],
            resume=resume,
            progress=job["progress"],
            max_steps=job["max_steps"],
            label=job["name"],
            space=job["space"],
        ),
    )


def seed_run_name(network: str, k: int) -> str:
    """The run folder of a network's ``k``-th seed: ``searched``, ``searched-seed1``, ... (the
    first seed keeps the network's name, so single-seed comparisons keep their layout)."""
    return network if k == 0 else f"{network}-seed{k}"


def train_all(
    jobs: list[dict[str, Any]], workers: int, address: str | None, threads: int, clock: RunClock | None = None
) -> list[dict]:
    """Train every job (in Ray workers when ``workers`` or ``address`` is given), in job order;
    ``clock`` records the wall time after each network."""
    finished = all((Path(job["run"]) / "result.json").exists() for job in jobs)
    if finished or (workers == 0 and address is None):
        done = []
        for job in tqdm(jobs, desc="compare: networks trained", disable=None):
            done.append(train_one(job))
            if clock is not None:
                clock.tick()
        return done
    import ray

    started = start_ray(address, workers * threads)
    try:
        # A task whose worker dies is retried; it resumes from the run's last checkpoint.
        remote = ray.remote(num_cpus=threads, max_retries=3)(train_one)
        pending = {remote.remote({**job, "progress": False}, threads): i for i, job in enumerate(jobs)}
        results: list[dict | None] = [None] * len(jobs)
        with tqdm(total=len(jobs), desc="compare: networks trained", disable=None) as bar:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    results[pending.pop(ref)] = ray.get(ref)
                    bar.update(1)
                    if clock is not None:
                        clock.tick()
        return results  # type: ignore[return-value]
    finally:
        if started:
            ray.shutdown()


def _plan(
    searched: ArchConfig, space: SearchSpace, n_random: int, objective_name: str, tolerance: float, cost, seed: int
) -> tuple[Objective, list[tuple[str, ArchConfig]]]:
    target = Objective(objective_name, 1.0).value(cost(searched))
    objective = Objective(objective_name, target)
    randoms = sample_within_budget(
        space, n_random, objective, cost, random.Random(seed), tolerance, exclude={searched.digest}
    )
    return objective, [("searched", searched)] + [(f"random-{i}", a) for i, a in enumerate(randoms)]


def _save_plan(
    out: Path, config: CompareRunConfig, objective: Objective, networks: list[tuple[str, ArchConfig]]
) -> None:
    for name, arch in networks:
        arch.save(out / "archs" / f"{name}.yaml")
    write_text_atomic(
        out / "plan.json",
        json.dumps(
            {
                "config": as_dict(config),
                "objective": {"name": objective.name, "target": objective.target},
                "networks": [{"name": n, "arch": a.to_dict(), "digest": a.digest} for n, a in networks],
            },
            indent=1,
        )
        + "\n",
    )


def _saved_plan(out: Path, config: CompareRunConfig) -> tuple[Objective, list[tuple[str, ArchConfig]]]:
    plan_path = out / "plan.json"
    if not plan_path.exists():
        raise NasError(f"{out}: nothing to resume (no plan.json)")
    try:
        saved = json.loads(plan_path.read_text(encoding="utf-8"))
        require_resumable(run_config_from(saved["config"], plan_path, CompareRunConfig), config, plan_path)
        objective = Objective(saved["objective"]["name"], saved["objective"]["target"])
        return objective, [(n["name"], ArchConfig.from_dict(n["arch"])) for n in saved["networks"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise NasError(f"{plan_path}: corrupt comparison plan ({type(exc).__name__}: {exc})") from None


def compare(
    searched: ArchConfig,
    space: SearchSpace,
    n_random: int,
    recipe: Recipe,
    data: str | None,
    out: str | Path,
    seed: int = 0,
    device: str | None = None,
    img_size: int = 224,
    objective_name: str = "mes",
    tolerance: float = 0.05,
    workers: int = 0,
    ray_address: str | None = None,
    threads_per_worker: int = 1,
    resume: bool = False,
    max_steps: int | None = None,
    recipe_name: str = "",
    searched_label: str = "",
    progress: bool = True,
    supernet_run: str | None = None,
    bn_calib_batches: int | None = None,
    seeds: int = 1,
) -> dict[str, Any]:
    """Train ``searched`` and ``n_random`` random sub-networks of its budget from scratch and tabulate
    them. With ``supernet_run`` (the supernet the search used), every network's supernet accuracy
    (what the search saw) is scored too, with Kendall's tau between the two rankings.

    Every input, the images included (each decoded once), is checked before ``out`` is created;
    ``out`` is locked while the comparison runs; ``resume`` continues it only with the same
    settings (:class:`nas.runconfig.CompareRunConfig`)."""
    space.validate(searched, where=searched_label or "searched arch")
    Objective(objective_name, 1.0)  # an unknown objective fails before anything else
    if objective_name != "params" and not device:
        raise NasError(f"objective {objective_name} needs --device (a latency table)")
    if n_random < 1:
        raise NasError(f"--random must be at least 1, got {n_random}")
    if seeds < 1:
        raise NasError(f"--seeds must be at least 1, got {seeds}")
    if not 0 < tolerance < 1:
        raise NasError(f"--tolerance must be between 0 and 1, got {tolerance}")
    splits = load_splits(data, recipe, seed, hold_out_search=False)  # bad data fails here, before any folder
    num_classes = splits.num_classes
    del splits
    supernet_spec, supernet_context = None, {}
    if supernet_run:
        supernet_spec = EvalSpec.from_run(supernet_run, bn_calib_batches)
        if load_space(supernet_spec.space).name != space.name:
            raise NasError(
                f"supernet {supernet_run} is of space {load_space(supernet_spec.space).name}, "
                f"not {space.name}; pass its space's arch or --supernet none"
            )
        load_checkpoint(supernet_spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS, mmap=True)
        supernet_context = supernet_spec.context()
    table = LatencyTable.load(device, space, img_size) if device else None
    cost = cost_function(table, img_size, num_classes)  # the budget as the search priced it
    out = Path(out)
    config = CompareRunConfig(
        searched=searched.to_dict(),
        searched_digest=searched.digest,
        space=space.name,
        random=n_random,
        objective=objective_name,
        tolerance=tolerance,
        device=device,
        img_size=img_size,
        data=data,
        seed=seed,
        recipe=recipe,
        recipe_name=recipe_name,
        max_steps=max_steps,
        data_fingerprint=data_fingerprint(data),
        table_digest=file_digest(table.path) if table is not None else None,
        supernet=supernet_run,
        supernet_digest=supernet_context.get("supernet_digest"),
        bn_calib_batches=supernet_context.get("bn_calib_batches"),
        seeds=seeds,
    )
    if resume:
        objective, networks = _saved_plan(out, config)
    else:
        if (out / "plan.json").exists():
            raise NasError(f"{out} already holds a comparison; pass --resume to continue it or choose another --out")
        objective, networks = _plan(searched, space, n_random, objective_name, tolerance, cost, seed)
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out, "compare"):
        if not resume:
            if (out / "plan.json").exists():  # written by a holder that finished before we took the lock
                raise NasError(f"{out} already holds a comparison; pass --resume to continue it")
            _save_plan(out, config, objective, networks)
        return _train_and_report(
            out,
            config,
            objective,
            networks,
            space,
            table,
            cost,
            num_classes,
            recipe,
            supernet_spec,
            supernet_context,
            workers,
            ray_address,
            threads_per_worker,
            progress,
            searched_label,
            RunClock(out, resume),
        )


def _train_and_report(
    out: Path,
    config: CompareRunConfig,
    objective: Objective,
    networks,
    space,
    table,
    cost,
    num_classes: int,
    recipe: Recipe,
    supernet_spec,
    supernet_context: dict,
    workers: int,
    ray_address: str | None,
    threads_per_worker: int,
    progress: bool,
    searched_label: str,
    clock: RunClock,
) -> dict[str, Any]:
    data, seed, img_size, max_steps = config.data, config.seed, config.img_size, config.max_steps
    supernet_run = config.supernet
    seeds = [seed + k for k in range(config.seeds)]
    jobs = [
        {
            "name": name,
            "arch": arch.to_dict(),
            "recipe": asdict(recipe),
            "data": data,
            "run": str(out / "runs" / seed_run_name(name, k)),
            "seed": s,
            "max_steps": max_steps,
            "space": space.name,
            "progress": progress,
        }
        for name, arch in networks
        for k, s in enumerate(seeds)
    ]
    trained = train_all(jobs, workers, ray_address, threads_per_worker, clock)
    supernet_top1 = (
        supernet_accuracies(supernet_spec, supernet_context, [a for _, a in networks], out)
        if supernet_spec
        else [None] * len(networks)
    )

    rows = _rows(networks, trained, supernet_top1, len(seeds), cost, img_size, num_classes, table)
    result = {
        "objective": {"name": objective.name, "target": objective.target},
        "space": space.name,
        "searched": searched_label,
        "rows": rows,
        "sources": _sources(config, objective, space, table, recipe, trained[0], num_classes),
        "summary": _summary(rows, seed, with_supernet=bool(supernet_run)),
        "provenance": {
            **clock.summary(),
            "network_wall_seconds": round(sum(r.get("provenance", {}).get("wall_seconds", 0.0) for r in trained), 1),
        },
    }
    write_text_atomic(out / "compare.csv", to_csv(rows))
    write_text_atomic(out / "compare.md", to_markdown(result))
    _plot(rows, table is not None, out / "compare.png", objective)
    write_json(out / "result.json", result)
    return result


def _rows(
    networks, trained: list[dict], supernet_top1: list, n_seeds: int, cost, img_size: int, num_classes: int, table=None
) -> list[dict]:
    """One row per network: its seeds' top-1 (mean, std, each), supernet top-1 and costs."""
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


def train_images_words(result: dict, recipe: Recipe) -> str:
    """How many images a training saw, and whether they were a subset (the recipe's ``train_images``)."""
    n = result.get("train_images")
    if n is None:  # runs written before the count was recorded
        return "the training images"
    return f"{n} training images" + (" (a class-balanced subset)" if recipe.train_images else "")


def _sources(
    config: CompareRunConfig, objective: Objective, space, table, recipe: Recipe, first: dict, num_classes: int
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
        "head, the size the search priced",
        "latency": table.describe_source() if table is not None else "no latency table (no --device)",
        "sampling": f"random sub-networks of {space.name}, uniform per choice, within {100 * config.tolerance:g}% of "
        f"the searched network's {objective.name} {objective.target:.4g} on the side that meets it",
    }
    if config.supernet:
        sources["supernet accuracy"] = (
            f"top-1 of the sub-network with the weights of supernet {config.supernet}, "
            "BatchNorm recalibrated, on that run's search split (what the search saw)"
        )
    return sources


def _summary(rows: list[dict], seed: int, with_supernet: bool) -> dict[str, Any]:
    """The searched network against the random ones: rank, margins with intervals, seed noise."""
    searched_row, random_rows = rows[0], rows[1:]
    random_top1 = [r["top1"] for r in random_rows]
    summary = {
        "searched_top1": searched_row["top1"],
        "random_top1_mean": statistics.fmean(random_top1),
        "random_top1_std": statistics.stdev(random_top1) if len(random_top1) > 1 else 0.0,
        "random_top1_best": max(random_top1),
        "searched_rank": 1 + sum(t > searched_row["top1"] for t in random_top1),
        "random_beaten": sum(t < searched_row["top1"] for t in random_top1),
        "networks": len(rows),
        "seeds": len(searched_row["top1_seeds"]),
        "pooled_seed_std": pooled_std([r["top1_seeds"] for r in rows]),
        **bootstrap_margins(searched_row["top1_seeds"], [r["top1_seeds"] for r in random_rows], seed=seed),
    }
    summary.update(headroom(summary["random_top1_std"], summary["pooled_seed_std"], len(random_rows)))
    if with_supernet:
        tau = kendalltau([r["supernet_top1"] for r in rows], [r["top1"] for r in rows]).statistic
        summary["kendall_tau_supernet_vs_scratch"] = None if tau != tau else float(tau)  # NaN when all tie
    return summary


def supernet_accuracies(spec, context: dict, archs: list[ArchConfig], out: Path) -> list[float]:
    """Supernet top-1 of each of ``archs`` (``spec``'s weights, in this process), cached in
    ``out/supernet_evaluations.jsonl`` under ``context``."""
    pool = EvaluatorPool(spec, cache=DiskCache(out / "supernet_evaluations.jsonl", context))
    try:
        return pool(archs)
    finally:
        pool.close()


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


def summary_line(result: dict) -> str:
    """The comparison in one line: searched vs random top-1 and rank, plus the margins' intervals over
    seeds and the supernet's Kendall's tau when there are."""
    s = result["summary"]
    line = (
        f"searched {100 * s['searched_top1']:.2f}% vs random {100 * s['random_top1_mean']:.2f}% "
        f"+- {100 * s['random_top1_std']:.2f}% (mean +- std of {s['networks'] - 1}; best "
        f"{100 * s['random_top1_best']:.2f}%): the searched network ranks {s['searched_rank']} of {s['networks']}"
    )
    if s.get("seeds", 1) > 1 or "margin_over_random_mean_ci" in s:
        level = int(round(100 * s["ci_level"]))
        lo, hi = s["margin_over_random_mean_ci"]
        blo, bhi = s["margin_over_best_random_ci"]
        line += (
            f"; over {s.get('seeds', 1)} seed(s) per network: margin over the random mean "
            f"{100 * s['margin_over_random_mean']:+.2f} points ({level}% CI {100 * lo:+.2f} to {100 * hi:+.2f}), "
            f"over the best random {100 * s['margin_over_best_random']:+.2f} ({100 * blo:+.2f} to "
            f"{100 * bhi:+.2f}); beats {s['random_beaten']} of {s['networks'] - 1} random networks; pooled seed "
            f"std {100 * s['pooled_seed_std']:.2f} points"
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


def to_markdown(result: dict) -> str:
    """``compare.md``: the budget, the table, the summary line and where the numbers come from."""
    objective = result["objective"]
    lines = [
        f"# Searched vs random sub-networks of {result['space']}",
        "",
        f"Budget: {objective['name']} {objective['target']:.4g} (the searched network's own, "
        f"{result['searched'] or 'searched arch'}).",
        "",
        *table_lines(result["rows"]),
        "",
        summary_line(result) + ".",
        "",
        "Where the numbers come from:",
        "",
    ]
    lines += [f"- {key}: {text}" for key, text in result["sources"].items()]
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict], with_latency: bool, path: Path, objective: Objective) -> None:
    plt = pyplot()
    key, label = (
        ("latency_ms", "latency (ms, see compare.md for its source)") if with_latency else ("params", "parameters")
    )
    fig, ax = plt.subplots(figsize=(6, 4))
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
    ax.set_ylabel("top-1 (%), trained from scratch (mean ± std over seeds)")
    ax.set_title(f"searched vs random at {objective.name} {objective.target:.4g}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)
