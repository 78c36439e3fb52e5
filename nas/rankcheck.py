"""``nas rank-check``: does the supernet rank sub-networks as training them from scratch does?

A search is only as good as its supernet's ranking. The study draws ``n`` sub-networks spread over
the whole budget range (evenly spaced quantiles of parameters, or of latency with a table, among
many uniform draws: not one narrow band), scores each with the supernet weights (what a search sees)
and trains each from scratch with a short recipe, then compares rankings: Kendall's tau and
Spearman's rho with bootstrap intervals (networks resampled) and top-k overlap, for the supernet and
for rankings that cost nothing: parameters, MACs, predicted latency and two zero-cost proxies at
initialisation, SynFlow (Tanaka et al. 2020) and the gradient norm of one batch (Abdelfattah et al.
2021). The supernet earns its training only where its tau is clearly above theirs.

The short recipe is itself a proxy: with ``full_recipe``, ``full_n`` of the networks, evenly spaced
over the budget range, are also trained with it, and the tau between the short and the full ranking
is reported.

One output folder: ``plan.json`` (the networks, fixed before any training), ``runs/<name>/`` and
``runs-full/<name>/`` (``nas train`` runs), ``supernet_evaluations.jsonl``, ``proxies.json``,
``rank.md``, ``rank.csv`` and ``result.json``. ``resume`` continues it.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nas.checkpoint import file_digest, load_checkpoint
from nas.compare import supernet_accuracies, train_all, train_images_words
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import write_text_atomic
from nas.data import data_fingerprint, eval_loader, load_splits
from nas.latency import LatencyTable
from nas.metrics import count_macs
from nas.provenance import RunClock
from nas.recipe import Recipe
from nas.reports import write_csv, write_json
from nas.runconfig import (
    RankCheckRunConfig,
    as_dict,
    require_resumable,
    run_config_from,
)
from nas.runlock import RunLock
from nas.search.evaluator import SUPERNET_KEYS, EvalSpec
from nas.search.objective import cost_function
from nas.space import load_space
from supernets import build_static


def spread_sample(space: SearchSpace, n: int, key, rng: random.Random, pool_factor: int = 50) -> list[ArchConfig]:
    """``n`` distinct sub-networks at evenly spaced quantiles of ``key`` among ``pool_factor * n``
    uniform draws (and the largest and smallest networks): the whole range, not one band."""
    pool = {
        a.digest: a for a in [space.sample(rng) for _ in range(pool_factor * n)] + [space.largest(), space.smallest()]
    }
    ordered = sorted(pool.values(), key=lambda a: (key(a), a.digest))
    if len(ordered) < n:
        raise NasError(
            f"space {space.name} has only {len(ordered)} distinct sub-networks in {pool_factor * n} draws; "
            f"lower -n below {len(ordered) + 1}"
        )
    picks = np.unique(np.round(np.linspace(0, len(ordered) - 1, n)).astype(int))
    chosen = [ordered[i] for i in picks]
    rest = [a for i, a in enumerate(ordered) if i not in set(picks.tolist())]
    while len(chosen) < n:  # rounding collided: fill from the remaining draws, in order
        chosen.append(rest.pop(len(rest) // 2))
    return sorted(chosen, key=lambda a: (key(a), a.digest))


def spread_indices(n: int, k: int) -> list[int]:
    """``k`` of ``range(n)`` evenly spaced from the first to the last: the networks (in budget order)
    that a longer recipe checks the short one on, so the check spans the range the study does."""
    if k <= 0:
        return []
    if k == 1:
        return [n // 2]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def synflow(model: torch.nn.Module, img_size: int) -> float:
    """SynFlow at initialisation: sum of |θ · ∂R/∂θ| with R the output sum of the network with all
    parameters made positive, on an all-ones input (double precision; BatchNorm in eval mode)."""
    model = model.double().eval()
    signs = {}
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if p.is_floating_point():
                signs[name] = torch.sign(p)
                p.abs_()
    model.zero_grad()
    out = model(torch.ones(1, 3, img_size, img_size, dtype=torch.float64))
    out = out[0] + out[1] if isinstance(out, tuple) else out
    out.sum().backward()
    score = sum(float((p.detach() * p.grad).abs().sum()) for p in model.parameters() if p.grad is not None)
    return float(np.log10(score)) if score > 0 else float("-inf")


def grad_norm(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Sum of the per-parameter gradient L2 norms of the cross-entropy of one batch, at initialisation."""
    model = model.float().train()
    model.zero_grad()
    out = model(images)
    out = (out[0] + out[1]) / 2 if isinstance(out, tuple) else out
    torch.nn.functional.cross_entropy(out, labels).backward()
    return float(sum(p.grad.norm() for p in model.parameters() if p.grad is not None))


def zero_cost_proxies(
    archs: list[ArchConfig], recipe: Recipe, data: str | None, seed: int, num_classes: int, out: Path
) -> list[dict[str, float]]:
    """SynFlow and gradient norm of each arch's freshly initialised static network (seeded),
    cached in ``out/proxies.json``."""

    path = out / "proxies.json"
    cached = json.loads(path.read_text()) if path.exists() else {}
    todo = [a for a in archs if a.digest not in cached]
    if todo:
        splits = load_splits(data, recipe, seed)
        batch = next(iter(eval_loader(splits.train, recipe, list(range(min(64, len(splits.train)))))))
        for arch in todo:
            torch.manual_seed(seed)
            net = build_static(arch, img_size=recipe.img_size, num_classes=num_classes)
            grads = grad_norm(net, *batch)
            torch.manual_seed(seed)
            net = build_static(arch, img_size=recipe.img_size, num_classes=num_classes)
            cached[arch.digest] = {"synflow": synflow(net, recipe.img_size), "grad_norm": grads}
        write_json(path, cached)
    return [cached[a.digest] for a in archs]


def rank_stats(
    proxy: list[float], truth: list[float], seed: int = 0, replicates: int = 2000, top_fraction: float = 0.25
) -> dict[str, Any]:
    """Kendall's tau and Spearman's rho of ``proxy`` against ``truth`` with 95% bootstrap intervals
    (networks resampled), and the overlap of their top ``top_fraction``."""
    from scipy.stats import kendalltau, spearmanr

    x, y = np.asarray(proxy, dtype=float), np.asarray(truth, dtype=float)
    rng = np.random.default_rng(seed)
    taus, rhos = [], []
    for _ in range(replicates):
        idx = rng.integers(0, len(x), len(x))
        if len(set(x[idx])) > 1 and len(set(y[idx])) > 1:
            taus.append(kendalltau(x[idx], y[idx]).statistic)
            rhos.append(spearmanr(x[idx], y[idx]).statistic)
    k = max(1, int(round(top_fraction * len(x))))
    top = len(set(np.argsort(-x)[:k]) & set(np.argsort(-y)[:k])) / k
    return {
        "kendall_tau": _finite(kendalltau(x, y).statistic),
        "kendall_tau_ci": _ci(taus),
        "spearman_rho": _finite(spearmanr(x, y).statistic),
        "spearman_rho_ci": _ci(rhos),
        f"top{k}_overlap": top,
    }


def tau_difference(
    first: list[float], second: list[float], truth: list[float], seed: int = 0, replicates: int = 2000
) -> dict[str, Any]:
    """Kendall's tau of ``first`` minus that of ``second`` (both against ``truth``), with a 95%
    paired bootstrap interval: each replicate resamples the networks once for both rankings. Two
    rankings of the same networks share their noise, so their difference is known far better than
    their separate intervals suggest."""
    from scipy.stats import kendalltau

    a, b, y = (np.asarray(v, dtype=float) for v in (first, second, truth))
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(replicates):
        idx = rng.integers(0, len(y), len(y))
        if min(len(set(a[idx])), len(set(b[idx])), len(set(y[idx]))) > 1:
            diffs.append(kendalltau(a[idx], y[idx]).statistic - kendalltau(b[idx], y[idx]).statistic)
    tau_a, tau_b = kendalltau(a, y).statistic, kendalltau(b, y).statistic
    return {"difference": _finite(tau_a - tau_b), "ci": _ci(diffs)}


def _finite(value: float) -> float | None:
    return None if value != value else float(value)


def _ci(values: list[float]) -> list[float] | None:
    values = [v for v in values if v == v]
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if values else None


def rank_check(
    supernet_run: str | Path,
    n: int,
    recipe: Recipe,
    out: str | Path,
    data: str | None = None,
    device: str | None = None,
    img_size: int = 224,
    seed: int = 0,
    workers: int = 0,
    ray_address: str | None = None,
    threads_per_worker: int = 1,
    resume: bool = False,
    max_steps: int | None = None,
    full_recipe: Recipe | None = None,
    full_n: int = 0,
    bn_calib_batches: int | None = None,
    recipe_name: str = "",
    scratch_from: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run (or continue) the ranking study of ``supernet_run`` in ``out``.

    ``scratch_from`` names a finished study of the same networks, recipes, data and seed: its
    from-scratch trainings are reused and only the supernet is scored, so supernet variants (another
    training recipe, another BatchNorm calibration) are ranked against one ground truth at the cost
    of their own scoring."""
    if n < 4:
        raise NasError(f"-n must be at least 4 for a ranking, got {n}")
    if not 0 <= full_n <= n or (full_n and full_recipe is None):
        raise NasError(f"--full-n must be between 0 and -n ({n}) and needs --full-recipe, got {full_n}")
    spec = EvalSpec.from_run(supernet_run, bn_calib_batches)
    space = load_space(spec.space)
    load_checkpoint(spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS, mmap=True)
    data = spec.data if data is None else data
    splits = load_splits(data, recipe, seed, hold_out_search=False)  # bad data fails before any folder
    num_classes = splits.num_classes
    del splits
    table = LatencyTable.load(device, space, img_size) if device else None
    cost = cost_function(table, img_size, num_classes)
    context = spec.context()
    config = RankCheckRunConfig(
        space=space.name,
        n=n,
        device=device,
        img_size=img_size,
        data=data,
        seed=seed,
        recipe=recipe,
        supernet=str(supernet_run),
        supernet_digest=context["supernet_digest"],
        bn_calib_batches=context["bn_calib_batches"],
        data_fingerprint=data_fingerprint(data),
        table_digest=file_digest(table.path) if table is not None else None,
        max_steps=max_steps,
        full_recipe=full_recipe,
        full_n=full_n,
        recipe_name=recipe_name,
        scratch_from=str(scratch_from or ""),
    )
    out = Path(out)
    plan_path = out / "plan.json"
    reused = _reused_networks(Path(scratch_from), config) if scratch_from else None
    # Read before any folder is made: a study that cannot be reused leaves nothing behind.
    recorded = (
        _recorded_trainings(Path(scratch_from), reused, spread_indices(n, full_n)) if reused is not None else None
    )
    if resume:
        if not plan_path.exists():
            raise NasError(f"{out}: nothing to resume (no plan.json)")
        saved = json.loads(plan_path.read_text(encoding="utf-8"))
        require_resumable(run_config_from(saved["config"], plan_path, RankCheckRunConfig), config, plan_path)
        archs = [ArchConfig.from_dict(a) for a in saved["networks"]]
    elif plan_path.exists():
        raise NasError(f"{out} already holds a ranking study; pass --resume to continue it or choose another --out")
    elif reused is not None:
        archs = reused
    else:
        key = (lambda a: cost(a).latency_ms) if table is not None else (lambda a: cost(a).params)
        archs = spread_sample(space, n, key, random.Random(seed))
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out, "rank-check"):
        if not resume:
            write_text_atomic(
                plan_path,
                json.dumps({"config": as_dict(config), "networks": [a.to_dict() for a in archs]}, indent=1) + "\n",
            )
        return _study(
            out,
            config,
            space,
            archs,
            cost,
            num_classes,
            spec,
            context,
            workers,
            ray_address,
            threads_per_worker,
            progress,
            RunClock(out, resume),
            recorded,
        )


#: What must match for a study's from-scratch trainings to stand for another's (``scratch_from``).
SCRATCH_KEYS = ("space", "n", "data_fingerprint", "seed", "recipe", "full_recipe", "full_n", "max_steps")


def _reused_networks(study: Path, config: RankCheckRunConfig) -> list[ArchConfig]:
    """The networks of the finished study in ``study``, after checking that its trainings are the
    ones ``config`` asks for."""
    plan_path = study / "plan.json"
    if not plan_path.exists() or not (study / "result.json").exists():
        raise NasError(f"--scratch-from {study}: not a finished ranking study (no plan.json and result.json)")
    saved = json.loads(plan_path.read_text(encoding="utf-8"))
    earlier = run_config_from(saved["config"], plan_path, RankCheckRunConfig)
    for key in SCRATCH_KEYS:
        if getattr(earlier, key) != getattr(config, key):
            raise NasError(
                f"--scratch-from {study}: its {key} differs ({getattr(earlier, key)!r} there, "
                f"{getattr(config, key)!r} here); a reused training must be the one this study would run"
            )
    if earlier.scratch_from:
        raise NasError(f"--scratch-from {study}: it reuses {earlier.scratch_from} itself; name that study")
    return [ArchConfig.from_dict(a) for a in saved["networks"]]


def _recorded_trainings(study: Path, archs: list[ArchConfig], checked: list[int]) -> tuple[list, list, str]:
    """The from-scratch top-1 of every network (and of the longer recipe's ``checked`` ones) as the
    finished ``study`` recorded them in its result.json, with its description of them: a committed
    study keeps its results but not its training runs, and its numbers are the ground truth reused."""
    try:
        earlier = json.loads((study / "result.json").read_text(encoding="utf-8"))
        rows, source = earlier["rows"], earlier["sources"]["from scratch"]
        digests = [r["digest"] for r in rows]
        short = [{"top1": float(r["scratch_top1"])} for r in rows]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise NasError(f"--scratch-from {study}: result.json is not a ranking study's result ({error!r})") from None
    if digests != [a.digest for a in archs]:
        raise NasError(f"--scratch-from {study}: its result.json does not list the networks of its plan.json")
    missing = [f"net-{i:02d}" for i in checked if rows[i].get("full_top1") is None]
    if missing:
        raise NasError(f"--scratch-from {study}: no longer recipe's top-1 recorded for {', '.join(missing)}")
    full = [{"top1": float(rows[i]["full_top1"])} for i in checked]
    return short, full, f"{source}, recorded by {study}"


def _study(
    out: Path,
    config: RankCheckRunConfig,
    space: SearchSpace,
    archs: list[ArchConfig],
    cost,
    num_classes: int,
    spec: EvalSpec,
    context: dict,
    workers: int,
    ray_address: str | None,
    threads_per_worker: int,
    progress: bool,
    clock: RunClock,
    recorded: tuple[list, list, str] | None,
) -> dict[str, Any]:
    """The study itself; ``recorded`` is a reused study's from-scratch results, which it does not train."""
    names = [f"net-{i:02d}" for i in range(len(archs))]

    def jobs(recipe: Recipe, folder: str, indices: list[int], max_steps: int | None) -> list[dict]:
        return [
            {
                "name": names[i],
                "arch": archs[i].to_dict(),
                "recipe": asdict(recipe),
                "data": config.data,
                "run": str(out / folder / names[i]),
                "seed": config.seed,
                "max_steps": max_steps,
                "space": space.name,
                "progress": progress,
            }
            for i in indices
        ]

    checked = spread_indices(len(archs), config.full_n)
    if recorded is not None:
        short, full, scratch_source = recorded
    else:
        everything = list(range(len(archs)))
        short = train_all(
            jobs(config.recipe, "runs", everything, config.max_steps), workers, ray_address, threads_per_worker, clock
        )
        full = (
            train_all(
                jobs(config.full_recipe, "runs-full", checked, config.max_steps),
                workers,
                ray_address,
                threads_per_worker,
                clock,
            )
            if config.full_n
            else []
        )
        first = short[0]
        scratch_source = (
            f"top-1 on {first['val']} ({first['val_images']} images) after {first['step']} steps on "
            f"{train_images_words(first, config.recipe)} with recipe {config.recipe_name or 'custom'} "
            f"(seed {config.seed}); data: {config.data or 'scikit-learn digits'}"
        )
    supernet = supernet_accuracies(spec, context, archs, out)
    proxies = zero_cost_proxies(archs, config.recipe, config.data, config.seed, num_classes, out)
    rows = []
    for name, arch, trained, sup, zc in zip(names, archs, short, supernet, proxies):
        c = cost(arch)
        rows.append(
            {
                "network": name,
                "scratch_top1": trained["top1"],
                "supernet_top1": sup,
                "params": c.params,
                "macs": count_macs(arch, config.img_size, num_classes),
                "latency_ms": c.latency_ms,
                "mes": c.mes,
                **zc,
                "digest": arch.digest,
                "arch": arch.to_dict(),
            }
        )
    truth = [r["scratch_top1"] for r in rows]
    rankers = {
        "supernet": [r["supernet_top1"] for r in rows],
        "params": [r["params"] for r in rows],
        "macs": [r["macs"] for r in rows],
        "synflow": [r["synflow"] for r in rows],
        "grad_norm": [r["grad_norm"] for r in rows],
    }
    if rows[0]["latency_ms"] is not None:
        rankers["latency"] = [r["latency_ms"] for r in rows]
    stats = {name: rank_stats(values, truth, seed=config.seed) for name, values in rankers.items()}
    for name, values in rankers.items():
        if name != "supernet":
            stats[name]["supernet_minus_tau"] = tau_difference(rankers["supernet"], values, truth, seed=config.seed)
    result: dict[str, Any] = {
        "space": space.name,
        "supernet": config.supernet,
        "n": len(rows),
        "rows": rows,
        "rankings": stats,
    }
    if full:
        result["short_vs_full"] = {
            "n": len(full),
            "networks": [names[i] for i in checked],
            **rank_stats([truth[i] for i in checked], [r["top1"] for r in full], seed=config.seed),
        }
        for row, trained in zip([rows[i] for i in checked], full):
            row["full_top1"] = trained["top1"]
    result["sources"] = {
        "from scratch": scratch_source,
        "supernet": f"top-1 with the weights of {config.supernet}, BatchNorm recalibrated "
        f"({config.bn_calib_batches} batches), on its search split",
        "proxies": "params, MACs exact; latency from the table named in the config; SynFlow (log10) and the "
        "gradient norm of one batch of training images at a seeded initialisation",
        "intervals": "95% bootstrap over the networks (2000 replicates)",
    }
    result["provenance"] = clock.summary()
    write_csv(out / "rank.csv", rows, CSV_FIELDS)
    write_text_atomic(out / "rank.md", to_markdown(result))
    write_json(out / "result.json", result)
    return result


CSV_FIELDS = (
    "network",
    "scratch_top1",
    "full_top1",
    "supernet_top1",
    "params",
    "macs",
    "latency_ms",
    "mes",
    "synflow",
    "grad_norm",
    "digest",
)


def _interval(ci: list[float] | None) -> str:
    return "-" if ci is None else f"{ci[0]:+.2f} to {ci[1]:+.2f}"


def ranking_lines(result: dict) -> list[str]:
    """The rankings against from-scratch training as a Markdown table (also what the CLI prints)."""
    lines = [
        "| ranking by | Kendall's tau | 95% CI | Spearman's rho | 95% CI | top-k overlap | "
        "supernet's tau minus this (paired 95% CI) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in result["rankings"].items():
        top = next(v for k, v in s.items() if k.startswith("top") and k.endswith("_overlap"))
        tau = "-" if s["kendall_tau"] is None else f"{s['kendall_tau']:+.2f}"
        rho = "-" if s["spearman_rho"] is None else f"{s['spearman_rho']:+.2f}"
        diff = s.get("supernet_minus_tau")
        gap = (
            "-"
            if diff is None or diff["difference"] is None
            else f"{diff['difference']:+.2f} ({_interval(diff['ci'])})"
        )
        lines.append(
            f"| {name} | {tau} | {_interval(s['kendall_tau_ci'])} | {rho} | "
            f"{_interval(s['spearman_rho_ci'])} | {top:.2f} | {gap} |"
        )
    if "short_vs_full" in result:
        s = result["short_vs_full"]
        lines.append(
            f"| short recipe vs full recipe ({s['n']} networks) | "
            f"{'-' if s['kendall_tau'] is None else format(s['kendall_tau'], '+.2f')} | "
            f"{_interval(s['kendall_tau_ci'])} | "
            f"{'-' if s['spearman_rho'] is None else format(s['spearman_rho'], '+.2f')} | "
            f"{_interval(s['spearman_rho_ci'])} | - | - |"
        )
    return lines


def to_markdown(result: dict) -> str:
    """``rank.md``: every ranking against the from-scratch one, then one row per network."""
    lines = [
        f"# Ranking study of supernet `{result['supernet']}` ({result['space']}, {result['n']} networks)",
        "",
        "Each ranking against the from-scratch ranking:",
        "",
        *ranking_lines(result),
        "",
        "| network | from scratch (%) | supernet (%) | params (M) | MACs (M) | latency (ms) | SynFlow | grad norm |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lat = "-" if r["latency_ms"] is None else f"{r['latency_ms']:.3f}"
        lines.append(
            f"| {r['network']} | {100 * r['scratch_top1']:.2f} | {100 * r['supernet_top1']:.2f} | "
            f"{r['params'] / 1e6:.3f} | {r['macs'] / 1e6:.1f} | {lat} | {r['synflow']:.2f} | "
            f"{r['grad_norm']:.3g} |"
        )
    lines += ["", "Where the numbers come from:", ""] + [f"- {k}: {v}" for k, v in result["sources"].items()]
    return "\n".join(lines) + "\n"
