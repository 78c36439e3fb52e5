"""Constrained evolution: moves of the space (mutation, crossover, repair), the accuracy predictor, the
band, the elite, resume, and that it finds what random search at equal evaluations does not."""

import json
import random

import numpy as np
import pytest

from nas import ArchConfig, NasError, load_space
from nas.cli import main
from nas.search.evolution import EvolutionOptions, Population, evolve
from nas.search.objective import Objective, SearchProblem, cost_function
from nas.search.predictor import RidgePredictor, encode, kendall_tau
from nas.search.random_search import random_search
from nas.search.strategy import SearchContext

SPACES = ["efficientformerv2-tiny", "efficientformerv2", "efficientformer-tiny", "swiftformer-tiny"]


def smooth_accuracy(space):
    """A fixed, smooth accuracy of the encoding (no supernet): a landscape a search can climb."""
    weights = np.random.default_rng(7).normal(size=len(encode(space, space.largest())))

    def accuracy(archs):
        return [float(encode(space, a) @ weights + 0.5 * np.sin(3 * encode(space, a)).sum()) for a in archs]

    return accuracy


# --- moves of the space ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SPACES)
def test_choices_round_trip_and_moves_stay_in_the_space(name):
    space = load_space(name)
    rng = random.Random(0)
    options = space.choice_options()
    for _ in range(100):
        arch = space.sample(rng)
        values = space.choices(arch)
        assert set(values) == set(options) and all(values[k] in options[k] for k in values)
        assert space.repair(values) == arch
        assert space.mutate(arch, rng, 0.0) == arch  # nothing drawn anew
        child = space.crossover(arch, space.sample(rng), rng)
        assert space.contains(child) and space.contains(space.mutate(arch, rng, 0.5))
    for member in space.members.values():
        assert space.repair(space.choices(member)) == member


def test_crossover_takes_every_choice_from_a_parent_and_repair_fixes_what_does_not_fit():
    space = load_space("efficientformerv2")
    rng = random.Random(1)
    for _ in range(50):
        a, b = space.sample(rng), space.sample(rng)
        child = space.choices(space.crossover(a, b, rng))
        ca, cb = space.choices(a), space.choices(b)
        # Widths and depths are never repaired: each comes from one parent.
        assert all(child[k] in (ca[k], cb[k]) for k in child if k.endswith(("_width", "_depth")))
    # More attention blocks than the depth holds: capped by the depth.
    values = space.choices(space.largest())
    values.update(s2_depth=min(space.stages[2].depths), s2_attention=max(space.stages[2].attention))
    arch = space.repair(values)
    assert arch.attention[2] <= arch.depths[2] and space.contains(arch)


def test_optuna_trials_suggest_the_space_choices():
    import optuna

    from nas.search.optuna_nsga import arch_from_trial

    space = load_space("efficientformer-tiny")
    arch = space.sample(random.Random(3))
    assert arch_from_trial(space, optuna.trial.FixedTrial(space.choices(arch))) == arch


# --- the accuracy predictor ----------------------------------------------------------------------------


def test_ridge_predictor_is_weighted_ridge_regression_and_ranks_a_smooth_landscape():
    space = load_space("efficientformerv2")
    rng = random.Random(0)
    archs = [space.sample(rng) for _ in range(30)] + [space.sample(rng) for _ in range(10)]
    y = smooth_accuracy(space)(archs)
    weights = [rng.random() + 0.1 for _ in archs]
    predictor = RidgePredictor(space, ridge=0.5).fit(archs[:30], y[:30], weights[:30])
    # The normal equations of min sum w (y - c - z b)^2 + ridge / n |b|^2 on standardised z.
    x = np.stack([encode(space, a) for a in archs[:30]])
    w = np.asarray(weights[:30]) / sum(weights[:30])
    mean = w @ x
    scale = np.sqrt(w @ (x - mean) ** 2)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    coef = np.linalg.solve(
        z.T @ (z * w[:, None]) + 0.5 / 30 * np.eye(z.shape[1]), (z * w[:, None]).T @ (y[:30] - w @ y[:30])
    )
    expected = w @ y[:30] + ((np.stack([encode(space, a) for a in archs[30:]]) - mean) / scale) @ coef
    assert np.allclose(predictor.predict(archs[30:]), expected)
    many = [space.sample(rng) for _ in range(160)]
    fitted = RidgePredictor(space).fit(many[:120], smooth_accuracy(space)(many[:120]))
    assert kendall_tau(fitted.predict(many[120:]), smooth_accuracy(space)(many[120:])) > 0.5  # unseen, ranked
    assert kendall_tau([1, 2], [1, 2]) is None and kendall_tau([1, 1, 1], [1, 2, 3]) is None


# --- evolution ----------------------------------------------------------------------------------------------


def _setup(name="efficientformerv2", tolerance_target=5e6):
    space = load_space(name)
    cost = cost_function(None, 64, 10)
    return space, cost, Objective("params", tolerance_target)


def test_every_candidate_lies_in_the_band_none_twice_and_the_elite_survives():
    space, cost, objective = _setup()
    options = EvolutionOptions(evaluations=70, population=16, parents=4, tolerance=0.05, predictor=False)
    saved = []
    population = evolve(
        SearchProblem(space, smooth_accuracy(space), cost, objective),
        options,
        random.Random(0),
        on_generation=lambda p: saved.append(len(p.members)),
    )
    members = population.members
    assert len(members) == 70 and saved == [16, 32, 48, 64, 70]  # the last generation fits the budget
    assert len({m["digest"] for m in members}) == 70
    assert all(0.95 * objective.target <= m["params"] <= objective.target for m in members)
    best = [g["archive_best"] for g in population.generations]
    assert best == sorted(best) and best[-1] == max(m["accuracy"] for m in members)
    assert best[-1] > best[0]  # it climbed


def test_evolution_finds_better_networks_than_random_search_at_equal_evaluations():
    space, cost, objective = _setup()
    accuracy = smooth_accuracy(space)
    plain = EvolutionOptions(evaluations=96, predictor=False)
    wins = 0
    for seed in range(3):
        evolved = evolve(SearchProblem(space, accuracy, cost, objective), plain, random.Random(seed))
        drawn = random_search(SearchProblem(space, accuracy, cost, objective), 96, random.Random(seed), tolerance=0.05)
        wins += evolved.best()["accuracy"] > max(r["accuracy"] for r in drawn)
    assert wins == 3


def test_the_predictor_screens_children_and_its_tau_is_logged():
    space, cost, objective = _setup()
    options = EvolutionOptions(evaluations=48, population=16, predictor=True, screen=4, explore=0.25)
    population = evolve(SearchProblem(space, smooth_accuracy(space), cost, objective), options, random.Random(0))
    taus = [g["predictor_tau"] for g in population.generations]
    assert taus[0] is None and all(t is not None for t in taus[1:])
    assert np.mean(taus[1:]) > 0.2  # it ranks networks it had not seen
    assert all("predicted" in m for m in population.members if m["generation"] > 0)


def test_a_resumed_evolution_continues_exactly(tmp_path):
    space, cost, objective = _setup()
    options = EvolutionOptions(evaluations=64, population=16, predictor=True, screen=2)
    accuracy = smooth_accuracy(space)
    whole = evolve(SearchProblem(space, accuracy, cost, objective), options, random.Random(4))
    path = tmp_path / "population.json"

    def stop_after_two(population):
        path.write_text(json.dumps(population.state_dict()))
        if len(population.generations) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evolve(SearchProblem(space, accuracy, cost, objective), options, random.Random(4), on_generation=stop_after_two)
    resumed = evolve(
        SearchProblem(space, accuracy, cost, objective),
        options,
        random.Random(999),
        population=Population.from_state_dict(json.loads(path.read_text())),
    )
    assert [m["digest"] for m in resumed.members] == [m["digest"] for m in whole.members]
    # The engine reads a strategy's saved state (one resume protocol): a corrupt file is one line naming it.
    context = SearchContext(None, None, None, objective, tmp_path, None, None, resume=True)
    assert len(context.saved_state("population", Population.from_state_dict, "population").generations) == 2
    path.write_text("{not json")
    with pytest.raises(NasError, match=r"population.json: corrupt population \(JSONDecodeError"):
        context.saved_state("population", Population.from_state_dict, "population")


def test_networks_named_by_the_user_start_the_first_population_and_must_lie_in_the_band():
    space, cost, objective = _setup()
    rng = random.Random(0)
    inside = next(a for a in iter(lambda: space.sample(rng), None) if objective.in_band(cost(a), 0.05))
    population = evolve(
        SearchProblem(space, smooth_accuracy(space), cost, objective),
        EvolutionOptions(evaluations=16),
        rng,
        include=[inside],
    )
    assert population.members[0]["digest"] == inside.digest
    with pytest.raises(NasError, match="outside the band"):
        evolve(
            SearchProblem(space, smooth_accuracy(space), cost, objective),
            EvolutionOptions(),
            rng,
            include=[space.largest()],
        )


# --- through nas search, on a real supernet -------------------------------------------------------------------


def test_evolution_search_on_a_supernet_with_greedys_result_included(tiny_supernet, tiny_search, tmp_path, capsys):
    greedy = json.loads((tiny_search / "result.json").read_text())
    out = tmp_path / "evolution"
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", "evolution", "--objective", "mes"]
    argv += ["--target", "420", "--device", "iphone12", "--run", str(out), "--bn-calib-batches", "1"]
    argv += ["--set", "evaluations=12", "--set", "population=6", "--set", f"tolerance={greedy['mes'] / 420 - 1 + 0.05}"]
    argv += ["--set", f"include={tiny_search / 'arch.yaml'}", "--set", "predictor=true", "--set", "screen=2"]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    # not a terminal: one progress line per generation on stderr, with the best in the band so far
    shown = [line for line in captured.err.splitlines() if line.startswith("search 420 MES: ")]
    assert len(shown) >= 2 and any(line.startswith("search 420 MES: 12/12 evaluated, best in band ") for line in shown)
    assert "about " in shown[0] and " left" in shown[0]
    population = Population.from_state_dict(json.loads((out / "population.json").read_text()))
    assert population.members[0]["digest"] == greedy["digest"]  # greedy's result in the first population
    assert len(population.members) == result["evaluations"] == 12 and result["generations"] == 2
    assert result["predictor_tau"][0] is None and result["predictor_tau"][1] is not None
    assert all(420 <= m["mes"] <= result["band"][1] for m in population.members)
    assert ArchConfig.load(out / "arch.yaml").digest == result["digest"]
    assert result["score_noise"]["sd"] is not None and len(result["finalists"]) == 4
    # its picture (everything evaluated by generation, the band, the finalists, the choice) and its report
    assert (out / "search.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["report", str(out)]) == 0
    report = (out / "report.html").read_text()
    assert "Finalists, scored again" in report and report.count("data:image/png;base64,") >= 1
    assert "Search trajectory" not in report  # greedy's steps table, which evolution has not
    capsys.readouterr()
    evaluations = (out / "evaluations.jsonl").read_text()
    quiet = [*argv[: argv.index("--run") + 1], str(tmp_path / "quiet"), *argv[argv.index("--run") + 2 :]]
    assert main([*quiet, "--set", "evaluations=6", "-q"]) == 0  # -q after the subcommand: no progress
    assert "search 420 MES" not in capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0  # resumed: the same, nothing evaluated again
    assert "evolution    2 generations, 12 sub-networks in the band" in capsys.readouterr().out
    assert (out / "evaluations.jsonl").read_text() == evaluations
