"""What a search optimises: MES (higher is better), latency or parameters (lower is better)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import setting
from nas.metrics import count_params, mes
from nas.search.command_choices import OBJECTIVES


@dataclass(frozen=True)
class Cost:
    """The cost side of a sub-network, known without evaluating it."""

    params: int
    latency_ms: float | None = None

    @property
    def mes(self) -> float | None:
        return None if self.latency_ms is None else mes(self.params, self.latency_ms)

    def to_dict(self) -> dict:
        return {"params": self.params, "latency_ms": self.latency_ms, "mes": self.mes}


#: Accuracies of sub-networks, in one batch (what a search evaluates with).
AccuracyFn = Callable[[Sequence[ArchConfig]], list[float]]
#: The cost of a sub-network, known without evaluating it.
CostFn = Callable[[ArchConfig], Cost]


@dataclass(frozen=True)
class Objective:
    """A search target: ``name`` (``mes``, ``latency`` or ``params``) and the MES to reach, or the ms or
    parameters to get under."""

    name: str
    target: float

    def __post_init__(self):
        if self.name not in OBJECTIVES:
            raise NasError(f"unknown objective {self.name!r}; choose one of {', '.join(OBJECTIVES)}")
        if not self.target > 0:
            raise NasError(f"the {self.name} target must be positive, got {self.target}")

    @property
    def higher_is_better(self) -> bool:
        return self.name == "mes"

    def value(self, cost: Cost) -> float:
        if self.name == "params":
            return float(cost.params)
        if cost.latency_ms is None:
            raise NasError(f"objective {self.name} needs a latency table (--device)")
        return cost.mes if self.name == "mes" else cost.latency_ms

    def met(self, cost: Cost) -> bool:
        v = self.value(cost)
        return v >= self.target if self.higher_is_better else v <= self.target

    def band(self, tolerance: float) -> tuple[float, float]:
        """The objective's values of equal cost: MES in [target, target * (1 + tolerance)]; latency or
        parameters in [target * (1 - tolerance), target]. Networks far cheaper than the target meet
        it too, but are no fair rival of one at the target."""
        if self.higher_is_better:
            return self.target, self.target * (1 + tolerance)
        return self.target * (1 - tolerance), self.target

    def in_band(self, cost: Cost, tolerance: float | None) -> bool:
        """Whether ``cost`` lies in :meth:`band` (``tolerance`` None: whether it meets the target)."""
        if tolerance is None:
            return self.met(cost)
        low, high = self.band(tolerance)
        return low <= self.value(cost) <= high

    def gain(self, before: Cost, after: Cost) -> float:
        """Progress towards the target (positive: MES gained, ms or parameters saved)."""
        d = self.value(after) - self.value(before)
        return d if self.higher_is_better else -d

    @property
    def unit(self) -> str:
        return {"mes": "MES", "latency": "ms", "params": "parameters"}[self.name]


@dataclass(frozen=True)
class SearchProblem:
    """What a search algorithm (greedy slimming, evolution, random search, NSGA-II) searches: the
    ``space``, the ``accuracy`` of a batch of its networks, the ``cost`` of one, and the ``objective``."""

    space: SearchSpace
    accuracy: AccuracyFn
    cost: CostFn
    objective: Objective


def require_table(objective: str, device: str | None) -> None:
    """Refuse an objective priced by a latency table (``mes``, ``latency``) without ``--device``."""
    if objective != "params" and not device:
        raise NasError(f"objective {objective} needs --device (a latency table)")


def cost_function(table=None, img_size: int = 224, num_classes: int = 1000) -> Callable[[ArchConfig], Cost]:
    """Exact parameters and (with a latency table) latency of an architecture, computed once per
    architecture (a search prices thousands of candidates it never evaluates)."""
    known: dict[str, Cost] = {}

    def cost(arch: ArchConfig) -> Cost:
        if arch.digest not in known:
            latency = table.latency(arch) if table is not None else None
            known[arch.digest] = Cost(count_params(arch, img_size, num_classes), latency)
        return known[arch.digest]

    return cost


def greedy_key(drop: float, gain: float, index: int, accuracy_step: float = 0.0) -> tuple[float, float, int]:
    """Sort key of a shrink in greedy slimming: the smallest accuracy drop per unit gained (EfficientFormerV2
    §4.2.3), then the larger step.

    The drop counted is the measured one, a gain in accuracy counting as no drop, plus ``accuracy_step``,
    the smallest difference the evaluation resolves (one image of the scored set). Divided raw, as in
    the paper, a shrink that leaves the measured accuracy unchanged or raises it wins against any that
    lowers it, however small its step: with a finite search split (where lowering one FFN's width a
    notch rarely changes an answer) or a supernet whose small members score as well as its large ones,
    the search then creeps towards its target by the smallest moves (on a 150-step supernet of the
    main space: 33 steps from MES 12.6 to 31, most of them one FFN notch). A measured "no drop" means a
    drop below one image, not none; so counted, the step that gains more per image it may cost wins."""
    return (max(drop, 0.0) + accuracy_step) / gain, -gain, index


def reachable_range(space: SearchSpace, cost: CostFn, objective: Objective) -> tuple[float, float]:
    """The objective's values at the largest and the smallest sub-networks: every target a greedy
    slimming from the largest can meet lies between them (params, latency and MES are monotone
    in every shrink)."""
    return objective.value(cost(space.largest())), objective.value(cost(space.smallest()))


def require_reachable(space: SearchSpace, cost: CostFn, objective: Objective, start: ArchConfig | None = None) -> None:
    """A one-line error with the reachable range if no sub-network (slimmed from ``start``) meets the target."""
    first = objective.value(cost(start or space.largest()))
    lo, hi = sorted((first, objective.value(cost(space.smallest()))))
    if not (lo <= objective.target <= hi or objective.met(cost(start or space.largest()))):
        raise NasError(
            f"{objective.name} target {objective.target:g} is out of reach: sub-networks of space "
            f"{space.name} span {objective.name} {lo:.4g} to {hi:.4g} ({objective.unit})"
        )


def band_tolerance(anything_that_meets: bool = False):
    """The ``tolerance`` option (``--set tolerance=F``) of a strategy that searches within a band around
    the target; ``anything_that_meets``: ``null`` also allowed, for no band, only the target."""
    note = " (null: anything that meets the target)" if anything_that_meets else ""
    return setting(
        0.05,
        low=0,
        high=1,
        exclusive="low",
        help=f"the band: the objective within this fraction of the target, on the side that meets it{note}",
    )
