"""Random sub-networks within a budget: the baseline the papers compare searched networks with."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.runs.checkpoint import load_checkpoint
from nas.search.evaluator import SUPERNET_KEYS, EvalSpec
from nas.search.greedy import CostFn, require_reachable
from nas.search.objective import Objective


@dataclass(frozen=True)
class SupernetPricing:
    """How ``nas search`` prices the sub-networks of a supernet run: its space, the input size it
    trained at and its number of classes."""

    space: str  # name or path
    img_size: int
    num_classes: int


def supernet_pricing(run: str) -> SupernetPricing:
    """The space, training size and classes of the supernet run ``run`` (its checkpoint's metadata)."""
    spec = EvalSpec.from_run(run)
    checkpoint = load_checkpoint(spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS, mmap=True)
    return SupernetPricing(spec.space, int(checkpoint["img_size"]), int(checkpoint["num_classes"]))


def within_budget(objective: Objective, value: float, tolerance: float) -> bool:
    """MES in [target, target * (1 + tolerance)]; latency or params in [target * (1 - tolerance), target]
    (:meth:`Objective.band`)."""
    low, high = objective.band(tolerance)
    return low <= value <= high


def sample_distinct(
    space: SearchSpace,
    n: int,
    accept: Callable[[ArchConfig], bool],
    rng: random.Random,
    max_draws: int = 20_000,
    exclude: set[str] = frozenset(),
) -> list[ArchConfig]:
    """Up to ``n`` distinct sub-networks drawn uniformly from the space (:meth:`SearchSpace.sample`)
    that ``accept`` takes, in the order drawn, from at most ``max_draws`` draws; digests in
    ``exclude`` are skipped."""
    found: dict[str, ArchConfig] = {}
    for _ in range(max_draws):
        arch = space.sample(rng)
        if arch.digest not in found and arch.digest not in exclude and accept(arch):
            found[arch.digest] = arch
            if len(found) == n:
                break
    return list(found.values())


def require_band(
    space: SearchSpace, objective: Objective, cost: CostFn, tolerance: float | None, max_draws: int = 20_000
) -> None:
    """A one-line :class:`NasError` if no sub-network of ``max_draws`` random draws lies in ``objective``'s
    band of ``tolerance`` (None: meets the target): before a search that draws there starts."""
    require_reachable(space, cost, objective)
    if sample_distinct(space, 1, lambda arch: objective.in_band(cost(arch), tolerance), random.Random(0), max_draws):
        return
    where = f"{objective.name} {objective.target:g}"
    if tolerance is not None:
        low, high = objective.band(tolerance)
        where = f"the band {low:.4g} to {high:.4g} ({objective.unit}) of {where}"
    raise NasError(
        f"none of {max_draws} random sub-networks of {space.name} lies in {where}; widen the band "
        "(--set tolerance=...) or choose another --target"
    )


def sample_within_budget(
    space: SearchSpace,
    n: int,
    objective: Objective,
    cost: CostFn,
    rng: random.Random,
    tolerance: float = 0.05,
    max_draws: int = 20_000,
    exclude: set[str] = frozenset(),
) -> list[ArchConfig]:
    """``n`` distinct sub-networks drawn uniformly from the space (:meth:`SearchSpace.sample`) whose
    objective lies within ``tolerance`` of the target, on the side that meets it; digests in
    ``exclude`` (e.g. the searched network's) are skipped."""
    require_reachable(space, cost, objective)
    found = sample_distinct(
        space,
        n,
        lambda arch: within_budget(objective, objective.value(cost(arch)), tolerance),
        rng,
        max_draws,
        exclude,
    )
    if len(found) == n:
        return found
    raise NasError(
        f"only {len(found)} of {n} random sub-networks of {space.name} met {objective.name} "
        f"{objective.target:g} within {100 * tolerance:g}% in {max_draws} draws; widen --tolerance"
    )
