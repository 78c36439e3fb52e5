"""The one fit every latency model uses: non-negative least squares on relative error.

Measured and imported tables calibrate their block sums to whole-network timings with
:func:`relative_nnls`; the phone cost models fit their per-feature weights and campaign factors with
:func:`fit_weights` (least absolute relative error by reweighted non-negative least squares, with a ridge),
and few-shot calibration mixes a prior with :func:`relative_nnls`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import lsq_linear, nnls


def nonnegative_lstsq(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative ``x`` minimising ``||A @ x - b||``."""
    try:
        return nnls(A, b)[0]
    except RuntimeError:  # scipy's active-set NNLS can cycle on near-degenerate designs; a bounded solver does not
        return lsq_linear(A, b, bounds=(0, np.inf)).x


def relative_nnls(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative ``w`` minimising ``sum(((X @ w - y) / y) ** 2)``: every model's error counts in
    percent, so fast and slow networks weigh alike."""
    return nonnegative_lstsq(X / y[:, None], np.ones(len(y)))


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
            w = nonnegative_lstsq(A, np.concatenate([root, np.zeros(n_features)])) / share
            q = (X @ w) / y
            for i, name in enumerate(names):
                if name != reference:
                    qi, wi = q[index == i], weight[index == i]
                    factors[name] = float((wi * qi).sum() / ((wi * qi) @ qi)) if qi @ qi > 0 else 1.0
        scale = np.array([factors[n] for n in names])[index]
        weight = 1 / np.maximum(np.abs(scale * q - 1), ABSOLUTE_ERROR_FLOOR)
    return w, factors
