"""The choices the search's command-line options offer, light on purpose (no torch, no numpy): the
objectives, the default strategy and how a greedy step is screened, which ``nas search --help`` shows
before the engine is loaded. :mod:`nas.search.objective` and :mod:`nas.search.greedy.screen` use them.
"""

from __future__ import annotations

from dataclasses import dataclass

from nas.core.errors import NasError

#: What a search can optimise: MES (higher is better), latency or parameters (lower is better).
OBJECTIVES = ("mes", "latency", "params")
#: The strategy ``nas search`` uses without ``--strategy``: constrained evolution, whose predictor is on
#: by default. benchmarks/search_strategies.py chose it (docs/results/search-strategies-main.txt): at
#: equal evaluations its choice scored above random search's on held-out images in 5 of 5 seeds, and
#: above greedy slimming's on average, in less wall time than greedy's full search.
DEFAULT_STRATEGY = "evolution"


@dataclass(frozen=True)
class ScreenConfig:
    """How a greedy step is screened.

    Attributes:
        keep: shrinks evaluated per step, best predicted first (0: evaluate every shrink).
        explore: further shrinks evaluated per step, of the (kind, stage) evaluated least recently,
            so that a kind the predictor undervalues is measured again.
        warmup_steps: first steps, which evaluate the largest shrink of every (kind, stage).
        halflife: age in steps at which an evaluation counts half in the fit.
        ridge: L2 penalty of the fit (on standardised features; positive, so that features no
            evaluation has varied yet keep the fit well-posed).
    """

    keep: int = 3
    explore: int = 1
    warmup_steps: int = 1
    halflife: float = 4.0
    ridge: float = 0.01

    def __post_init__(self) -> None:
        if self.keep < 0 or self.explore < 0 or self.warmup_steps < 1:
            raise NasError(
                f"screen: keep and explore must be 0 or more and warmup_steps 1 or more, got {self.keep}, "
                f"{self.explore}, {self.warmup_steps}"
            )
        if not (self.halflife > 0 and self.ridge > 0):
            raise NasError(f"screen: halflife and ridge must be positive, got {self.halflife}, {self.ridge}")

    @property
    def enabled(self) -> bool:
        return self.keep > 0
