"""Which networks a comparison trains (:mod:`nas.studies.compare`): the searched one and random
sub-networks of its budget, drawn from a seed of their own (:func:`draw_seed`) or reused from another
comparison or pilot (``--random-from``, whose finished trainings are copied rather than repeated:
:func:`adopt_trainings`); and, on ``--resume``, the plan the comparison recorded."""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from nas.config.recipe import recipe_from_saved
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.runs.checkpoint import file_digest
from nas.runs.config import CompareRunConfig
from nas.runs.folder import PLAN, RunFolder
from nas.runs.writers import write_json
from nas.search.objective import CostFn, Objective
from nas.search.sample import sample_within_budget, within_budget
from nas.studies.trainings import seed_run_name
from nas.train.fixed import FixedTrainingRequest


def draw_seed(searched_digest: str, seed: int) -> int:
    """The seed a comparison draws its random networks from: a stable hash (SHA-256) of the searched
    network's digest and ``--seed``. Comparisons of different searched networks, or with different seeds,
    draw independent random networks; the same comparison run again draws the same ones."""
    return int.from_bytes(hashlib.sha256(f"{searched_digest}:{seed}".encode()).digest()[:4], "big")


def draw_groups(randoms: dict[str, Iterable[str]]) -> list[list[str]]:
    """Comparisons (name -> the digests of their random networks) grouped by shared draws: two comparisons
    that share any random network are in one group, and so are the comparisons linked through them. The
    groups, not the comparisons, are independent results; each group's names in the given order, the groups
    in the order of their first name."""
    names = list(randoms)
    parent = {name: name for name in names}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    owner: dict[str, str] = {}
    for name in names:
        for digest in randoms[name]:
            if digest in owner:
                a, b = sorted((root(owner[digest]), root(name)), key=names.index)
                parent[b] = a
            else:
                owner[digest] = name
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(root(name), []).append(name)
    return list(groups.values())


def reused_networks(path: str | Path, space: SearchSpace) -> tuple[list[tuple[str, ArchConfig]], str]:
    """The random networks of the comparison in ``path`` (``--random-from``), with its plan's digest."""
    plan_path = Path(path) / PLAN
    if not plan_path.is_file():
        raise NasError(f"--random-from {path}: not a comparison folder (no {PLAN})")
    try:
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
        other_space = plan["config"]["space"]
        entries = [(n["name"], n["arch"]) for n in plan["networks"] if n["name"] != "searched"]
    except (ValueError, KeyError, TypeError) as exc:
        raise NasError(f"{plan_path}: corrupt comparison plan ({type(exc).__name__}: {exc})") from None
    if other_space != space.name:
        raise NasError(f"--random-from {path}: its networks are of space {other_space}, not {space.name}")
    if not entries:
        raise NasError(f"--random-from {path}: its plan holds no random networks")
    networks = []
    for name, arch in entries:
        try:
            networks.append((name, ArchConfig.from_dict(arch)))
        except (ValueError, KeyError, TypeError) as exc:
            raise NasError(f"{plan_path}: corrupt comparison plan ({name}: {exc})") from None
        space.validate(networks[-1][1], where=f"{plan_path} {name}")
    return networks, file_digest(plan_path)


def network_kind(name: str) -> str:
    """A comparison network's kind from its name: ``searched``, ``random`` (``random-K``) or ``baseline``."""
    if name == "searched":
        return "searched"
    return "random" if name.startswith("random-") else "baseline"


def baseline_name(label: str) -> str:
    """The name a ``--baseline`` takes in a comparison (its row, ``archs/NAME.yaml``, ``runs/NAME-seedK``): a
    member's own name, or an arch YAML's file stem (its folder's name for an ``arch.yaml``), in file-safe
    characters and never a searched or random network's name."""
    path = Path(label)
    stem = (
        path.parent.name if path.suffix in (".yaml", ".yml") and path.stem == "arch" and path.parent.name else path.stem
    )
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-.") or "baseline"
    return name if network_kind(name) == "baseline" else f"baseline-{name}"


def plan_networks(
    space: SearchSpace,
    searched: ArchConfig,
    objective: Objective,
    cost: CostFn,
    config: CompareRunConfig,
    baselines: Sequence[tuple[str, ArchConfig]] = (),
    reused: Sequence[tuple[str, ArchConfig]] | None = None,
) -> tuple[list[tuple[str, ArchConfig]], dict]:
    """A comparison's networks at ``objective``'s budget (the searched one, the random ones, then the named
    ``baselines``) and how the random ones were chosen: ``config.random`` drawn from :func:`draw_seed`, or
    ``reused`` (``config.random_from``'s random networks, by name) after checking that each meets this budget."""
    if reused is not None:
        randoms = [arch for _, arch in reused[: config.random]]
        for name, arch in reused[: config.random]:
            require_in_band(config.random_from, name, arch, searched, objective, cost, config.tolerance)
        draws = {"random_from": {"path": config.random_from, "plan_digest": config.random_from_digest}}
    elif config.random == 0:  # only baselines
        randoms, draws = [], {}
    else:
        seed = draw_seed(searched.digest, config.seed)
        randoms = sample_within_budget(
            space,
            config.random,
            objective,
            cost,
            random.Random(seed),
            config.tolerance,
            exclude={searched.digest},
        )
        draws = {"draw_seed": seed}
    named = [(baseline_name(label), arch) for label, arch in baselines]
    names = [name for name, _ in named]
    for name in names:
        if names.count(name) > 1:
            raise NasError(f"--baseline: two baselines are both named {name}; give arch YAMLs distinct names")
    networks = [("searched", searched)] + [(f"random-{i}", a) for i, a in enumerate(randoms)] + named
    return networks, draws


def require_in_band(source, name: str, arch: ArchConfig, searched: ArchConfig, objective: Objective, cost, tolerance):
    """Refuse a reused random network that is the searched one or outside this comparison's band."""
    if arch.digest == searched.digest:
        raise NasError(f"--random-from {source}: its {name} is the searched network itself")
    value = objective.value(cost(arch))
    if not within_budget(objective, value, tolerance):
        t = objective.target
        low, high = (t, t * (1 + tolerance)) if objective.higher_is_better else (t * (1 - tolerance), t)
        raise NasError(
            f"--random-from {source}: its {name} has {objective.name} {value:.4g}, outside this comparison's "
            f"band {low:.4g} to {high:.4g} ({100 * tolerance:g}% of {t:.4g} on the side that meets it)"
        )


def saved_plan(folder: RunFolder, saved: dict) -> tuple[Objective, list[tuple[str, ArchConfig]], dict]:
    """The budget, networks and draws of the plan a resumed comparison recorded (a plan from before draws
    depended on the searched network has no ``draw_seed``: its networks were drawn from ``--seed`` alone)."""
    try:
        objective = Objective(saved["objective"]["name"], saved["objective"]["target"])
        networks = [(n["name"], ArchConfig.from_dict(n["arch"])) for n in saved["networks"]]
        if "random_from" in saved:
            draws = {"random_from": saved["random_from"]}
        elif "draw_seed" in saved:
            draws = {"draw_seed": int(saved["draw_seed"])}
        elif not any(network_kind(n) == "random" for n, _ in networks):
            draws = {}  # only baselines
        else:
            draws = {"draw_seed": int(saved["config"]["seed"]), "seed_only": True}
        return objective, networks, draws
    except (ValueError, KeyError, TypeError) as exc:
        raise folder.corrupt(exc) from None


#: Written into a training run copied from ``--random-from``'s folder: where it came from.
REUSED_FROM = "reused_from.json"


def adopt_trainings(source: Path, config: CompareRunConfig, jobs: list[FixedTrainingRequest]) -> int:
    """Copy into this comparison the finished trainings of ``source`` (a comparison or a ``nas headroom``
    pilot, ``--random-from``) that it would repeat: the same network, recipe, data (fingerprint), step
    limit and seed. Returns how many of this comparison's trainings came from there (copied now or on an
    earlier run of it). A training is deterministic given those, so a copy is the training itself."""
    try:
        plan = json.loads((source / PLAN).read_text(encoding="utf-8"))
        other = plan["config"]
        same_training = (
            recipe_from_saved(other["recipe"]) == config.recipe
            and other.get("data") == config.data
            and other.get("data_fingerprint") == config.data_fingerprint
            and other.get("max_steps") == config.max_steps
        )
        runs = {}  # (digest, seed) -> that training's run folder in source
        for network in plan["networks"]:
            for k in range(int(other.get("seeds", 1))):
                runs[(network["digest"], int(other["seed"]) + k)] = source / "runs" / seed_run_name(network["name"], k)
        recorded = _recorded_top1(source, int(other["seed"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NasError(f"{source / PLAN}: corrupt plan ({type(exc).__name__}: {exc})") from None
    reused = 0
    for job in jobs:
        run = Path(job.run)
        if (run / REUSED_FROM).exists():
            reused += 1
            continue
        origin = runs.get((job.arch.digest, job.seed)) if same_training else None
        if origin is None or run.exists():
            continue
        if RunFolder(origin).finished:
            shutil.copytree(origin, run, ignore=shutil.ignore_patterns(".lock"))
            write_json(run / REUSED_FROM, {"path": str(origin)})
        elif (job.arch.digest, job.seed) in recorded:
            # The run folders of a committed comparison are not kept (docs/results/ holds its result.json):
            # its recorded top-1 of this network and seed is the training's result.
            name, top1 = recorded[job.arch.digest, job.seed]
            where = {"path": str(source / "result.json"), "network": name, "seed": job.seed}
            write_json(run / REUSED_FROM, {**where, "what": "the recorded top-1 of a finished comparison"})
            RunFolder(run).write_result({"top1": top1, "top1_ema": None, "reused_result": where})
        else:
            continue
        reused += 1
    return reused


def _recorded_top1(source: Path, first_seed: int) -> dict[tuple[str, int], tuple[str, float]]:
    """(digest, seed) -> (network, top-1) of every training a finished comparison in ``source`` recorded in its
    ``result.json`` rows (nothing when it has not finished)."""
    path = source / "result.json"
    if not path.is_file():
        return {}
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    return {
        (row["digest"], first_seed + k): (row["network"], float(top1))
        for row in rows
        for k, top1 in enumerate(row["top1_seeds"])
    }
