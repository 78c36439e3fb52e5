"""The last step of every search: its score noise measured, its finalists scored again at a higher
fidelity, and the choice made by that score.

A search chooses among sub-networks scored on a subset of the search split with BatchNorm
recalibrated on a few batches: scores carry noise (about 1.6 points of binomial error alone for 1,000
images at 48%), and the best of many noisy scores flatters whichever network drew the luckiest.
So every strategy ends the same way (OFA §3.3 and AttentiveNAS score their finalists the same way):

1. **Noise.** The ``noise_networks`` best candidates are scored again at ``noise_draws`` other draws
   of calibration batches and scored images (same counts). The pooled spread of a network's scores
   across draws is the standard deviation of one search score.
2. **Finalists.** The ``finalists`` best candidates (the strategy's own choice among them) are
   scored at ``final_draws`` draws of a higher fidelity: every image of the search split (or
   ``final_images``) with ``final_calib_batches`` calibration batches (default: twice the
   search's). The choice is the best mean; the spread across draws says how far apart two finalists
   must be to be told apart, and the result says so when the best two are not.

Every score lands in the run's evaluation cache under its fidelity, so a resumed search repeats none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.typed_yaml import setting
from nas.runs.folder import RunFolder
from nas.search.evaluator import Fidelity
from nas.search.picture import SearchPicture, plot_search
from nas.search.strategy import Scored, SearchContext, StrategyOutcome
from nas.studies.stats import pooled_std


@dataclass(frozen=True)
class FinalScoring:
    """How a search's decision is scored (``nas search --finalists``, ``--final-*``, ``--noise-*``)."""

    finalists: int = setting(
        4, low=0, help="best candidates scored again at the finalists' fidelity; the best of them is chosen (0: none)"
    )
    final_draws: int = setting(2, low=1, help="draws of calibration images each finalist is scored at (mean)")
    final_calib_batches: int | None = setting(
        None, low=1, help="calibration batches of a finalist's score (default: twice the search's)"
    )
    final_images: int | None = setting(
        None, low=1, help="images of the search split a finalist is scored on (default: every one)"
    )
    noise_networks: int = setting(3, low=0, help="best candidates scored at other draws to measure score noise")
    noise_draws: int = setting(2, low=1, help="other draws of calibration and scored images per noise network")
    final_quantize: str | None = setting(
        None,
        choices=(None, "int8"),
        help="int8: finalists are scored quantized (PT2E int8, calibrated on their BatchNorm images), so the "
        "choice counts what quantization costs each of them",
    )

    def fidelity(self, search: Fidelity, draw: int) -> Fidelity:
        """The finalists' fidelity at ``draw``."""
        calib_batches = self.final_calib_batches or 2 * search.calib_batches
        return Fidelity(calib_batches, self.final_images, draw, quantize=self.final_quantize)

    def recorded(self) -> dict[str, Any]:
        """As a run records it: ``final_quantize`` only when set, so that runs of earlier versions resume."""
        return {k: v for k, v in asdict(self).items() if not (k == "final_quantize" and v is None)}


@dataclass(frozen=True)
class Finalist:
    """A finalist: its search score and its scores at the finalists' fidelity."""

    arch: ArchConfig
    search_accuracy: float
    final_scores: tuple[float, ...]

    @property
    def final_accuracy(self) -> float:
        return sum(self.final_scores) / len(self.final_scores)

    def to_dict(self) -> dict[str, Any]:
        return {
            "digest": self.arch.digest,
            "search_accuracy": self.search_accuracy,
            "final_accuracy": self.final_accuracy,
            "final_scores": list(self.final_scores),
        }


def separable_gap(noise_sd: float, draws: int) -> float:
    """The smallest gap between two finalists' final accuracies, each the mean of ``draws`` scores of standard
    deviation ``noise_sd``, that their noise tells apart: twice the sd of the difference, sqrt(2 / draws) * sd."""
    return 2 * noise_sd * math.sqrt(2 / draws)


@dataclass(frozen=True)
class Noise:
    """The standard deviation of one score, pooled over ``networks`` networks scored at ``draws`` draws
    each (None: not measured)."""

    sd: float | None
    networks: int
    draws: int
    fidelity: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pooled_sd(groups: Sequence[Sequence[float]]) -> float | None:
    """The pooled within-group standard deviation (:func:`nas.studies.stats.pooled_std`); None when no
    group has two values (nothing to estimate it from)."""
    return pooled_std(groups) if any(len(g) > 1 for g in groups) else None


@dataclass(frozen=True)
class SearchResult:
    """What ``nas search`` found, whatever the strategy: ``result.json`` and what the CLI prints."""

    strategy: str
    options: dict[str, Any]
    run: str
    arch: ArchConfig
    accuracy: float  # at the finalists' fidelity (the search's when there are no finalists)
    search_accuracy: float
    cost: dict[str, Any]  # params, latency_ms, mes
    evaluations: int  # sub-networks scored at the search's fidelity
    extra_evaluations: int  # scores at other fidelities: noise draws and finalists
    scored_images: int
    final_images: int | None
    noise: Noise
    final_noise: Noise | None
    finalists: tuple[Finalist, ...]
    within_noise: bool | None  # the best two finalists are not told apart by their scores
    strategy_choice: ArchConfig  # the strategy's own choice
    lines: tuple[str, ...]  # the strategy's own lines
    record: dict[str, Any]  # the strategy's own fields
    context: dict[str, Any] = field(default_factory=dict)  # latency source and interval, sizes, provenance
    final_quantize: str | None = None  # the finalists were scored quantized (int8)

    def to_dict(self) -> dict[str, Any]:
        """``result.json``: the strategy's own fields first (the keys earlier versions wrote stay)."""
        return {
            **self.record,
            "strategy": self.strategy,
            "options": self.options,
            "arch": self.arch.to_dict(),
            "digest": self.arch.digest,
            "accuracy": self.accuracy,
            "search_accuracy": self.search_accuracy,
            **self.cost,
            "evaluations": self.evaluations,
            "extra_evaluations": self.extra_evaluations,
            "scored_images": self.scored_images,
            "final_images": self.final_images,
            "score_noise": self.noise.to_dict(),
            "final_noise": self.final_noise.to_dict() if self.final_noise else None,
            "finalists": [f.to_dict() for f in self.finalists],
            "within_noise": self.within_noise,
            "strategy_choice": self.strategy_choice.digest,
            "strategy_choice_arch": self.strategy_choice.to_dict(),
            **self.context,
            **({"final_quantize": self.final_quantize} if self.final_quantize else {}),
        }

    def summary_lines(self) -> list[str]:
        """What ``nas search`` prints."""
        lines = [
            f"run          {self.run} (strategy {self.strategy}: {self.evaluations} sub-networks scored at the "
            f"search's fidelity, {self.extra_evaluations} more scores for noise and finalists)",
            *self.lines,
        ]
        how = (
            f"the best of {len(self.finalists)} finalists scored again on {self.final_images} images"
            if self.finalists
            else "the strategy's choice"
        )
        lines.append(f"arch         {self.run}/arch.yaml  (digest {self.arch.digest}; {how})")
        top1 = f"top-1        {100 * self.accuracy:.2f}% on the search split"
        if self.finalists:
            quantized = f", quantized to {self.final_quantize}" if self.final_quantize else ""
            top1 += f" at the finalists' fidelity{quantized} (search score {100 * self.search_accuracy:.2f}%)"
        lines.append(top1)
        noise = f"noise        one search score ±{100 * self.noise.sd:.2f} (sd" if self.noise.sd is not None else ""
        if noise:
            noise += f", {self.noise.networks} networks x {self.noise.draws} draws)"
        else:
            noise = "noise        not measured (--noise-networks 0)"
        if self.final_noise and self.final_noise.sd is not None:
            noise += f"; one finalist score ±{100 * self.final_noise.sd:.2f}"
        lines.append(noise)
        if self.within_noise:
            runner = sorted(self.finalists, key=lambda f: -f.final_accuracy)[1]
            lines.append(
                f"             the best two finalists ({100 * self.accuracy:.2f}% and "
                f"{100 * runner.final_accuracy:.2f}%) are within noise of each other: either is as good a choice"
            )
        return lines


def finalize(context: SearchContext, outcome: StrategyOutcome, scoring: FinalScoring) -> SearchResult:
    """Measure the score noise, score the finalists, choose; write ``arch.yaml`` and ``result.json``."""
    pool, strategy = context.pool, context.config.strategy
    if not outcome.candidates:
        raise NasError(f"{context.run}: strategy {strategy} returned no candidate that meets the target")
    ranked = sorted(outcome.candidates, key=lambda c: (-c.accuracy, c.arch.digest))
    search_fidelity = pool.fidelity
    extra = 0

    # 1. Noise of one search score: the best networks at other draws of the same counts.
    noisy = ranked[: scoring.noise_networks]
    groups = [[c.accuracy] for c in noisy]
    for draw in range(1, scoring.noise_draws + 1 if noisy else 1):
        fidelity = Fidelity(search_fidelity.calib_batches, search_fidelity.images, draw)
        for group, score in zip(groups, pool.score([c.arch for c in noisy], fidelity)):
            group.append(score)
        extra += len(noisy)
    noise = Noise(pooled_sd(groups), len(noisy), scoring.noise_draws + 1 if noisy else 0, search_fidelity.key)

    # 2. The finalists: the best candidates (and the strategy's own choice) at the finalists' fidelity.
    finalists: tuple[Finalist, ...] = ()
    final_noise, within_noise, final_images = None, None, None
    chosen = outcome.chosen
    if scoring.finalists:
        picked = ranked[: scoring.finalists]
        if outcome.chosen.arch.digest not in {c.arch.digest for c in picked}:
            picked = picked[:-1] + [outcome.chosen]
        scores: list[list[float]] = [[] for _ in picked]
        for draw in range(scoring.final_draws):
            fidelity = scoring.fidelity(search_fidelity, draw)
            for mine, score in zip(scores, pool.score([c.arch for c in picked], fidelity)):
                mine.append(score)
            extra += len(picked)
        final_images = pool.images(scoring.fidelity(search_fidelity, 0))
        finalists = tuple(Finalist(c.arch, c.accuracy, tuple(s)) for c, s in zip(picked, scores))
        final_noise = Noise(
            pooled_sd(scores), len(picked), scoring.final_draws, scoring.fidelity(search_fidelity, 0).key
        )
        best = max(finalists, key=lambda f: (f.final_accuracy, f.search_accuracy, f.arch.digest))
        chosen = Scored(best.arch, best.search_accuracy)
        if len(finalists) > 1 and final_noise.sd is not None:
            runner_up = sorted(f.final_accuracy for f in finalists)[-2]
            within_noise = best.final_accuracy - runner_up < separable_gap(final_noise.sd, final_noise.draws)
    accuracy = max(f.final_accuracy for f in finalists) if finalists else chosen.accuracy
    cost = context.cost(chosen.arch)
    result = SearchResult(
        strategy=strategy,
        options=dict(context.config.strategy_options),
        run=str(context.run),
        arch=chosen.arch,
        accuracy=accuracy,
        search_accuracy=chosen.accuracy,
        cost=cost.to_dict(),
        evaluations=pool.searched,
        extra_evaluations=extra,
        scored_images=pool.scored_images,
        final_images=final_images,
        noise=noise,
        final_noise=final_noise,
        finalists=finalists,
        within_noise=within_noise,
        strategy_choice=outcome.chosen.arch,
        lines=outcome.lines,
        record=outcome.record,
        context={
            "latency_interval_ms": context.latency_interval(cost.latency_ms),
            "latency_source": context.config.latency_source,
            "img_size": context.config.img_size,  # cost priced at
            "train_img_size": context.config.train_img_size,  # the supernet trained and scores at
            "provenance": context.clock.summary(),
        },
        final_quantize=scoring.final_quantize if finalists else None,
    )
    tolerance = context.config.strategy_options.get("tolerance")
    picture = SearchPicture(
        pool.evaluated(),
        [(f.arch, f.final_accuracy, final_noise.sd if final_noise else None) for f in finalists],
        chosen.arch,
        outcome.generation,
        outcome.path,
    )
    objective = context.objective
    band = objective.band(tolerance) if tolerance is not None else None
    title = f"{strategy} search, {objective.name} {objective.target:g}: {pool.searched} evaluated"
    plot_search(context.run / "search.png", picture, context.cost, objective, band, title)
    chosen.arch.save(context.run / "arch.yaml")
    RunFolder(context.run).write_result(result.to_dict())
    return result
