"""Predicted phone latencies: a per-operator cost model fitted to published whole-model latencies.

Each network is described by the operators of the graph that runs on the phone: timm models are
re-parameterised first where timm can fuse them (MobileOne, FastViT, RepViT, LeViT...), because
published latencies are those of the fused model. The features are the multiply-accumulates of the
matmul operators (convolutions and linear layers) and of the attention matmuls, plus *hardware
terms* that describe what an accelerator does beyond arithmetic: attention maps through softmax,
non-linearities the compiler does not fuse, LayerNorm and GroupNorm (which do not fold into a
convolution as BatchNorm does), activations too large for on-chip memory, and (a candidate) the
memory traffic of element-wise, layout and reduction operators. The latency is a non-negative
combination of the features plus a fixed per-network overhead, times a factor per measurement
campaign (papers measured the same chip under different iOS and Core ML versions; one factor per
campaign is cheaper than a model per campaign). The campaign the device's table describes has
factor 1. Weights are fitted by non-negative least squares on relative error to the author-reported
latencies in ``latency_tables/published/`` (least absolute relative error, the reported metric), with
a ridge pull towards zero.

Every hardware term is fitted at once; the choices are only whether memory traffic is a feature and
the ridge strength, made by leave-one-family-out error. How wrong a prediction is gets estimated
*nested*: the whole procedure (choice, then fit) is rerun without the held-out models and they are
predicted. Two hold-outs are reported: one model at a time (its siblings stay in the fit) and one
family at a time (every model of the family held out, the honest estimate for a network unlike
anything fitted). The signed mean shows a bias. An 80% split-conformal interval comes from the
held-out residuals: leave-one-model-out ones for a network of a fitted family (a sub-network of a
searched space whose family is in the fit), leave-one-family-out ones otherwise. Published rows
marked ``use=test`` (RepViT, MobileOne, FastViT, Next-ViT) are never fitted or used for choices: they
are an independent check of the error and of the interval's coverage.
"""

from __future__ import annotations

import csv
import logging
import math
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import numpy as np
from scipy.optimize import lsq_linear, nnls
from scipy.stats import kendalltau

from nas.blocks import block_input_shape, build_block, reachable_signatures
from nas.core.errors import NasError
from nas.core.signature import BlockSignature
from nas.core.space import SearchSpace
from nas.latency.devices import DEVICES, get_device
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
    "matmul|attention|elementwise|layout": (("conv", "dw", "fc"), ("bmm",), ("elem", "reduce"), ("layout",)),
    "matmul|attention": (("conv", "dw", "fc"), ("bmm",)),
}
_SOFTMAX = {"_softmax", "_safe_softmax"}
_SLOW_ACTIVATIONS = {"hardswish", "silu", "sigmoid", "hardsigmoid"}
_NORMS = {"native_layer_norm", "native_group_norm"}


def _attention_maps(ops) -> float:
    # Softmax over token-by-token maps: the operator Core ML cannot fuse into a matmul (EfficientFormer §3).
    return sum(op.elems for op in ops if op.op in _SOFTMAX) / 1e7


def _activations(ops) -> float:
    # Non-linearities whose cost depends on the compiler (EfficientFormer §3, observation 4: HardSwish
    # is slow on the iPhone 12's Core ML); ReLU and GELU run fused.
    return sum(op.elems for op in ops if op.op in _SLOW_ACTIVATIONS) / 1e7


def _norms(ops) -> float:
    # LayerNorm and GroupNorm stay in the graph, where BatchNorm folds into the convolution
    # (EfficientFormer §3, observation 3: CONV-BN is faster than LN-Linear).
    return sum(op.elems for op in ops if op.op in _NORMS) / 1e7


def _memory_traffic(ops) -> float:
    # Element-wise, layout and reduction operators do no multiply-accumulates: their cost is the data
    # they move (a CPU is bound by it; a neural engine mostly fuses them away).
    return sum(op.elems for op in ops if op.kind in MEMORY_KINDS) / 1e7


def _all_macs(ops) -> float:
    # Every multiply-accumulate, whatever the operator: the term a few-shot calibration adds, so that a
    # new phone's timings can weigh plain arithmetic apart from the prior's operator costs.
    return sum(op.macs for op in ops) / 1e9


#: The term few-shot calibration adds (not a fitting candidate's: it is the sum of the MAC groups).
ALL_MACS = "all MACs"
#: The hardware term whose unit depends on the on-chip budget.
OFF_CHIP = "off-chip activations"
#: Operators whose output exceeds this many elements (2 MiB at float16) stream through DRAM.
ON_CHIP_ELEMENTS = 2**20


def _off_chip(ops, budget: int = ON_CHIP_ELEMENTS) -> float:
    # An activation larger than the accelerator's on-chip memory is written to DRAM and read back:
    # elements written by operators whose output exceeds the budget (the issue's "tensors that do not
    # fit on-chip"; EfficientNet-B5 at 456 px and MobileViT-v2 at 256 px have such activations).
    return sum(op.out_elems for op in ops if op.out_elems > budget) / 1e7


#: Hardware terms, each one fitted weight (ms per unit).
HARDWARE_TERMS = {
    "attention maps": _attention_maps,
    "activations": _activations,
    "norms": _norms,
    OFF_CHIP: _off_chip,
    "memory traffic": _memory_traffic,
    ALL_MACS: _all_macs,
}
TERM_UNITS = {
    "memory traffic": "1e7 elements read or written by element-wise, layout and reduction operators",
    "attention maps": "1e7 elements through softmax",
    "activations": "1e7 elements through HardSwish, SiLU, sigmoid or HardSigmoid",
    "norms": "1e7 elements through LayerNorm or GroupNorm",
    ALL_MACS: "1e9 multiply-accumulates of every operator",
}
#: What every candidate prices beyond MACs (EfficientFormer §3's observations, and on-chip memory).
ENGINE_TERMS = ("attention maps", "activations", "norms", OFF_CHIP)


def term_unit(term: str, on_chip: int = ON_CHIP_ELEMENTS) -> str:
    """What one unit of a hardware term is."""
    if term == OFF_CHIP:
        return (
            f"1e7 elements written by operators whose output exceeds {on_chip} elements "
            f"({2 * on_chip / 2**20:g} MiB at float16)"
        )
    return TERM_UNITS[term]


#: Candidate ridge strengths: how strongly the fit pulls each weight (in units of its typical share of
#: a latency) towards zero. Every term is fitted at once (non-negative), rather than a subset chosen:
#: choosing among subsets per held-out family made the nested error worse than fitting them all.
RIDGES = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
#: Nominal coverage of the prediction intervals.
INTERVAL_LEVEL = 0.8


@dataclass(frozen=True)
class Candidate:
    """One choice of features and fit: operator grouping, roofline ratio, hardware terms and ridge strength."""

    grouping: str
    ratio: float
    terms: tuple[str, ...] = ()
    #: The on-chip budget (elements) of the off-chip term.
    on_chip: int = ON_CHIP_ELEMENTS
    ridge: float = 0.0

    def features(self, ops) -> np.ndarray:
        """Group sums of per-operator roofline costs (G-units) and the hardware terms, without intercept."""
        groups = GROUPINGS[self.grouping]
        out = np.zeros(len(groups) + len(self.terms))
        for op in ops:
            cost = max(op.macs, self.ratio * op.elems)
            for g, kinds in enumerate(groups):
                if op.kind in kinds:
                    out[g] += cost
        out[: len(groups)] /= 1e9
        for t, term in enumerate(self.terms):
            out[len(groups) + t] = _off_chip(ops, self.on_chip) if term == OFF_CHIP else HARDWARE_TERMS[term](ops)
        return out

    def labels(self) -> list[str]:
        return ["+".join(g) for g in GROUPINGS[self.grouping]] + list(self.terms)


#: The candidates: every engine term, with or without memory traffic, at each ridge strength.
CANDIDATES = tuple(
    Candidate("matmul|attention", 0.0, terms, ridge=lam)
    for terms in (ENGINE_TERMS, (*ENGINE_TERMS, "memory traffic"))
    for lam in RIDGES
)
#: The baseline: latency proportional to all MACs.
MACS_ONLY = Candidate("all", 0.0, ())


@dataclass(frozen=True)
class PricedNetwork:
    """The graph a latency is predicted for: its operators, parameters and whether it was fused."""

    ops: tuple[OpCost, ...] = field(repr=False)
    params: int
    fusion: str  # "fused", "nothing to fuse" or "not fused: <why>"

    @property
    def fused_ok(self) -> bool:
        return not self.fusion.startswith("not fused")


@dataclass(frozen=True)
class Fact:
    """One published whole-model latency."""

    label: str
    latency_ms: float
    source: str
    ops: tuple[OpCost, ...] = field(repr=False, compare=False)
    campaign: str = ""
    family: str = ""


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


def _fusable(model) -> bool:
    # What timm.models.reparameterize_model acts on.
    return any(
        hasattr(m, "fuse") or hasattr(m, "reparameterize") or hasattr(m, "switch_to_deploy")
        for m in model.modules()
        if m is not model
    )


def fused_timm_model(model_name: str, img_size: int = 224, num_classes: int = 1000, device: str = "cpu"):
    """A timm model as it runs at inference: ``(model, fusion)``, re-parameterised where timm can fuse
    it (``fusion`` is ``"fused"``, ``"nothing to fuse"`` or ``"not fused: <why>"``).

    Fusion needs real tensors (it fails on the meta device for MobileOne and FastViT), so a fusable
    model is built on the CPU and fused there (seconds); ``device="meta"`` then only moves it.
    """
    from timm.models import reparameterize_model

    model = create_timm_model(model_name, img_size, device="meta", num_classes=num_classes)
    if not _fusable(model):
        if device != "meta":
            model = create_timm_model(model_name, img_size, num_classes=num_classes).eval().to(device)
        return model, "nothing to fuse"
    model = create_timm_model(model_name, img_size, num_classes=num_classes).eval()
    try:
        model = reparameterize_model(model, inplace=True)
        fusion = "fused"
    except Exception as exc:  # noqa: BLE001 - any failure leaves the unfused graph, said so
        fusion = f"not fused: {type(exc).__name__}" + (f": {str(exc).splitlines()[0]}" if str(exc) else "")
        log.warning("%s: timm cannot re-parameterise it (%s); pricing the unfused graph", model_name, fusion)
        model = create_timm_model(model_name, img_size, num_classes=num_classes).eval()
    return model.to(device), fusion


@cache
def timm_network(model_name: str, img_size: int = 224, num_classes: int = 1000) -> PricedNetwork:
    """The graph of a timm model that runs on a phone (:func:`fused_timm_model`): its operators
    (recorded on the meta device), parameters and fusion status."""
    model, fusion = fused_timm_model(model_name, img_size, num_classes, device="meta")
    params = sum(p.numel() for p in model.parameters())
    return PricedNetwork(tuple(record_ops(model, (1, 3, img_size, img_size))), params, fusion)


def timm_family(model_name: str, families) -> str | None:
    """The family of a timm model among ``families``: the published CSV's, else the longest family
    name the model's name starts with (``efficientformerv2_s0`` -> ``efficientformerv2``)."""
    for row in _csv_rows():
        if row.get("timm_model") == model_name and row.get("family") in families:
            return row["family"]
    matches = [f for f in families if model_name.startswith(f)]
    return max(matches, key=len) if matches else None


def timm_ops(model_name: str, img_size: int = 224) -> tuple[OpCost, ...]:
    """Operators of a timm model at ``img_size``, re-parameterised first where timm can fuse it."""
    return timm_network(model_name, img_size).ops


def _csv_rows() -> list[dict]:
    path = published_csv()
    try:
        return list(csv.DictReader(path.open(encoding="utf-8")))
    except FileNotFoundError:
        raise NasError(f"{path}: published latencies not found") from None


def facts_of(label: str, use: str = "fit") -> list[Fact]:
    """The published latencies of a CSV device label (``iphone12``, ``pixel6-cpu``...) marked
    ``use`` (``fit`` or ``test``) whose models timm can build."""
    facts = []
    for row in _csv_rows():
        if row.get("device") != label or not row.get("timm_model") or row.get("use", "fit") != use:
            continue
        facts.append(
            Fact(
                row["timm_model"],
                float(row["latency_ms"]),
                f"{row['campaign']} ({row['paper_model']})",
                timm_network(row["timm_model"], int(row.get("img_size") or 224)).ops,
                campaign=f"{label}/{row['campaign']}",
                family=row.get("family") or row["timm_model"],
            )
        )
    return facts


def published_facts(device: str, use: str = "fit") -> list[Fact]:
    """The published latencies of ``device``'s chip (every campaign) whose models timm can build."""
    spec = get_device(device)
    if spec.published is None:
        raise NasError(f"device {device} has no published measurements; it is measured locally")
    facts = facts_of(spec.published, use)
    if use == "fit" and len(facts) < 4:
        raise NasError(f"{published_csv()}: only {len(facts)} usable published latencies for {device}; need at least 4")
    return facts


# --- fitting ----------------------------------------------------------------------------------


def _design(facts: list[Fact], candidate: Candidate) -> np.ndarray:
    X = np.array([candidate.features(f.ops) for f in facts])
    return np.hstack([X, np.ones((len(facts), 1))])


def _nnls(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    try:
        return nnls(A, b)[0]
    except RuntimeError:  # scipy's active-set NNLS can cycle on near-degenerate designs; a bounded solver does not
        return lsq_linear(A, b, bounds=(0, np.inf)).x


#: In the least-absolute-error fit, a relative error below this counts as this: published latencies
#: are rounded to 0.1 ms, 5% of a 2 ms network, so smaller errors are not information.
ABSOLUTE_ERROR_FLOOR = 0.05
#: Reweighting rounds of the least-absolute-error fit.
ABSOLUTE_ERROR_ROUNDS = 8


def fit_weights(
    X: np.ndarray,
    y: np.ndarray,
    campaigns: list[str],
    reference: str | None,
    ridge: float = 0.0,
    iterations: int = 12,
    rounds: int = ABSOLUTE_ERROR_ROUNDS,
) -> tuple[np.ndarray, dict[str, float]]:
    """Non-negative ``w`` and a factor per campaign minimising ``sum(|f_c * X @ w - y| / y)`` (the mean
    absolute percentage error, the figure the hold-outs report) plus ``ridge * sum((w_j * s_j) ** 2)``
    over the features (not the intercept, the last column), where ``s_j`` is feature j's mean share of
    a latency per unit weight (``mean(X_j / y)``), so one strength means the same for every feature;
    the ``reference`` campaign's factor is fixed at 1.

    Absolute, not squared, error: a family that runs unlike its operators (DeiT on iOS 15) pulls a
    squared fit towards it and away from every other family. Solved by iteratively reweighted least
    squares (``rounds``; 1 is plain least squares on relative error), each round alternating weights
    by NNLS given the factors and each factor in closed form given the weights."""
    names = sorted(set(campaigns))
    if reference not in names:
        reference = max(names, key=campaigns.count)
    index = np.array([names.index(c) for c in campaigns])
    n_features = X.shape[1] - 1
    share = np.maximum(np.abs(X / y[:, None]).mean(axis=0), 1e-12)
    penalty = np.zeros((n_features, X.shape[1]))
    penalty[:, :n_features] = math.sqrt(ridge) * np.eye(n_features)
    weight = np.ones(len(y))  # of each model's squared relative error
    for _ in range(rounds):
        factors = dict.fromkeys(names, 1.0)
        root = np.sqrt(weight)
        for _ in range(iterations if len(names) > 1 else 1):
            scale = np.array([factors[n] for n in names])[index]
            A = np.vstack([X * (scale * root / y)[:, None] / share, penalty])
            w = _nnls(A, np.concatenate([root, np.zeros(n_features)])) / share
            q = (X @ w) / y
            for i, name in enumerate(names):
                if name != reference:
                    qi, wi = q[index == i], weight[index == i]
                    factors[name] = float((wi * qi).sum() / ((wi * qi) @ qi)) if qi @ qi > 0 else 1.0
        scale = np.array([factors[n] for n in names])[index]
        weight = 1 / np.maximum(np.abs(scale * q - 1), ABSOLUTE_ERROR_FLOOR)
    return w, factors


def _held_out(designs, y, campaigns, reference, groups, choose) -> tuple[np.ndarray, list[Candidate]]:
    """Relative errors of each group's models, predicted by the procedure run without that group.
    ``choose(keep)`` picks the candidate from the kept models; a held-out campaign factor is 1."""
    errors = np.empty(len(y))
    chosen = []
    groups = np.asarray(groups)
    for g in dict.fromkeys(groups):
        out = groups == g
        keep = ~out
        candidate = choose(keep)
        chosen.append(candidate)
        kept_campaigns = [c for c, k in zip(campaigns, keep) if k]
        ridge = candidate.ridge if candidate is not None else 0.0  # None: the MACs-only baseline
        w, factors = fit_weights(designs[candidate][keep], y[keep], kept_campaigns, reference, ridge)
        f = np.array([factors.get(c, 1.0) for c, o in zip(campaigns, out) if o])
        errors[out] = (f * (designs[candidate][out] @ w) - y[out]) / y[out]
    return errors, chosen


def _choice(designs, y, campaigns, reference, families):
    """The selection rule: the candidate with the lowest leave-one-family-out mean absolute error
    (leave-one-model-out where the models span fewer than 3 families)."""
    families = np.asarray(families)

    def choose(keep: np.ndarray) -> Candidate:
        fam = families[keep]
        groups = fam if len(set(fam)) >= 3 else np.arange(int(keep.sum()))
        kept_campaigns = [c for c, k in zip(campaigns, keep) if k]

        def score(c: Candidate) -> float:
            sub = {c: designs[c][keep]}
            err, _ = _held_out(sub, y[keep], kept_campaigns, reference, groups, lambda _k: c)
            return float(np.abs(err).mean())

        return min(designs, key=score)

    return choose


def conformal_factors(log_residuals: np.ndarray, level: float = INTERVAL_LEVEL) -> tuple[float, float]:
    """Split-conformal multiplicative interval: ``[exp(lo), exp(hi)]`` of the held-out
    ``log(published / predicted)``, each tail at (1 - level) / 2 with the finite-sample correction."""
    r = np.sort(np.asarray(log_residuals, dtype=float))
    n = len(r)
    if n == 0:
        return 1.0, 1.0
    tail = (1 - level) / 2
    k_hi = min(n, math.ceil((n + 1) * (1 - tail)))
    k_lo = max(1, math.floor((n + 1) * tail))
    return float(np.exp(r[k_lo - 1])), float(np.exp(r[k_hi - 1]))


def _interval_spec(errors: np.ndarray, groups: np.ndarray) -> dict:
    """Conformal factors from held-out relative ``errors`` and their coverage: each group of
    ``groups`` checked against the interval the other groups' residuals give."""
    ratio = 1 / np.maximum(1 + errors, 1e-9)  # published / predicted
    inside = []
    for g in dict.fromkeys(groups):
        lo, hi = conformal_factors(np.log(ratio[groups != g]))
        inside += list((ratio[groups == g] >= lo) & (ratio[groups == g] <= hi))
    lo, hi = conformal_factors(np.log(ratio))
    return {"low_factor": round(lo, 4), "high_factor": round(hi, 4), "coverage": round(float(np.mean(inside)), 4)}


def _error_stats(errors: np.ndarray) -> dict:
    return {
        "mean": round(float(np.abs(errors).mean()), 4),
        "median": round(float(np.median(np.abs(errors))), 4),
        "signed_mean": round(float(errors.mean()), 4),
        "n_models": len(errors),
    }


def _largest_errors(facts: list[Fact], errors: np.ndarray, n: int = 3) -> list[list]:
    """The ``n`` models with the largest absolute held-out errors: ``[label, campaign, signed error]``."""
    order = np.argsort(-np.abs(errors))[:n]
    return [[facts[i].label, facts[i].campaign, round(float(errors[i]), 4)] for i in order]


def _in_family_tau(facts: list[Fact], predicted: np.ndarray) -> dict[str, float]:
    out = {}
    by_family: dict[str, list[int]] = {}
    for i, f in enumerate(facts):
        by_family.setdefault(f.family, []).append(i)
    for family, idx in by_family.items():
        published = [facts[i].latency_ms for i in idx]
        if len(idx) >= 3 and len(set(published)) > 1:
            out[family] = round(float(kendalltau(published, predicted[idx]).statistic), 3)
    return out


@dataclass(frozen=True)
class CostModel:
    """A cost model fitted for one ``device``: the chosen candidate, weights per feature, intercept
    and campaign factors, with its nested hold-out errors and prediction interval."""

    device: str
    candidate: Candidate
    weights: tuple[float, ...]  # ms per unit of each feature (Candidate.labels order)
    intercept_ms: float
    campaign_factors: dict[str, float]
    fitted_on: tuple[str, ...]
    #: Nested hold-out errors (relative, signed): "model" holds out one model, "family" a whole family.
    held_out: dict[str, dict]
    #: Per hold-out ("model", "family"): the interval's factors (multiply a prediction by them) and
    #: their coverage, each held-out group checked against an interval from the others' residuals.
    intervals: dict[str, dict]
    fitted_families: tuple[str, ...]
    macs_only_loo_mean: float  # the baseline: latency proportional to MACs
    test: dict | None = None  # the independent check on published use=test rows (None where none exist)
    in_family_tau: dict[str, float] = field(default_factory=dict)
    calibration: dict | None = None  # set by calibrate(): how few-shot measurements adjusted it

    @property
    def nested_loo_mean(self) -> float:
        return self.held_out["model"]["mean"]

    @property
    def lofo_mean(self) -> float:
        return self.held_out["family"]["mean"]

    def predict_ops(self, ops, intercept: bool = True) -> float:
        ms = float(self.candidate.features(ops) @ np.array(self.weights))
        return ms + (self.intercept_ms if intercept else 0.0)

    @property
    def interval_factors(self) -> tuple[float, float]:
        """The factors of the interval for a network of an unseen family."""
        return self.intervals["family"]["low_factor"], self.intervals["family"]["high_factor"]

    def interval_basis(self, family: str | None) -> str:
        """``"model"`` for a network of a family the model was fitted on (its residuals are those of
        leave-one-model-out: siblings in the fit), else ``"family"``."""
        return "model" if family in self.fitted_families else "family"

    def interval(self, ms: float, family: str | None = None) -> tuple[float, float]:
        """The ``INTERVAL_LEVEL`` prediction interval of a latency ``ms`` predicted for a network of
        ``family`` (``None``: a family the model has not seen)."""
        spec = self.intervals[self.interval_basis(family)]
        return ms * spec["low_factor"], ms * spec["high_factor"]

    def summary(self) -> dict:
        groups = GROUPINGS[self.candidate.grouping]
        return {
            "cost": "sum over operators of max(MACs, r * elements touched), by group, plus hardware terms",
            "grouping": self.candidate.grouping,
            "groups": [list(g) for g in groups],
            "ratio_r": self.candidate.ratio,
            "hardware_terms": {t: term_unit(t, self.candidate.on_chip) for t in self.candidate.terms},
            **({"on_chip_elements": self.candidate.on_chip} if OFF_CHIP in self.candidate.terms else {}),
            "ridge": self.candidate.ridge,
            "weights_ms": dict(zip(self.candidate.labels(), (round(w, 6) for w in self.weights))),
            "intercept_ms": round(self.intercept_ms, 6),
            "campaign_factors": {k: round(v, 4) for k, v in self.campaign_factors.items()},
            "fitted_on": list(self.fitted_on),
            **({"calibration": self.calibration} if self.calibration else {}),
        }

    def error_header(self, family: str | None = None) -> dict:
        """The ``error`` block of a predicted table's header, for networks of ``family``."""
        basis = self.interval_basis(family)
        spec = self.intervals[basis]
        out = {
            "metric": "nested leave-one-family-out mean absolute percentage error",
            "value": self.held_out["family"]["mean"],
            "median": self.held_out["family"]["median"],
            "signed_mean": self.held_out["family"]["signed_mean"],
            "n_models": len(self.fitted_on),
            "leave_one_family_out": self.held_out["family"],
            "leave_one_model_out": self.held_out["model"],
            "macs_only_loo_mean": round(self.macs_only_loo_mean, 4),
            "interval": {
                "level": INTERVAL_LEVEL,
                "low_factor": spec["low_factor"],
                "high_factor": spec["high_factor"],
                "method": f"split-conformal on the nested leave-one-{basis}-out log residuals"
                + (f" ({family} is among the fitted families)" if basis == "model" else ""),
                "coverage_held_out": spec["coverage"],
            },
            "intervals": self.intervals,
            "fitted_families": list(self.fitted_families),
        }
        if self.test:
            out["independent_test"] = self.test
        if self.in_family_tau:
            out["in_family_kendall_tau"] = self.in_family_tau
        if self.calibration:
            out["calibration"] = self.calibration
        return out


def _macs_only_loo(facts: list[Fact], y: np.ndarray) -> float:
    """The baseline's leave-one-model-out error: latency proportional to MACs, one campaign."""
    macs = np.array([MACS_ONLY.features(f.ops) for f in facts])
    errors, _ = _held_out({None: macs}, y, [""] * len(y), "", np.arange(len(y)), lambda _keep: None)
    return float(np.abs(errors).mean())


def fit_facts(
    device: str,
    facts: list[Fact],
    reference: str | None,
    test_facts: list[Fact] = (),
    candidates: tuple[Candidate, ...] = CANDIDATES,
) -> CostModel:
    """Choose, fit and evaluate (nested) a cost model on ``facts``; ``test_facts`` are only predicted."""
    y = np.array([f.latency_ms for f in facts])
    campaigns = [f.campaign for f in facts]
    families = [f.family for f in facts]
    by_features: dict[Candidate, np.ndarray] = {}  # candidates differing only in ridge share a design matrix
    for c in candidates:
        if replace(c, ridge=0.0) not in by_features:
            by_features[replace(c, ridge=0.0)] = _design(facts, c)
    designs = {c: by_features[replace(c, ridge=0.0)] for c in candidates}
    choose = _choice(designs, y, campaigns, reference, families)
    by_family, _ = _held_out(designs, y, campaigns, reference, families, choose)
    by_model, _ = _held_out(designs, y, campaigns, reference, np.arange(len(y)), choose)
    candidate = choose(np.ones(len(y), dtype=bool))
    w, factors = fit_weights(designs[candidate], y, campaigns, reference, candidate.ridge)
    model = CostModel(
        device=device,
        candidate=candidate,
        weights=tuple(float(v) for v in w[:-1]),
        intercept_ms=float(w[-1]),
        campaign_factors=factors,
        fitted_on=tuple(f.label for f in facts),
        held_out={
            "family": {**_error_stats(by_family), "largest": _largest_errors(facts, by_family)},
            "model": _error_stats(by_model),
        },
        intervals={
            "model": _interval_spec(by_model, np.arange(len(y))),
            "family": _interval_spec(by_family, np.asarray(families)),
        },
        fitted_families=tuple(dict.fromkeys(families)),
        macs_only_loo_mean=_macs_only_loo(facts, y),
        in_family_tau=_in_family_tau(facts, (1 + by_family) * y),
    )
    if test_facts:
        model = replace(model, test=evaluate(model, test_facts))
    return model


def evaluate(model: CostModel, facts: list[Fact]) -> dict:
    """Error, bias, interval coverage and in-family Kendall's tau of ``model`` on ``facts``."""
    predicted = np.array([model.predict_ops(f.ops) for f in facts])
    y = np.array([f.latency_ms for f in facts])
    errors = (predicted - y) / y
    bounds = np.array([model.interval(p, f.family) for p, f in zip(predicted, facts)])
    inside = (y >= bounds[:, 0]) & (y <= bounds[:, 1])
    return {
        **_error_stats(errors),
        "interval_coverage": round(float(inside.mean()), 4),
        "families": sorted({f.family for f in facts}),
        "in_family_kendall_tau": _in_family_tau(facts, predicted),
    }


@cache
def fit_cost_model(device: str) -> CostModel:
    """Fit ``device``'s cost model to its chip's published facts (every campaign, each with its
    factor) and estimate its error by nested leave-one-model-out and leave-one-family-out."""
    spec = get_device(device)
    facts = published_facts(device)
    reference = f"{spec.published}/{spec.reference_campaign}" if spec.reference_campaign else None
    return fit_facts(device, facts, reference, published_facts(device, use="test"))


def cost_model_from_table(table: LatencyTable) -> CostModel:
    """The cost model a ``predicted`` table was built with, read back from its header."""
    h = table.header
    m, e = h.method, h.error
    try:
        candidate = Candidate(
            m["grouping"],
            float(m["ratio_r"]),
            tuple(m.get("hardware_terms", {})),
            int(m.get("on_chip_elements", ON_CHIP_ELEMENTS)),
            float(m.get("ridge", 0.0)),
        )
        labels = candidate.labels()
        return CostModel(
            device=h.device,
            candidate=candidate,
            weights=tuple(float(m["weights_ms"][k]) for k in labels),
            intercept_ms=float(m["intercept_ms"]),
            campaign_factors=dict(m.get("campaign_factors", {})),
            fitted_on=tuple(m["fitted_on"]),
            held_out={"family": e["leave_one_family_out"], "model": e["leave_one_model_out"]},
            intervals={k: dict(v) for k, v in e["intervals"].items()},
            fitted_families=tuple(e["fitted_families"]),
            macs_only_loo_mean=float(e["macs_only_loo_mean"]),
            test=e.get("independent_test"),
            in_family_tau=dict(e.get("in_family_kendall_tau", {})),
            calibration=m.get("calibration"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        where = f"{table.path}: " if table.path else ""
        raise NasError(f"{where}not a cost-model table header (missing or bad {exc})") from None


def device_cost_model(device: str) -> CostModel:
    """``device``'s cost model as its shipped predicted tables record it (refitted where none is)."""
    for path in sorted((tables_root() / device).glob("*.json")):
        try:
            table = LatencyTable.read(path)
        except NasError:
            continue
        method = table.header.method
        if table.source == "predicted" and "weights_ms" in method and not method.get("calibration"):
            return cost_model_from_table(table)
    return fit_cost_model(device)


# --- few-shot calibration ---------------------------------------------------------------------


def calibrate(model: CostModel, facts: list[Fact]) -> CostModel:
    """Adapt ``model`` to a new phone from ``k = len(facts)`` timed networks (few-shot).

    One or two networks set one scale (the geometric mean of published over predicted). Three or
    more fit ``a * prior + b * MACs + c`` (all non-negative, least squares on relative error): the
    new phone's latency as a mix of the prior phone's operator costs and plain arithmetic, plus an
    overhead. Three numbers are what five timings can pin down; a prior from another chip or another
    iOS is often unlike the new phone in shape, not only in scale (the iPhone 12's model, best
    rescaled, is still 53% off the iPhone 14's published latencies), and the MACs term, with its
    weight set by the timings, absorbs what the prior gets wrong; ``a = 0`` drops the prior where
    it only hurts. Moving every weight of the prior (a ridge pull towards it) did worse in the
    simulation (``few_shot_curve``) on both phones at every k. The calibrated model keeps the
    prior's interval; its error is estimated by leave-one-out over the k networks where k >= 3.
    """
    if not facts:
        raise NasError("calibration needs at least one timed network")
    k = len(facts)
    prior = np.array([*model.weights, model.intercept_ms])
    if k < 3:
        y = np.array([f.latency_ms for f in facts])
        predicted = _design(facts, model.candidate) @ prior
        scale = float(np.exp(np.mean(np.log(y / np.maximum(predicted, 1e-12)))))
        candidate, weights, errors, method = model.candidate, scale * prior, None, "scale"
    else:
        # Features of the mix, once per network: the prior's prediction, its MACs (G) and 1.
        X = np.array([[model.predict_ops(f.ops), _all_macs(f.ops), 1.0] for f in facts])
        y = np.array([f.latency_ms for f in facts])
        keep = ~np.eye(k, dtype=bool)
        errors = np.array([X[i] @ _prior_mix(X[keep[i]], y[keep[i]]) / y[i] - 1 for i in range(k)])
        a, b, c = _prior_mix(X, y)
        candidate = model.candidate
        if ALL_MACS not in candidate.terms:
            candidate = replace(candidate, terms=(*candidate.terms, ALL_MACS))
            prior = np.insert(prior, -1, 0.0)
        weights = a * prior
        weights[candidate.labels().index(ALL_MACS)] += b
        weights[-1] += c
        method = f"{round(a, 4):g} x prior + {round(b, 4):g} ms/GMAC x MACs + {round(c, 4):g} ms"
    calibration = {
        "method": method,
        "k": k,
        "networks": [f.label for f in facts],
        "leave_one_out": _error_stats(errors) if errors is not None else "not estimated (k < 3)",
    }
    return replace(
        model,
        candidate=candidate,
        weights=tuple(float(v) for v in weights[:-1]),
        intercept_ms=float(weights[-1]),
        fitted_on=model.fitted_on + tuple(f.label for f in facts),
        calibration=calibration,
    )


def _prior_mix(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative ``(a, b, c)`` of ``a * prior + b * MACs + c`` (the columns of ``X``), least squares
    on relative error."""
    return _nnls(X / y[:, None], np.ones(len(y)))


def few_shot_curve(
    new_label: str,
    prior_label: str,
    ks: tuple[int, ...] = (0, 1, 3, 5, 10),
    draws: int = 200,
    seed: int = 0,
) -> dict[int, dict]:
    """Simulate few-shot calibration: pretend the phone ``new_label`` (a CSV device label) is new,
    start from the model fitted to ``prior_label``'s facts, calibrate with ``k`` of the new phone's
    models drawn at random (``draws`` times, seeded) and predict the rest. Returns, per ``k``, the
    mean absolute percentage error on the rest (averaged over draws) and its spread."""
    # A label that is a device's chip reuses that device's model (and its reference campaign).
    device = next((d.name for d in DEVICES.values() if d.published == prior_label), None)
    base = fit_cost_model(device) if device else fit_facts(prior_label, facts_of(prior_label), None)
    new = facts_of(new_label)
    rng = np.random.default_rng(seed)
    out = {}
    for k in ks:
        if k >= len(new):
            continue
        errors = []
        for _ in range(draws if k else 1):
            order = rng.permutation(len(new))
            shots, rest = [new[i] for i in order[:k]], [new[i] for i in order[k:]]
            m = calibrate(base, shots) if k else base
            errors.append(np.mean([abs(m.predict_ops(f.ops) / f.latency_ms - 1) for f in rest]))
        out[k] = {
            "mean": float(np.mean(errors)),
            "p10": float(np.quantile(errors, 0.1)),
            "p90": float(np.quantile(errors, 0.9)),
            "draws": len(errors),
            "n_new": len(new),
        }
    return out


# --- pricing ----------------------------------------------------------------------------------


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
        error=model.error_header(space.family),
        method=model.summary(),
        notes=f"Predicted, not measured: {spec.description}. Fitted to the published whole-model latencies in "
        f"latency_tables/published/published_latency.csv (device {spec.published!r}, every campaign; "
        f"reference campaign {spec.reference_campaign!r})."
        + (" Calibrated to timings of networks on a real phone." if model.calibration else ""),
    )
    return LatencyTable(header, entries)
