"""Random sub-networks within a budget (the baseline the papers compare searched networks with), and
sub-networks spread over the whole budget range (what a ranking study scores)."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.search.objective import CostFn, Objective, reachable_range, require_reachable
from nas.search.supernet_run import SupernetRun


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
    lo, hi = sorted(reachable_range(space, cost, objective))
    raise NasError(
        f"none of {max_draws} random sub-networks of {space.name} lies in {where} (its sub-networks span "
        f"{lo:.4g} to {hi:.4g}); widen the band (--set tolerance=...) or choose another --target"
    )


class InBand:
    """What a strategy that draws in the band of its ``tolerance`` option (evolution, random search)
    checks: that a random sub-network lies in the band, before the run folder exists."""

    def check(self, supernet: SupernetRun, objective: Objective, cost: CostFn, options) -> None:
        """Refuse a band no random sub-network lies in (:func:`require_band`)."""
        require_band(supernet.space, objective, cost, options.tolerance)


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
