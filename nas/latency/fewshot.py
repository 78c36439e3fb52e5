"""Few-shot calibration: adapt a prior phone's cost model to a new phone from a few timed networks,
and the simulation (:func:`few_shot_curve`) that chose how."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from nas.core.errors import NasError
from nas.latency.costmodel import CostModel, design_matrix, error_stats, fit_cost_model, fit_facts
from nas.latency.devices import DEVICES
from nas.latency.fit import relative_nnls
from nas.latency.published import Fact, facts_of
from nas.latency.terms import ALL_MACS, HARDWARE_TERMS


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
        predicted = design_matrix(facts, model.candidate) @ prior
        scale = float(np.exp(np.mean(np.log(y / np.maximum(predicted, 1e-12)))))
        candidate, weights, errors, method = model.candidate, scale * prior, None, "scale"
    else:
        # Features of the mix, once per network: the prior's prediction, its MACs (G) and 1.
        X = np.array([[model.predict_ops(f.ops), HARDWARE_TERMS[ALL_MACS](f.ops), 1.0] for f in facts])
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
        "leave_one_out": error_stats(errors) if errors is not None else "not estimated (k < 3)",
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
    return relative_nnls(X, y)


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
