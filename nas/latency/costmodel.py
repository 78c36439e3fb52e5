"""The phone cost model: a per-operator cost model fitted to published whole-model latencies.

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

import math
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np
from scipy.stats import kendalltau

from nas.latency.devices import get_device
from nas.latency.fit import fit_weights
from nas.latency.published import Fact, published_facts
from nas.latency.terms import CANDIDATES, GROUPINGS, MACS_ONLY, OFF_CHIP, Candidate, term_unit

#: Nominal coverage of the prediction intervals.
INTERVAL_LEVEL = 0.8


def design_matrix(facts: list[Fact], candidate: Candidate) -> np.ndarray:
    """The features of ``candidate`` for each fact's network, with a last column of ones (the intercept)."""
    X = np.array([candidate.features(f.ops) for f in facts])
    return np.hstack([X, np.ones((len(facts), 1))])


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


def error_stats(errors: np.ndarray) -> dict:
    """Mean, median and signed mean of relative ``errors`` (rounded) and how many there are."""
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
    #: Each fitted model as (label, family, published ms, ms predicted with its family held out): the
    #: leave-one-family-out predictions the error is measured on (the docs draw them).
    held_out_rows: tuple[tuple[str, str, float, float], ...] = ()

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
            by_features[replace(c, ridge=0.0)] = design_matrix(facts, c)
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
            "family": {**error_stats(by_family), "largest": _largest_errors(facts, by_family)},
            "model": error_stats(by_model),
        },
        intervals={
            "model": _interval_spec(by_model, np.arange(len(y))),
            "family": _interval_spec(by_family, np.asarray(families)),
        },
        fitted_families=tuple(dict.fromkeys(families)),
        macs_only_loo_mean=_macs_only_loo(facts, y),
        in_family_tau=_in_family_tau(facts, (1 + by_family) * y),
        held_out_rows=tuple(
            (f.label, f.family, float(ms), float((1 + e) * ms)) for f, ms, e in zip(facts, y, by_family)
        ),
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
        **error_stats(errors),
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
