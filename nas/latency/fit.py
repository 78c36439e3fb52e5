"""The one fit every latency model uses: non-negative least squares on relative error."""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls


def relative_nnls(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative ``w`` minimising ``sum(((X @ w - y) / y) ** 2)``: every model's error counts in
    percent, so fast and slow networks weigh alike."""
    w, _ = nnls(X / y[:, None], np.ones(len(y)))
    return w
