"""Constrained evolution in a budget band (``--strategy evolution``).

How the strong weight-sharing systems search a trained supernet (OFA §3.3, HAT §3.3, AutoFormer §3.3,
SPOS §3.4): a population of sub-networks, the best of which (the elite) breed the next generation by
mutation and crossover; every candidate must satisfy the budget before it is evaluated, since its
cost needs no evaluation. Here the budget is a two-sided band of the objective
(:meth:`Objective.band`: latency or parameters within ``tolerance`` below the target, MES within it
above), so that every network the search weighs is a fair rival of one at the target.

- The first population is random networks in the band (:meth:`SearchSpace.sample`) plus any named
  by the user (``--set include=[runs/greedy/arch.yaml]``: e.g. greedy slimming's result).
- Every later generation: the elite is the ``parents`` best networks evaluated so far (it survives,
  since the archive is kept); children come by crossover of two parents (a ``crossover`` share) or
  by mutation of one (:meth:`SearchSpace.mutate`, :meth:`SearchSpace.crossover`), repaired into the
  space; a child outside the band or evaluated before is bred again.
- With ``predictor`` (the default; ``--set predictor=false`` leaves it out), ``screen`` children
  are bred per evaluation and an accuracy predictor fitted on every evaluation so far
  (:mod:`nas.search.predictor`) picks the best, plus an ``explore`` share drawn at random among the
  rest; the predictor's Kendall tau on the networks it had not seen is logged.
- A generation is one batch on the evaluator pool (Ray workers share it). The archive and the random
  generator's state are saved after every generation (``population.json``), so ``--resume``
  continues exactly where the interrupted search would have gone.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import setting
from nas.search.family import member_arch_path
from nas.search.objective import SearchProblem, band_tolerance
from nas.search.predictor import AccuracyPredictor, RidgePredictor, kendall_tau
from nas.search.sample import InBand, sample_distinct
from nas.search.strategy import Scored, SearchContext, StrategyOutcome, register_strategy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvolutionOptions:
    """``--strategy evolution``'s options (``--set key=value``)."""

    evaluations: int = setting(100, low=2, help="supernet evaluations in all, the first population included")
    population: int = setting(16, low=2, help="sub-networks evaluated per generation")
    parents: int = setting(8, low=1, help="the elite: the best networks evaluated so far, which breed every generation")
    mutation: float = setting(0.15, low=0, high=1, help="probability that a mutated child draws each choice anew")
    crossover: float = setting(
        0.5, low=0, high=1, help="share of children bred by crossover of two parents; the rest by mutation of one"
    )
    tolerance: float = band_tolerance()
    include: tuple[str, ...] = setting(
        (),
        help="networks of the first population: arch YAML files, member names or family members RUN@TARGET "
        "(e.g. greedy's arch.yaml); in a family search each band takes those inside it",
    )
    predictor: bool = setting(
        True,
        help="screen children with an accuracy predictor fitted on the evaluations so far (false: breed and "
        "evaluate every child)",
    )
    screen: int = setting(8, low=1, help="with predictor: children bred per child evaluated")
    explore: float = setting(
        0.25, low=0, high=1, help="with predictor: share of each generation drawn at random among the screened-out"
    )


@dataclass
class Population:
    """The archive of an evolutionary search: every network evaluated, by generation, and the random
    generator's state after the last complete generation (``population.json``)."""

    members: list[dict[str, Any]] = field(default_factory=list)  # arch, digest, accuracy, generation, predicted
    generations: list[dict[str, Any]] = field(default_factory=list)  # per generation: evaluated, best, tau
    rng_state: list | None = None

    @property
    def seen(self) -> set[str]:
        return {m["digest"] for m in self.members}

    def elite(self, n: int) -> list[ArchConfig]:
        """The ``n`` best networks evaluated so far (ties: the earlier)."""
        order = sorted(range(len(self.members)), key=lambda i: (-self.members[i]["accuracy"], i))
        return [ArchConfig.from_dict(self.members[i]["arch"]) for i in order[:n]]

    def best(self) -> dict[str, Any]:
        return min(enumerate(self.members), key=lambda im: (-im[1]["accuracy"], im[0]))[1]

    def state_dict(self) -> dict[str, Any]:
        """The archive as ``population.json`` holds it (what :meth:`from_state_dict` rebuilds)."""
        return {"members": self.members, "generations": self.generations, "rng_state": self.rng_state}

    @classmethod
    def from_state_dict(cls, data: dict[str, Any]) -> Population:
        """The archive :meth:`state_dict` gave (a ``ValueError``, ``KeyError`` or ``TypeError`` if it is not one)."""
        population = cls(list(data["members"]), list(data["generations"]), data["rng_state"])
        for m in population.members:
            ArchConfig.from_dict(m["arch"])
            float(m["accuracy"])
        return population


def _rng_state(rng: random.Random) -> list:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _set_rng_state(rng: random.Random, state: Sequence) -> None:
    rng.setstate((state[0], tuple(state[1]), state[2]))


def breed(
    space: SearchSpace,
    parents: Sequence[ArchConfig],
    n: int,
    accept: Callable[[ArchConfig], bool],
    seen: set[str],
    rng: random.Random,
    options: EvolutionOptions,
    max_tries: int = 200,
) -> list[ArchConfig]:
    """``n`` distinct children of ``parents`` that ``accept`` takes and ``seen`` does not hold; what
    ``max_tries`` tries per child leave short is drawn at random (still accepted and unseen)."""
    children: dict[str, ArchConfig] = {}
    for _ in range(n * max_tries):
        if len(children) == n:
            break
        if len(parents) >= 2 and rng.random() < options.crossover:
            first, second = rng.sample(list(parents), 2)
            child = space.crossover(first, second, rng)
        else:
            child = space.mutate(rng.choice(list(parents)), rng, options.mutation)
        if child.digest not in seen and child.digest not in children and accept(child):
            children[child.digest] = child
    if len(children) < n:  # the parents' neighbourhood is used up: fresh blood
        fresh = sample_distinct(space, n - len(children), accept, rng, exclude=seen | set(children))
        children.update((a.digest, a) for a in fresh)
    return list(children.values())


def evolve(
    problem: SearchProblem,
    options: EvolutionOptions,
    rng: random.Random,
    include: Sequence[ArchConfig] = (),
    population: Population | None = None,
    on_generation: Callable[[Population], None] | None = None,
    predictor: AccuracyPredictor | None = None,
) -> Population:
    """Evolve until ``options.evaluations`` networks are evaluated, continuing ``population`` (its
    saved random state included) when given; ``on_generation`` gets the archive after each."""
    space, accuracy, cost, objective = problem.space, problem.accuracy, problem.cost, problem.objective
    tolerance = options.tolerance

    def accept(arch: ArchConfig) -> bool:
        return objective.in_band(cost(arch), tolerance)

    for arch in include:
        if not accept(arch):
            low, high = objective.band(tolerance)
            raise NasError(
                f"--set include: {arch.short()} has {objective.name} {objective.value(cost(arch)):.4g}, outside the "
                f"band {low:.4g} to {high:.4g} ({objective.unit}); widen it (--set tolerance=...) or leave it out"
            )
    population = population or Population()
    if population.rng_state is not None:
        _set_rng_state(rng, population.rng_state)
    if options.predictor and predictor is None:
        predictor = RidgePredictor(space)
    while len(population.members) < options.evaluations:
        generation = len(population.generations)
        n = min(options.population, options.evaluations - len(population.members))
        predicted: dict[str, float] = {}
        if generation == 0:
            first = list({a.digest: a for a in include}.values())[:n]
            archs = first + sample_distinct(space, n - len(first), accept, rng, exclude={a.digest for a in first})
            if not archs:
                low, high = objective.band(tolerance)
                raise NasError(
                    f"no random sub-network of {space.name} lies in the band {low:.4g} to {high:.4g} "
                    f"({objective.unit}); widen it (--set tolerance=...) or choose another --target"
                )
        else:
            parents = population.elite(options.parents)
            if options.predictor:
                pool = breed(space, parents, n * options.screen, accept, population.seen, rng, options)
                predictor.fit(
                    [ArchConfig.from_dict(m["arch"]) for m in population.members],
                    [m["accuracy"] for m in population.members],
                )
                scores = predictor.predict(pool)
                order = sorted(range(len(pool)), key=lambda i: (-scores[i], i))
                exploit = order[: max(1, round(n * (1 - options.explore)))]
                rest = order[len(exploit) :]
                chosen = exploit + rng.sample(rest, min(n - len(exploit), len(rest)))
                archs = [pool[i] for i in chosen]
                predicted = {pool[i].digest: float(scores[i]) for i in chosen}
            else:
                archs = breed(space, parents, n, accept, population.seen, rng, options)
        measured = accuracy(archs)
        for arch, acc in zip(archs, measured):
            population.members.append(
                {
                    "arch": arch.to_dict(),
                    "digest": arch.digest,
                    "accuracy": acc,
                    "generation": generation,
                    **({"predicted": predicted[arch.digest]} if arch.digest in predicted else {}),
                    **{k: v for k, v in cost(arch).to_dict().items()},
                }
            )
        tau = kendall_tau([predicted[a.digest] for a in archs], measured) if predicted else None
        population.generations.append(
            {
                "generation": generation,
                "evaluated": len(archs),
                "best": max(measured),
                "archive_best": population.best()["accuracy"],
                "predictor_tau": tau,
            }
        )
        if tau is not None:
            log.info("generation %d: the predictor's Kendall tau on its %d picks: %.2f", generation, len(archs), tau)
        population.rng_state = _rng_state(rng)
        if on_generation:
            on_generation(population)
        if not archs:
            break
    return population


class EvolutionStrategy(InBand):
    """``evolution``: constrained evolution of the supernet's sub-networks in the band (:func:`evolve`)."""

    name = "evolution"
    options = EvolutionOptions

    def run(self, context: SearchContext, options: EvolutionOptions) -> StrategyOutcome:
        """Evolve (continuing ``population.json`` on resume), saving the archive after every generation."""
        saved = context.saved_state("population", Population.from_state_dict, "population")
        include = [context.space.resolve(member_arch_path(spec))[1] for spec in options.include]
        if context.in_family:  # a family names networks for all its bands: each band takes those inside it
            include = [a for a in include if context.objective.in_band(context.cost(a), options.tolerance)]
        if saved is None and context.known:  # a family's later band: start from what is known inside it
            have = {a.digest for a in include}
            inside = sorted(
                (
                    s
                    for s in context.known
                    if s.arch.digest not in have and context.objective.in_band(context.cost(s.arch), options.tolerance)
                ),
                key=lambda s: (-s.accuracy, s.arch.digest),
            )
            include += [s.arch for s in inside[: max(0, options.population - len(include))]]

        def save(population: Population) -> None:
            context.save_state("population", population.state_dict())

        population = evolve(
            SearchProblem(context.space, context.pool, context.cost, context.objective),
            options,
            random.Random(context.seed),
            include,
            saved,
            save,
        )
        best = population.best()
        taus = [g["predictor_tau"] for g in population.generations if g["predictor_tau"] is not None]
        low, high = context.objective.band(options.tolerance)
        lines = [
            f"evolution    {len(population.generations)} generations, {len(population.members)} sub-networks in "
            f"the band {low:.4g} to {high:.4g} ({context.objective.unit}); {context.run}/population.json"
        ]
        if taus:
            lines.append(
                f"predictor    Kendall tau on the networks it picked, before they were evaluated: mean "
                f"{sum(taus) / len(taus):.2f} over {len(taus)} generations"
            )
        return StrategyOutcome(
            chosen=Scored(ArchConfig.from_dict(best["arch"]), best["accuracy"]),
            candidates=tuple(Scored(ArchConfig.from_dict(m["arch"]), m["accuracy"]) for m in population.members),
            lines=tuple(lines),
            record={
                "generations": len(population.generations),
                "band": [low, high],
                "predictor_tau": [g["predictor_tau"] for g in population.generations],
            },
            generation={m["digest"]: m["generation"] for m in population.members},
        )


register_strategy(EvolutionStrategy())
