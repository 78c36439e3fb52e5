"""Predicted phone latencies: a per-operator cost model fitted to published whole-model latencies.

Each model (or block) is described by its operators (:mod:`nas.latency.opcount`). An operator costs
``max(MACs, r * elements touched)``: compute-bound or memory-bound, whichever is slower (a
roofline with one ratio ``r``). Operator costs are summed within groups of operator kinds, and the
latency is a non-negative combination of the group sums plus a fixed per-network overhead, fitted
by non-negative least squares on relative error to the author-reported latencies shipped in
``latency_tables/published/``.

The grouping and ``r`` are chosen among a few candidates by leave-one-model-out error. The error
reported for a device is *nested* leave-one-model-out: for every published model, the whole
procedure (choice of grouping and ``r``, then the fit) is rerun without it and the model is
predicted. That is the honest estimate of how wrong a prediction for an unseen network is.
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from nas.blocks import block_input_shape, build_block, reachable_signatures
from nas.core.errors import NasError
from nas.core.signature import BlockSignature
from nas.core.space import SearchSpace
from nas.latency.devices import get_device
from nas.latency.fit import relative_nnls
from nas.latency.opcount import OpCost, record_ops
from nas.latency.table import (
    LatencyTable,
    TableHeader,
    tables_root,
    today,
    tool_versions,
)

log = logging.getLogger(__name__)

MEMORY_KINDS = ("elem", "layout", "reduce")
#: Candidate groupings of operator kinds (each group gets one fitted weight).
GROUPINGS: dict[str, tuple[tuple[str, ...], ...]] = {
    "all": (("conv", "dw", "fc", "bmm", "elem", "layout", "reduce"),),
    "matmul|attention|memory": (("conv", "dw", "fc"), ("bmm",), MEMORY_KINDS),
    "conv|linear|attention|memory": (("conv", "dw"), ("fc",), ("bmm",), MEMORY_KINDS),
}
#: Candidate roofline ratios r (MACs per element moved at which an operator turns compute-bound).
RATIOS = (0.0, 10.0, 30.0, 100.0, 300.0)


@dataclass(frozen=True)
class Fact:
    """One published whole-model latency."""

    label: str
    latency_ms: float
    source: str
    ops: tuple[OpCost, ...] = field(repr=False, compare=False)


def published_csv() -> Path:
    """The author-reported latencies the cost models are fitted to."""
    return tables_root() / "published" / "published_latency.csv"


def create_timm_model(model_name: str, img_size: int = 224, **kwargs):
    """``timm.create_model`` for ``img_size`` inputs: models with a fixed grid (attention biases)
    are built for that size; models without an ``img_size`` argument are built as they are."""
    import timm

    try:
        try:
            return timm.create_model(model_name, pretrained=False, img_size=img_size, **kwargs)
        except TypeError:
            return timm.create_model(model_name, pretrained=False, **kwargs)
    except Exception as exc:  # noqa: BLE001 - timm raises RuntimeError / KeyError for unknown names
        raise NasError(f"timm cannot build {model_name!r}: {str(exc).splitlines()[0]}") from None


@cache
def timm_ops(model_name: str, img_size: int = 224) -> tuple[OpCost, ...]:
    """Operators of a timm model at ``img_size``, re-parameterised first where timm can fuse it."""
    from timm.utils.model import reparameterize_model

    model = create_timm_model(model_name, img_size, device="meta")
    try:
        model = reparameterize_model(model)
    except Exception:  # noqa: BLE001 - fusing is best effort; the unfused model is still priceable
        log.debug("%s: no re-parameterisation on the meta device", model_name)
    return tuple(record_ops(model, (1, 3, img_size, img_size)))


def published_facts(device: str) -> list[Fact]:
    """The published latencies of ``device``'s campaign whose models timm can build."""
    spec = get_device(device)
    if spec.published is None:
        raise NasError(f"device {device} has no published measurements; it is measured locally")
    path = published_csv()
    try:
        rows = list(csv.DictReader(path.open(encoding="utf-8")))
    except FileNotFoundError:
        raise NasError(f"{path}: published latencies not found") from None
    facts = []
    for row in rows:
        if row.get("device") != spec.published or not row.get("timm_model"):
            continue
        facts.append(
            Fact(
                row["timm_model"],
                float(row["latency_ms"]),
                f"{row['campaign']} ({row['paper_model']})",
                timm_ops(row["timm_model"]),
            )
        )
    if len(facts) < 4:
        raise NasError(f"{path}: only {len(facts)} usable published latencies for {device}; need at least 4")
    return facts


def features(ops, grouping: str, ratio: float) -> np.ndarray:
    """Group sums of per-operator roofline costs (in G-units), without the intercept column."""
    groups = GROUPINGS[grouping]
    out = np.zeros(len(groups))
    for op in ops:
        cost = max(op.macs, ratio * op.elems)
        for g, kinds in enumerate(groups):
            if op.kind in kinds:
                out[g] += cost
    return out / 1e9


def _design(facts: list[Fact], grouping: str, ratio: float) -> np.ndarray:
    X = np.array([features(f.ops, grouping, ratio) for f in facts])
    return np.hstack([X, np.ones((len(facts), 1))])


def _fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    return relative_nnls(X, y)


def _loo_errors(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    errors = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        errors[i] = abs(X[i] @ _fit(X[keep], y[keep]) - y[i]) / y[i]
    return errors


def _select(designs: dict, y: np.ndarray, keep: np.ndarray) -> tuple[str, float]:
    return min(designs, key=lambda c: _loo_errors(designs[c][keep], y[keep]).mean())


@dataclass(frozen=True)
class CostModel:
    """A cost model fitted for one ``device``: grouping, ratio ``r``, weights per group and intercept,
    with its leave-one-model-out errors."""

    device: str
    grouping: str
    ratio: float
    weights: tuple[float, ...]  # ms per G-unit of each group
    intercept_ms: float
    fitted_on: tuple[str, ...]
    nested_loo_mean: float
    nested_loo_median: float
    loo_mean: float  # of the chosen grouping and ratio (optimistic: chosen on the same data)
    macs_only_loo_mean: float  # the baseline: latency proportional to MACs

    def predict_ops(self, ops, intercept: bool = True) -> float:
        ms = float(features(ops, self.grouping, self.ratio) @ np.array(self.weights))
        return ms + (self.intercept_ms if intercept else 0.0)

    def summary(self) -> dict:
        return {
            "cost": "sum over operators of max(MACs, r * elements touched), by group",
            "grouping": self.grouping,
            "groups": [list(g) for g in GROUPINGS[self.grouping]],
            "ratio_r": self.ratio,
            "weights_ms_per_G": [round(w, 6) for w in self.weights],
            "intercept_ms": round(self.intercept_ms, 6),
            "fitted_on": list(self.fitted_on),
        }


def fit_cost_model(device: str, extra_facts: list[Fact] | None = None) -> CostModel:
    """Fit ``device``'s cost model to its published facts (plus ``extra_facts``, e.g. imported
    measurements of real networks) and estimate its error by nested leave-one-model-out."""
    facts = published_facts(device) + list(extra_facts or [])
    y = np.array([f.latency_ms for f in facts])
    designs = {(g, r): _design(facts, g, r) for g in GROUPINGS for r in RATIOS}
    everyone = np.ones(len(y), dtype=bool)
    nested = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        choice = _select(designs, y, keep)
        nested[i] = abs(designs[choice][i] @ _fit(designs[choice][keep], y[keep]) - y[i]) / y[i]
    grouping, ratio = _select(designs, y, everyone)
    w = _fit(designs[(grouping, ratio)], y)
    macs = np.array([[sum(op.macs for op in f.ops) / 1e9] for f in facts])
    return CostModel(
        device=device,
        grouping=grouping,
        ratio=ratio,
        weights=tuple(float(v) for v in w[:-1]),
        intercept_ms=float(w[-1]),
        fitted_on=tuple(f.label for f in facts),
        nested_loo_mean=float(nested.mean()),
        nested_loo_median=float(np.median(nested)),
        loo_mean=float(_loo_errors(designs[(grouping, ratio)], y).mean()),
        macs_only_loo_mean=float(_loo_errors(macs, y).mean()),
    )


def predict_timm(model_name: str, device: str, img_size: int = 224, model: CostModel | None = None) -> float:
    """Predicted latency (ms) of any timm model on a phone."""
    model = model or fit_cost_model(device)
    return model.predict_ops(timm_ops(model_name, img_size))


def block_ops(family: str, sig: BlockSignature) -> list[OpCost]:
    """The operators of block ``sig`` (recorded on the meta device), as the cost model prices them."""
    return record_ops(build_block(family, sig, device="meta"), block_input_shape(family, sig))


def build_predicted_table(
    device: str,
    space: SearchSpace,
    img_size: int = 224,
    num_classes: int = 1000,
    model: CostModel | None = None,
    progress: bool = True,
) -> LatencyTable:
    """A ``predicted`` table: every reachable block priced by ``device``'s fitted cost model.

    The per-network intercept is carried by the head entries, so a network's sum includes it once.
    """
    from tqdm import tqdm

    spec = get_device(device)
    model = model or fit_cost_model(device)
    entries = {}
    for sig in tqdm(
        reachable_signatures(space, img_size, num_classes),
        desc=f"predict blocks for {device}",
        disable=None if progress else True,
    ):
        ms = model.predict_ops(block_ops(space.family, sig), intercept=sig.kind == "head")
        entries[sig.key()] = ms
    header = TableHeader(
        device=device,
        space=space.name,
        family=space.family,
        img_size=img_size,
        num_classes=num_classes,
        source="predicted",
        runtime=spec.runtime,
        dtype=spec.dtype,
        batch=1,
        date=today(),
        tool_versions=tool_versions(),
        error={
            "metric": "nested leave-one-model-out mean absolute percentage error",
            "value": round(model.nested_loo_mean, 4),
            "median": round(model.nested_loo_median, 4),
            "n_models": len(model.fitted_on),
            "loo_mean_of_chosen_model": round(model.loo_mean, 4),
            "macs_only_loo_mean": round(model.macs_only_loo_mean, 4),
        },
        method=model.summary(),
        notes=f"Predicted, not measured: {spec.description}. Fitted to the published whole-model latencies in "
        f"latency_tables/published/published_latency.csv (device {spec.published!r}).",
    )
    return LatencyTable(header, entries)
