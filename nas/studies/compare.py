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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import write_text_atomic
from nas.data import data_fingerprint, load_splits
from nas.latency import LatencyTable
from nas.latency.predicted import keep, table_for
from nas.metrics import count_macs
from nas.recipe import Recipe
from nas.runs.checkpoint import file_digest, load_checkpoint
from nas.runs.config import CompareRunConfig
from nas.runs.folder import COMPARISON, RunFolder
from nas.runs.writers import csv_text, pyplot, save_figure
from nas.search.evaluator import SUPERNET_KEYS, EvalSpec
from nas.search.objective import Objective, cost_function, require_table
from nas.search.resolution import price_size, resolution_words, warn_if_apart
from nas.search.sample import sample_within_budget
from nas.space_files import load_space
from nas.stats import mean_std, searched_vs_random
from nas.studies.jobs import seed_run_name, supernet_accuracies, train_all, train_images_words, training_job

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompareRequest:
    """What ``nas compare`` is asked to do (the CLI's flags, as one object)."""

    searched: ArchConfig  # the searched network
    space: SearchSpace  # the space it and the random networks belong to
    recipe: Recipe  # how every network is trained from scratch
    out: str | Path  # the comparison's folder
    n_random: int = 5  # random sub-networks of the searched network's budget
    data: str | None = None  # image folder (None: scikit-learn's digits)
    seed: int = 0  # sampling and the first training seed
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


@dataclass(frozen=True)
class _Prepared:
    """Everything checked and built before the comparison's folder is touched."""

    config: CompareRunConfig
    num_classes: int
    table: LatencyTable | None
    cost: Any
    supernet_spec: EvalSpec | None
    supernet_context: dict


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
        objective, networks = _saved_plan(folder, saved)
    else:
        objective, networks = _plan(request, prepared.cost)
    plan = {
        "objective": {"name": objective.name, "target": objective.target},
        "networks": [{"name": n, "arch": a.to_dict(), "digest": a.digest} for n, a in networks],
    }
    with folder.start(prepared.config, request.resume, plan):
        for name, arch in networks:  # written again on resume: a run killed before it wrote them has them
            arch.save(folder.path / "archs" / f"{name}.yaml")
        return _train_and_report(request, prepared, folder, objective, networks)


def _check_request(request: CompareRequest) -> None:
    """The settings alone, before anything is read."""
    request.space.validate(request.searched, where=request.searched_label or "searched arch")
    Objective(request.objective, 1.0)  # an unknown objective fails before anything else
    require_table(request.objective, request.device)
    if request.n_random < 1:
        raise NasError(f"--random must be at least 1, got {request.n_random}")
    if request.seeds < 1:
        raise NasError(f"--seeds must be at least 1, got {request.seeds}")
    if not 0 < request.tolerance < 1:
        raise NasError(f"--tolerance must be between 0 and 1, got {request.tolerance}")


def _prepare(request: CompareRequest) -> _Prepared:
    """Read and check the data, the supernet run and the table; the comparison's config."""
    space = request.space
    splits = load_splits(request.data, request.recipe, request.seed, hold_out_search=False)  # bad data fails here
    num_classes = splits.num_classes
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
    img_size = price_size(request.img_size, _recorded_img_size(request), supernet_size or trained_here)
    warn_if_apart(img_size, trained_here, "the networks train and are scored", "the comparison")
    table = keep(table_for(request.device, space, img_size)) if request.device else None
    cost = cost_function(table, img_size, num_classes)  # the budget
    config = CompareRunConfig(
        searched=request.searched.to_dict(),
        searched_digest=request.searched.digest,
        space=space.name,
        random=request.n_random,
        objective=request.objective,
        tolerance=request.tolerance,
        device=request.device,
        img_size=img_size,
        data=request.data,
        seed=request.seed,
        recipe=request.recipe,
        recipe_name=request.recipe_name,
        max_steps=request.max_steps,
        data_fingerprint=data_fingerprint(request.data),
        table_digest=file_digest(table.path) if table is not None else None,
        supernet=request.supernet,
        supernet_digest=supernet_context.get("supernet_digest"),
        bn_calib_batches=supernet_context.get("bn_calib_batches"),
        seeds=request.seeds,
    )
    return _Prepared(config, num_classes, table, cost, supernet_spec, supernet_context)


def _recorded_img_size(request: CompareRequest) -> int | None:
    """The pricing size a comparison to be resumed recorded in ``plan.json`` (None: none, or unreadable)."""
    path = Path(request.out) / "plan.json"
    if not (request.resume and path.exists()):
        return None
    try:
        size = json.loads(path.read_text(encoding="utf-8"))["config"]["img_size"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # the resume check says what is wrong with it
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def _plan(request: CompareRequest, cost) -> tuple[Objective, list[tuple[str, ArchConfig]]]:
    """The budget (the searched network's own) and the networks: the searched one, then the random ones."""
    searched = request.searched
    target = Objective(request.objective, 1.0).value(cost(searched))
    objective = Objective(request.objective, target)
    randoms = sample_within_budget(
        request.space,
        request.n_random,
        objective,
        cost,
        random.Random(request.seed),
        request.tolerance,
        exclude={searched.digest},
    )
    return objective, [("searched", searched)] + [(f"random-{i}", a) for i, a in enumerate(randoms)]


def _saved_plan(folder: RunFolder, saved: dict) -> tuple[Objective, list[tuple[str, ArchConfig]]]:
    """The budget and networks of the plan a resumed comparison recorded."""
    try:
        objective = Objective(saved["objective"]["name"], saved["objective"]["target"])
        return objective, [(n["name"], ArchConfig.from_dict(n["arch"])) for n in saved["networks"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise folder.corrupt(exc) from None


def _train_and_report(
    request: CompareRequest,
    prepared: _Prepared,
    folder: RunFolder,
    objective: Objective,
    networks: list[tuple[str, ArchConfig]],
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
        "sources": _sources(
            config, objective, request.space, prepared.table, request.recipe, trained[0], prepared.num_classes
        ),
        "summary": searched_vs_random(rows, config.seed, with_supernet=bool(config.supernet)),
        "provenance": {
            **clock.summary(),
            "network_wall_seconds": round(sum(r.get("provenance", {}).get("wall_seconds", 0.0) for r in trained), 1),
        },
    }
    write_text_atomic(out / "compare.csv", to_csv(rows))
    write_text_atomic(out / "compare.md", to_markdown(result))
    _plot(rows, prepared.table is not None, out / "compare.png", objective)
    folder.write_result(result)
    return result


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
        "head",
        "resolution": resolution_words(config.img_size, recipe.img_size),
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
