"""Accuracy predictors: a fixed encoding of an architecture, and a model fitted on evaluations.

OFA (§3.3) and HAT screen candidates with a predictor fitted on (encoding, accuracy) pairs so that
only the promising ones are evaluated. Here the predictor is an object a strategy is handed
(:class:`AccuracyPredictor`): greedy slimming screens its shrinks with it (:mod:`nas.search.greedy.screen`),
evolution its children (:mod:`nas.search.evolution`). The encoding (:func:`encode`) describes an
architecture in its space; the default model is scikit-learn's ridge regression on standardised
features (:class:`RidgePredictor`), cheap enough to refit at every step of a search.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from nas.core.arch import ArchConfig
from nas.core.space import SearchSpace


def encode(space: SearchSpace, arch: ArchConfig) -> np.ndarray:
    """A fixed-length description of ``arch`` in ``space``, every entry in [0, 1].

    Per stage: depth, width and attention blocks (each over the space's largest), and per supernet
    slot the FFN hidden width over the slot's largest (0 for an absent block); for families with
    per-position block choice, whether the slot is an attention block and whether it is skipped.
    """
    features: list[float] = []
    for s, stage in enumerate(space.stages):
        features += [
            arch.depths[s] / stage.max_depth,
            arch.widths[s] / stage.max_width,
            arch.attention[s] / max(1, stage.max_attention) if arch.attention else 0.0,
        ]
        hidden = arch.hidden_widths[s] if arch.hidden_widths else ()
        top = [stage.max_width * stage.slot_max_ratio(slot) for slot in range(stage.max_depth)]
        if arch.block_types:
            types = arch.block_types[s]
            kept = [slot for slot, kind in enumerate(types) if kind != "skip"]
            per_slot = dict(zip(kept, hidden))
            for slot in range(stage.max_depth):
                kind = types[slot] if slot < len(types) else "skip"
                features += [per_slot.get(slot, 0) / top[slot], float(kind == "mb3d"), float(kind == "skip")]
        else:
            features += [(hidden[slot] / top[slot]) if slot < len(hidden) else 0.0 for slot in range(stage.max_depth)]
    return np.asarray(features, dtype=np.float64)


@runtime_checkable
class AccuracyPredictor(Protocol):
    """Predicts the supernet accuracy of architectures from those evaluated so far."""

    def fit(
        self, archs: Sequence[ArchConfig], accuracies: Sequence[float], weights: Sequence[float] | None = None
    ) -> AccuracyPredictor:
        """Fit on evaluated ``archs`` (``weights``: how much each counts; None: equally); returns self."""
        ...

    def predict(self, archs: Sequence[ArchConfig]) -> np.ndarray:
        """Predicted accuracies of ``archs``."""
        ...


class RidgePredictor:
    """Ridge regression (scikit-learn) on :func:`encode`'s features, standardised with the weights.

    ``ridge`` is the L2 penalty per observation on standardised features: positive, so that a feature
    no evaluation has varied yet keeps the fit well-posed."""

    def __init__(self, space: SearchSpace, ridge: float = 0.01):
        self.space, self.ridge = space, ridge
        self._model = None

    def fit(
        self, archs: Sequence[ArchConfig], accuracies: Sequence[float], weights: Sequence[float] | None = None
    ) -> RidgePredictor:
        from sklearn.linear_model import Ridge

        x = np.stack([encode(self.space, a) for a in archs])
        y = np.asarray(accuracies, dtype=np.float64)
        w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
        w = w / w.sum()  # the penalty below is per observation, whatever the weights' scale
        # Standardised with the weights; a feature no evaluation has varied keeps scale 1.
        self._mean = w @ x
        spread = np.sqrt(np.maximum(w @ (x - self._mean) ** 2, 0.0))
        self._scale = np.where(spread > 1e-9, spread, 1.0)
        self._model = Ridge(alpha=self.ridge / len(y)).fit((x - self._mean) / self._scale, y, sample_weight=w)
        return self

    def predict(self, archs: Sequence[ArchConfig]) -> np.ndarray:
        if self._model is None:
            raise RuntimeError("RidgePredictor.predict before fit")
        x = np.stack([encode(self.space, a) for a in archs])
        return self._model.predict((x - self._mean) / self._scale)


def kendall_tau(predicted: Sequence[float], measured: Sequence[float]) -> float | None:
    """Kendall's tau-b between predictions and measurements (None: fewer than 3 pairs, or no spread)."""
    if len(predicted) < 3:
        return None
    from scipy.stats import kendalltau

    tau = kendalltau(predicted, measured).statistic
    return None if tau is None or np.isnan(tau) else float(tau)
