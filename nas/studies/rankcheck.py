"""``nas rank-check``: does the supernet rank sub-networks as training them from scratch does?

A search is only as good as its supernet's ranking. The study draws ``n`` sub-networks spread over
the whole budget range (evenly spaced quantiles of parameters, or of latency with a table, among
many uniform draws: not one narrow band), scores each with the supernet weights (what a search sees)
and trains each from scratch with a short recipe, then compares rankings: Kendall's tau and
Spearman's rho with Fisher-z intervals and top-k overlap, for the supernet and
for rankings that cost nothing: parameters, MACs, predicted latency and two zero-cost proxies at
initialisation, SynFlow (Tanaka et al. 2020) and the gradient norm of one batch (Abdelfattah et al.
2021; :mod:`nas.studies.zero_cost`). The supernet earns its training only where its tau is clearly above theirs.

The short recipe is itself a proxy: with ``full_recipe``, ``full_n`` of the networks, evenly spaced
over the budget range, are also trained with it, and the tau between the short and the full ranking
is reported.

One output folder: ``plan.json`` (the networks, fixed before any training), ``runs/<name>/`` and
``runs-full/<name>/`` (``nas train`` runs), ``supernet_evaluations.jsonl``, ``proxies.json``,
``rank.md``, ``rank.csv`` and ``result.json``. ``resume`` continues it.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.config.recipe import Recipe
from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.latency import LatencyTable
from nas.metrics import count_macs
from nas.runs.checkpoint import file_digest
from nas.runs.config import CompareRunConfig, RankCheckRunConfig, run_config_from
from nas.runs.folder import PLAN, RANKING, RunFolder
from nas.runs.provenance import RunClock
from nas.runs.writers import write_csv, write_json
from nas.search.evaluator import EvalSpec
from nas.search.input_size import input_size_words
from nas.search.sample import spread_indices, spread_sample
from nas.search.supernet_run import SupernetRun
from nas.studies.stats import RANKING_METHOD, rank_stats, rankings_against
from nas.studies.trainings import (
    TrainingPool,
    price_networks,
    read_data_identity,
    read_finished_result,
    supernet_accuracies,
    train_all,
    train_images_words,
)
from nas.studies.zero_cost import zero_cost_proxies
from nas.train.fixed import FixedTrainingRequest


@dataclass(frozen=True)
class RankCheckRequest:
    """What ``nas rank-check`` is asked to do (the CLI's flags, as one object)."""

    supernet: str | Path  # run folder of `nas train-supernet`
    recipe: Recipe  # the short from-scratch recipe
    out: str | Path  # the study's folder
    n: int = 20  # sub-networks
    data: str | None = None  # image folder (None: the supernet's data)
    device: str | None = None  # latency table device (adds the latency ranking; spreads by latency)
    img_size: int | None = None  # input size latency and MACs are priced at (None: the supernet's training size)
    seed: int = 0
    full_recipe: Recipe | None = None  # a longer recipe to check the short one on ``full_n`` networks
    full_n: int = 0
    bn_calib_batches: int | None = None  # the supernet's BatchNorm calibration (None: its recipe's)
    # reuse the from-scratch results of this finished ranking study, or of these finished comparisons
    scratch_from: str | Path | tuple[str | Path, ...] | None = None
    pool: TrainingPool = TrainingPool()  # where the networks train
    resume: bool = False
    max_steps: int | None = None  # stop every training after this many steps (smoke runs)
    recipe_name: str = ""  # how the user named the recipe (for the sources)
    progress: bool = True


@dataclass(frozen=True)
class PreparedRankCheck:
    """Everything a ranking study checks and builds before its folder is touched."""

    config: RankCheckRunConfig
    space: SearchSpace
    spec: EvalSpec
    context: dict
    num_classes: int
    table: LatencyTable | None
    cost: Any


def rank_check(request: RankCheckRequest) -> dict[str, Any]:
    """Run (or continue) the ranking study of ``request.supernet`` in ``request.out``.

    ``scratch_from`` names a finished study of the same networks, recipes, data and seed: its
    from-scratch trainings are reused and only the supernet is scored, so supernet variants (another
    training recipe, another BatchNorm calibration) are ranked against one ground truth at the cost
    of their own scoring."""
    sources = _scratch_sources(request.scratch_from)
    compared = read_compared(sources) if sources and _plan_command(sources[0]) == "compare" else None
    if compared is not None:  # the comparisons' networks, trained with their recipe and seeds: nothing to train
        request = dataclasses.replace(
            request,
            n=len(compared.archs),
            recipe=compared.recipe,
            recipe_name=compared.recipe_name,
            seed=compared.seed,
            data=compared.data if request.data is None else request.data,
            full_recipe=None,
            full_n=0,
            max_steps=compared.max_steps,
        )
    elif len(sources) > 1:
        raise NasError("--scratch-from takes one ranking study, or one or more comparisons (`nas compare` folders)")
    n, full_n = request.n, request.full_n
    if n < 4:
        raise NasError(f"-n must be at least 4 for a ranking, got {n}")
    if not 0 <= full_n <= n or (full_n and request.full_recipe is None):
        raise NasError(f"--full-n must be between 0 and -n ({n}) and needs --full-recipe, got {full_n}")
    folder = RunFolder(request.out, RANKING)  # opened once: _prepare reads the size a resumed study recorded
    prepared = _prepare(request, folder, sources, compared is not None)
    config = prepared.config
    # Read before any folder is made: a study that cannot be reused leaves nothing behind.
    if compared is not None:
        if compared.data_fingerprint != config.data_fingerprint:
            raise NasError(
                f"--scratch-from {sources[0]}: its networks trained on other images (data fingerprint "
                f"{compared.data_fingerprint}, here {config.data_fingerprint}); pass the --data they trained on"
            )
        reused = compared.archs
        recorded = Recorded(compared.top1, [], compared.source, compared.names, compared.supernet_scores)
    elif sources:
        reused = _reused_networks(sources[0], config)
        short, full, source = _recorded_trainings(sources[0], reused, spread_indices(n, full_n))
        recorded = Recorded(short, full, source)
    else:
        reused = recorded = None
    saved = folder.check(config, request.resume)
    if saved is not None:
        try:
            archs = [ArchConfig.from_dict(a) for a in saved["networks"]]
        except (KeyError, TypeError) as exc:
            raise folder.corrupt(exc) from None
    elif reused is not None:
        archs = reused
    else:
        cost = prepared.cost
        key = (lambda a: cost(a).latency_ms) if prepared.table is not None else (lambda a: cost(a).params)
        archs = spread_sample(prepared.space, n, key, random.Random(request.seed))
    with folder.start(config, request.resume, {"networks": [a.to_dict() for a in archs]}):
        return _study(request, prepared, folder, archs, recorded)


def _prepare(
    request: RankCheckRequest, folder: RunFolder, sources: tuple[Path, ...], compared: bool
) -> PreparedRankCheck:
    """Read and check the supernet run, the data and the table; the study's config (``sources``: the ranking study,
    or with ``compared`` the comparisons, whose trainings it reuses)."""
    supernet = SupernetRun.read(request.supernet)
    spec, space = supernet.eval_spec(request.bn_calib_batches), supernet.space
    data = spec.data if request.data is None else request.data
    num_classes, fingerprint = read_data_identity(data, request.recipe, request.seed)
    # Priced where the supernet scores (as its search priced), else where the networks train; a resumed study
    # keeps the size it recorded. Costs priced elsewhere rank a budget the networks never pay.
    trained_here = request.recipe.img_size
    img_size, table, cost = price_networks(
        folder.recorded_setting("img_size", request.resume),
        request.img_size,
        supernet.img_size,
        trained_here,
        request.device,
        space,
        num_classes,
        "the ranking study",
    )
    context = spec.context()
    config = RankCheckRunConfig(
        space=space.name,
        n=request.n,
        device=request.device,
        img_size=img_size,
        data=data,
        seed=request.seed,
        recipe=request.recipe,
        supernet=str(request.supernet),
        supernet_digest=context["supernet_digest"],
        bn_calib_batches=context["bn_calib_batches"],
        data_fingerprint=fingerprint,
        table_digest=file_digest(table.path) if table is not None else None,
        max_steps=request.max_steps,
        full_recipe=request.full_recipe,
        full_n=request.full_n,
        recipe_name=request.recipe_name,
        scratch_from=str(sources[0]) if sources and not compared else "",
        compared_from=tuple(str(p) for p in sources) if compared else (),
    )
    return PreparedRankCheck(config, space, spec, context, num_classes, table, cost)


@dataclass(frozen=True)
class Recorded:
    """From-scratch results a study reuses instead of training: each network's top-1 (``short``; ``full``: the
    longer recipe's, of the checked ones) and where they come from; from comparisons also the networks' names and,
    where one supernet scored them all there, its recorded scores and which supernet that was."""

    short: list[dict]
    full: list[dict]
    source: str
    names: tuple[str, ...] = ()
    supernet: tuple[list[float], str] | None = None


@dataclass(frozen=True)
class ComparedNetworks:
    """The distinct networks that finished comparisons trained, as a ranking study's ground truth."""

    archs: list[ArchConfig]
    names: tuple[str, ...]
    top1: list[dict]  # {"top1": mean over the network's training seeds}
    source: str
    recipe: Recipe
    recipe_name: str
    seed: int
    data: str | None
    data_fingerprint: str
    max_steps: int | None
    supernet_scores: tuple[list[float], str] | None  # (scores, which supernet) where one supernet scored every one


def _scratch_sources(scratch_from: str | Path | tuple | list | None) -> tuple[Path, ...]:
    """``scratch_from`` as a tuple of folders (one, several or none)."""
    if scratch_from is None or scratch_from == "":
        return ()
    if isinstance(scratch_from, str | Path):
        return (Path(scratch_from),)
    return tuple(Path(p) for p in scratch_from)


def _plan_config(folder: Path) -> dict | None:
    """The run config its ``plan.json`` records, or None without a readable one."""
    try:
        config = json.loads((folder / PLAN).read_text(encoding="utf-8"))["config"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return config if isinstance(config, dict) else None


def _plan_command(folder: Path) -> str | None:
    """The ``command`` its ``plan.json`` records (``rank-check``, ``compare``...), or None without a readable one."""
    return (_plan_config(folder) or {}).get("command")


#: What every comparison a ranking study reads must share: their trainings are one ground truth.
COMPARED_KEYS = ("space", "recipe", "data_fingerprint", "seed", "max_steps")


def read_compared(folders: tuple[Path, ...]) -> ComparedNetworks:
    """Every distinct network (by digest) that the finished comparisons in ``folders`` trained (searched, named
    baselines and random), with its recorded top-1: where a network was trained in several, the comparison that
    trained it with the most seeds (the first of a tie). Its supernet scores are kept where one supernet (one
    digest) scored every network. A folder that is not a finished comparison, or comparisons trained another way
    (another space, recipe, data or seed), is one :class:`NasError`."""
    configs, results = [], []
    for folder in folders:
        plan = _plan_config(folder)
        if plan is None or plan.get("command") != "compare" or not (folder / "result.json").is_file():
            raise NasError(
                f"--scratch-from {folder}: not a finished comparison (plan.json of `nas compare` and result.json); "
                "--scratch-from takes one ranking study, or one or more comparisons"
            )
        configs.append(run_config_from(plan, folder / PLAN, CompareRunConfig))
        results.append(read_finished_result(folder, "comparison")[1])
    first = configs[0]
    for folder, config in zip(folders[1:], configs[1:]):
        for key in COMPARED_KEYS:
            if getattr(config, key) != getattr(first, key):
                raise NasError(
                    f"--scratch-from {folder}: its {key} differs from {folders[0]}'s; the comparisons a ranking "
                    "study reads must have trained their networks the same way"
                )
    kept: dict[str, tuple[str, dict]] = {}  # digest -> (name, row)
    scores: dict[str, dict[str, float]] = {}  # digest -> {supernet digest: its score}
    scorers: dict[str, str] = {}  # supernet digest -> the run folder the comparison named
    try:
        for folder, config, result in zip(folders, configs, results):
            for row in result["rows"]:
                digest = row["digest"]
                name = row["network"] if row["kind"] == "baseline" else f"{folder.name}/{row['network']}"
                if digest not in kept or len(row["top1_seeds"]) > len(kept[digest][1]["top1_seeds"]):
                    kept[digest] = (name, row)
                if row.get("supernet_top1") is not None and config.supernet_digest:
                    scores.setdefault(digest, {})[config.supernet_digest] = float(row["supernet_top1"])
                    scorers[config.supernet_digest] = str(config.supernet)
        archs = [ArchConfig.from_dict(row["arch"]) for _, row in kept.values()]
        top1 = [{"top1": float(row["top1"])} for _, row in kept.values()]
        accuracy = results[0]["sources"]["accuracy"]
    except (KeyError, TypeError, ValueError) as error:
        raise NasError(f"--scratch-from {folders[0]}: result.json is not a comparison's result ({error!r})") from None
    by = {d for per in scores.values() for d in per}
    supernet_scores = None
    if len(by) == 1 and set(scores) == set(kept):
        (digest,) = by
        supernet_scores = ([scores[d][digest] for d in kept], f"{scorers[digest]} (digest {digest})")
    source = (
        f"{accuracy}; as recorded by {len(folders)} comparison{'s' if len(folders) > 1 else ''} "
        f"({', '.join(str(f) for f in folders)}), each network's mean from the one that trained it with the most seeds"
    )
    return ComparedNetworks(
        archs=archs,
        names=tuple(name for name, _ in kept.values()),
        top1=top1,
        source=source,
        recipe=first.recipe,
        recipe_name=first.recipe_name,
        seed=first.seed,
        data=first.data,
        data_fingerprint=first.data_fingerprint,
        max_steps=first.max_steps,
        supernet_scores=supernet_scores,
    )


#: What must match for a study's from-scratch trainings to stand for another's (``scratch_from``).
SCRATCH_KEYS = ("space", "n", "data_fingerprint", "seed", "recipe", "full_recipe", "full_n", "max_steps")


def _reused_networks(study: Path, config: RankCheckRunConfig) -> list[ArchConfig]:
    """The networks of the finished study in ``study``, after checking that its trainings are the
    ones ``config`` asks for."""
    earlier_folder = RunFolder(study, RANKING)
    plan_path = earlier_folder.path / PLAN
    if not earlier_folder.started or not earlier_folder.finished:
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
        earlier = RunFolder(study, RANKING).read_result()
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
    request: RankCheckRequest,
    prepared: PreparedRankCheck,
    folder: RunFolder,
    archs: list[ArchConfig],
    recorded: Recorded | None,
) -> dict[str, Any]:
    """The study itself; ``recorded`` is a reused study's (or comparisons') from-scratch results, which it does not
    train."""
    config, out = prepared.config, folder.path
    clock = folder.clock(request.resume)
    names = list(recorded.names) if recorded and recorded.names else [f"net-{i:02d}" for i in range(len(archs))]
    checked = spread_indices(len(archs), config.full_n)
    if recorded is not None:
        short, full, scratch_source = recorded.short, recorded.full, recorded.source
    else:
        short, full = _train(request, prepared, out, names, archs, checked, clock)
        scratch_source = _scratch_source(config, short[0])
    supernet = supernet_accuracies(prepared.spec, prepared.context, archs, out)
    proxies = zero_cost_proxies(archs, config.recipe, config.data, config.seed, prepared.num_classes, out)
    rows = _rows(names, archs, short, supernet, proxies, prepared.cost, config.img_size, prepared.num_classes)
    if recorded is not None and recorded.supernet is not None:
        scores, scored_by = recorded.supernet
        for row, score in zip(rows, scores, strict=True):
            row["recorded_supernet_top1"] = score
    truth = [r["scratch_top1"] for r in rows]
    result: dict[str, Any] = {
        "space": prepared.space.name,
        "supernet": config.supernet,
        "n": len(rows),
        "rows": rows,
        "rankings": rankings_against(truth, rankers(rows)),
    }
    if full:
        result["short_vs_full"] = {
            "n": len(full),
            "networks": [names[i] for i in checked],
            **rank_stats([truth[i] for i in checked], [r["top1"] for r in full]),
        }
        for row, trained in zip([rows[i] for i in checked], full):
            row["full_top1"] = trained["top1"]
    result["sources"] = {
        "from scratch": scratch_source,
        "supernet": f"top-1 with the weights of {config.supernet}, BatchNorm recalibrated "
        f"({config.bn_calib_batches} batches), on its search split",
        **(
            {"recorded supernet": f"top-1 with the weights of {scored_by}, as the comparisons recorded it"}
            if recorded is not None and recorded.supernet is not None
            else {}
        ),
        "proxies": f"params, MACs exact at {config.img_size}x{config.img_size}; latency from the table named in the "
        "config; SynFlow (log10) and the gradient norm of one batch of training images at a seeded initialisation",
        "resolution": input_size_words(config.img_size, config.recipe.img_size),
        "intervals": RANKING_METHOD,
    }
    result["provenance"] = clock.summary()
    write_csv(out / "rank.csv", rows, CSV_FIELDS)
    write_text_atomic(out / "rank.md", to_markdown(result))
    folder.write_result(result)
    return result


def _train(
    request: RankCheckRequest,
    prepared: PreparedRankCheck,
    out: Path,
    names: list[str],
    archs: list[ArchConfig],
    checked: list[int],
    clock: RunClock,
) -> tuple[list[dict], list[dict]]:
    """Every network trained with the short recipe, and the ``checked`` ones with the full recipe."""
    config = prepared.config

    def jobs(recipe: Recipe, folder: str, indices: list[int]) -> list[FixedTrainingRequest]:
        return [
            FixedTrainingRequest(
                archs[i],
                recipe=recipe,
                data=config.data,
                run=out / folder / names[i],
                seed=config.seed,
                progress=request.progress,
                max_steps=config.max_steps,
                label=names[i],
                space=prepared.space.name,
            )
            for i in indices
        ]

    short = train_all(jobs(config.recipe, "runs", list(range(len(archs)))), request.pool, clock)
    full = train_all(jobs(config.full_recipe, "runs-full", checked), request.pool, clock) if config.full_n else []
    return short, full


def _scratch_source(config: RankCheckRunConfig, first: dict) -> str:
    """Where the from-scratch top-1 comes from, in words."""
    return (
        f"top-1 on {first['val']} ({first['val_images']} images) after {first['step']} steps on "
        f"{train_images_words(first, config.recipe)} with recipe {config.recipe_name or 'custom'} "
        f"(seed {config.seed}); data: {config.data or 'scikit-learn digits'}"
    )


def _rows(names, archs, short, supernet, proxies, cost, img_size: int, num_classes: int) -> list[dict]:
    """One row per network: its from-scratch and supernet top-1, its costs and its zero-cost proxies."""
    rows = []
    for name, arch, trained, sup, zc in zip(names, archs, short, supernet, proxies):
        c = cost(arch)
        rows.append(
            {
                "network": name,
                "scratch_top1": trained["top1"],
                "supernet_top1": sup,
                "params": c.params,
                "macs": count_macs(arch, img_size, num_classes),
                "latency_ms": c.latency_ms,
                "mes": c.mes,
                **zc,
                "digest": arch.digest,
                "arch": arch.to_dict(),
            }
        )
    return rows


def rankers(rows: list[dict]) -> dict[str, list[float]]:
    """Every ranking of the networks the study weighs against training them from scratch."""
    rankers = {
        "supernet": [r["supernet_top1"] for r in rows],
        "params": [r["params"] for r in rows],
        "macs": [r["macs"] for r in rows],
        "synflow": [r["synflow"] for r in rows],
        "grad_norm": [r["grad_norm"] for r in rows],
    }
    if rows[0]["latency_ms"] is not None:
        rankers["latency"] = [r["latency_ms"] for r in rows]
    if all(r.get("recorded_supernet_top1") is not None for r in rows):
        # the supernet that scored the comparisons a study ranks (another training of it, say): paired with this one
        rankers["recorded supernet"] = [r["recorded_supernet_top1"] for r in rows]
    return rankers


CSV_FIELDS = (
    "network",
    "scratch_top1",
    "full_top1",
    "supernet_top1",
    "recorded_supernet_top1",
    "params",
    "macs",
    "latency_ms",
    "mes",
    "synflow",
    "grad_norm",
    "digest",
)


def _interval(ci: list[float] | None) -> str:
    return "not estimable" if ci is None else f"{ci[0]:+.2f} to {ci[1]:+.2f}"


def rejudge(out: str | Path) -> dict[str, Any]:
    """Recompute a finished ranking study's statistics in ``out`` from its rows (no training, no
    scoring): ``rankings``, ``short_vs_full`` and the intervals' source in ``result.json``, and
    ``rank.md``, with the current :mod:`nas.studies.stats`."""
    out = Path(out)
    path, result = read_finished_result(out, "ranking study")
    try:
        rows = result["rows"]
        truth = [r["scratch_top1"] for r in rows]
        result["rankings"] = rankings_against(truth, rankers(rows))
        if "short_vs_full" in result:
            old = result["short_vs_full"]
            checked = [next(r for r in rows if r["network"] == name) for name in old["networks"]]
            result["short_vs_full"] = {
                "n": old["n"],
                "networks": old["networks"],
                **rank_stats([r["scratch_top1"] for r in checked], [r["full_top1"] for r in checked]),
            }
        result["sources"]["intervals"] = RANKING_METHOD
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        raise NasError(f"{path} is not a ranking study's result: {exc}") from None
    write_json(out / "result.json", result)
    write_text_atomic(out / "rank.md", to_markdown(result))
    return result


def stale(out: str | Path) -> bool:
    """Whether a finished ranking study's recorded rankings (taus, rhos and the paired differences, with their
    intervals) differ from what the current :mod:`nas.studies.stats` gives from its rows: True means :func:`rejudge`
    would change them."""
    path, result = read_finished_result(out, "ranking study")
    try:
        truth = [r["scratch_top1"] for r in result["rows"]]
        recorded, fresh = result["rankings"], rankings_against(truth, rankers(result["rows"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise NasError(f"{path} is not a ranking study's result: {exc}") from None
    return json.dumps(recorded) != json.dumps(fresh)


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
    recorded = "recorded supernet" in result["rankings"]
    lines = [
        f"# Ranking study of supernet `{result['supernet']}` ({result['space']}, {result['n']} networks)",
        "",
        "Each ranking against the from-scratch ranking:",
        "",
        *ranking_lines(result),
        "",
        "| network | from scratch (%) | supernet (%) |"
        + (" recorded supernet (%) |" if recorded else "")
        + " params (M) | MACs (M) | latency (ms) | SynFlow | grad norm |",
        "|---|---|---|" + ("---|" if recorded else "") + "---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lat = "-" if r["latency_ms"] is None else f"{r['latency_ms']:.3f}"
        then = f" {100 * r['recorded_supernet_top1']:.2f} |" if recorded else ""
        lines.append(
            f"| {r['network']} | {100 * r['scratch_top1']:.2f} | {100 * r['supernet_top1']:.2f} |{then} "
            f"{r['params'] / 1e6:.3f} | {r['macs'] / 1e6:.1f} | {lat} | {r['synflow']:.2f} | "
            f"{r['grad_norm']:.3g} |"
        )
    lines += ["", "Where the numbers come from:", ""] + [f"- {k}: {v}" for k, v in result["sources"].items()]
    return "\n".join(lines) + "\n"
