"""What each kind of run records about itself: typed, frozen, and checked on ``--resume``.

Every run folder holds its settings (``config.yaml``, or ``plan.json``'s ``config`` for a
comparison), read back through :func:`nas.core.typed_yaml.from_mapping` into one of these dataclasses.
Resuming compares every field of the saved and the new settings except those marked ``free``
(paths and labels that do not change a result), so a setting added to a run kind is in its resume
check by default and cannot be forgotten. Files are identified by content digests (the supernet
checkpoint, the latency table, the image listing), not only by path.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from nas.config.recipe import Recipe, saved_recipe_fields
from nas.core.errors import NasError
from nas.core.typed_yaml import REQUIRED, differences, from_mapping, read_yaml, setting


@dataclass(frozen=True)
class SupernetRunConfig:
    """``nas train-supernet``: ``config.yaml`` of the run folder."""

    family: str
    space: str
    data: str | None
    seed: int
    recipe: Recipe
    command: str = setting("train-supernet", choices=("train-supernet",))
    space_file: str = setting("", free=True)  # where the space was read from (the name identifies it)
    data_fingerprint: str = ""  # nas.data.source.data_fingerprint: which images, not only which folder
    world_size: int = 1
    init: str | None = setting(None, free=True)  # released weights the run started from (--init)
    init_digest: str | None = setting(None, free=True)  # a resumed run's weights come from its checkpoint


@dataclass(frozen=True)
class FixedRunConfig:
    """``nas train``: ``config.yaml`` of the run folder."""

    arch: dict[str, Any]
    arch_digest: str
    family: str
    data: str | None
    seed: int
    recipe: Recipe
    command: str = setting("train", choices=("train",))
    space: str = ""
    label: str = setting("", free=True)  # how the user named the arch
    data_fingerprint: str = ""
    world_size: int = 1
    init: str | None = setting(None, free=True)
    init_digest: str | None = setting(None, free=True)


@dataclass(frozen=True)
class SearchRunConfig:
    """``nas search``: ``config.yaml`` of the run folder."""

    supernet: str = setting(REQUIRED, free=True)  # its path; the checkpoint's digest says what it holds
    space: str
    objective: str
    target: float
    device: str | None
    img_size: int  # the input size cost is priced at
    seed: int
    num_classes: int
    space_file: str = setting("", free=True)  # where the space was read from (nas.config.spaces.recorded_source)
    # The size the supernet trained and scores at (its checkpoint, which supernet_digest identifies).
    train_img_size: int | None = setting(None, free=True)
    command: str = setting("search", choices=("search",))
    supernet_digest: str = ""  # SHA-256 of the supernet checkpoint the accuracies come from
    bn_calib_batches: int | None = None  # the one used (the supernet recipe's unless overridden)
    data: str | None = None
    data_fingerprint: str = ""
    split_seed: int | None = None  # the supernet run's seed: which images are the search split
    table_digest: str | None = None  # SHA-256 of the latency table the costs come from
    latency_source: str | None = setting(None, free=True)
    strategy: str = "greedy"  # a name of nas.search.strategy's registry (which refuses an unknown one)
    # The strategy's options (its options dataclass as plain data) and how the finalists are scored
    # (nas.search.finalists.FinalScoring); None in runs of earlier versions, which cannot be resumed.
    strategy_options: dict[str, Any] | None = None
    final_scoring: dict[str, Any] | None = None
    # What earlier versions recorded instead of strategy_options (read, never written now).
    trials: int | None = setting(None, free=True)
    actions: str | None = setting(None, free=True)
    storage: str | None = setting(None, free=True)
    study_name: str | None = setting(None, free=True)
    evaluate_top: int = setting(0, free=True)
    explore: int = setting(0, free=True)
    search_images: int | None = None  # class-balanced subset of the search split scored (None: all of it)
    targets: tuple[float, ...] = ()  # a family search's targets (nas search --target T1 T2 ...; () for one)


@dataclass(frozen=True)
class CompareRunConfig:
    """``nas compare``: the ``config`` of ``plan.json``."""

    searched: dict[str, Any]
    searched_digest: str
    space: str
    random: int
    objective: str
    tolerance: float
    device: str | None
    img_size: int
    data: str | None
    seed: int
    recipe: Recipe
    command: str = setting("compare", choices=("compare",))
    recipe_name: str = setting("", free=True)
    max_steps: int | None = None
    data_fingerprint: str = ""
    table_digest: str | None = None
    supernet: str | None = setting(None, free=True)
    supernet_digest: str | None = None
    bn_calib_batches: int | None = None
    seeds: int = setting(1, low=1)  # training seeds per network: seed, seed + 1, ...
    random_from: str | None = setting(None, free=True)  # the comparison whose random networks this one reuses
    random_from_digest: str | None = None  # SHA-256 of that comparison's plan.json: which networks
    target: float | None = None  # --target: the budget's value (None: the searched network's own)
    baselines: tuple[str, ...] = ()  # the digests of the named baselines (--baseline) trained beside them


@dataclass(frozen=True)
class HeadroomRunConfig:
    """``nas headroom``: the ``config`` of ``plan.json`` (its networks are reusable by ``nas compare
    --random-from``, which reads ``space`` there)."""

    space: str
    objective: str
    target: float
    tolerance: float
    random: int  # networks drawn in the band
    seeds: int
    device: str | None
    img_size: int
    data: str | None
    seed: int
    recipe: Recipe
    command: str = setting("headroom", choices=("headroom",))
    recipe_name: str = setting("", free=True)
    max_steps: int | None = None
    data_fingerprint: str = ""
    table_digest: str | None = None
    planned_random: int = 5  # random networks the comparison to come will train (the margin it needs)


@dataclass(frozen=True)
class RankCheckRunConfig:
    """``nas rank-check``: the ``config`` of ``plan.json``."""

    space: str
    n: int
    device: str | None
    img_size: int
    data: str | None
    seed: int
    recipe: Recipe
    command: str = setting("rank-check", choices=("rank-check",))
    supernet: str = setting("", free=True)
    supernet_digest: str = ""
    bn_calib_batches: int | None = None
    data_fingerprint: str = ""
    table_digest: str | None = None
    max_steps: int | None = None
    full_recipe: Recipe | None = None
    full_n: int = 0
    recipe_name: str = setting("", free=True)
    scratch_from: str = ""  # an earlier study whose from-scratch trainings this one reuses
    compared_from: tuple[str, ...] = ()  # or the comparisons (`nas compare`) whose trained networks it ranks


RUN_CONFIGS = {
    c.__dataclass_fields__["command"].default: c
    for c in (
        SupernetRunConfig,
        FixedRunConfig,
        SearchRunConfig,
        CompareRunConfig,
        HeadroomRunConfig,
        RankCheckRunConfig,
    )
}


def as_dict(config: Any) -> dict[str, Any]:
    """The config as plain data (``config.yaml``, ``plan.json``, checkpoints), ``command`` first."""
    data = dataclasses.asdict(config)
    return {"command": data.pop("command"), **data}


def run_config_from(data: Any, where: str | os.PathLike, cls: type | None = None) -> Any:
    """A saved run config (a parsed ``config.yaml`` or ``plan.json``'s ``config``) as its dataclass;
    ``cls`` defaults to the one its ``command`` names. Recipes saved under old key names load."""
    where = str(where)
    if not isinstance(data, dict):
        raise NasError(f"{where}: not a run config (expected a mapping, got {type(data).__name__})")
    if cls is None:
        cls = RUN_CONFIGS.get(data.get("command"))
        if cls is None:
            raise NasError(f"{where}: unknown run kind {data.get('command')!r}; known: {', '.join(RUN_CONFIGS)}")
    for key in ("recipe", "full_recipe"):
        if isinstance(data.get(key), dict):
            data = {**data, key: saved_recipe_fields(data[key])}
    return from_mapping(cls, data, where)


def read_run_config(path: str | os.PathLike, cls: type | None = None) -> Any:
    """``config.yaml`` of a run folder as its dataclass."""
    return run_config_from(read_yaml(path, "run config"), path, cls)


def require_resumable(saved: Any, now: Any, where: str | os.PathLike) -> None:
    """Refuse to resume when any setting that changes a result differs (one line, the first)."""
    if type(saved) is not type(now):
        raise NasError(f"{where}: holds a {saved.command} run, not a {now.command} run")
    diffs = differences(saved, now)
    if not diffs:
        return
    key, before, after = diffs[0]
    if before in ("", None) and after not in ("", None):
        raise NasError(
            f"{where}: cannot resume: the run does not record {key} (written by an older version); start a new run"
        )
    more = f" (and {len(diffs) - 1} more: {', '.join(k for k, _, _ in diffs[1:4])})" if len(diffs) > 1 else ""
    raise NasError(f"{where}: cannot resume with a different {key} ({before!r} in the run, {after!r} now){more}")
