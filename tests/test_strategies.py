"""Search strategies: the registry, NSGA-II's objective and target (the optuna bug), random search."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from nas import ArchConfig, NasError, load_space
from nas.cli import main
from nas.search.objective import Objective, cost_function
from nas.search.strategy import _STRATEGIES, SearchContext, get_strategy, register_strategy, strategy_names

ROOT = Path(__file__).resolve().parents[1]


def fake_accuracy(archs):
    """A fixed pseudo-random accuracy per architecture (no supernet needed)."""
    return [int(a.digest[:8], 16) / 16**8 for a in archs]


def _mid_target(space, cost, key):
    """Halfway between the smallest and the largest sub-network's ``key`` (params or latency_ms)."""
    return (cost(space.smallest()).to_dict()[key] + cost(space.largest()).to_dict()[key]) / 2


# --- the registry ---------------------------------------------------------------------------------


def test_the_builtin_strategies_are_listed_without_importing_torch():
    code = (
        "import sys; from nas.search.strategy import strategy_names; print(','.join(strategy_names())); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "greedy,optuna,random"


def test_get_strategy_loads_each_builtin_and_refuses_an_unknown_name():
    for name in ("greedy", "optuna", "random"):
        strategy = get_strategy(name)
        assert strategy.name == name and callable(strategy.run)
    with pytest.raises(NasError, match="unknown search strategy 'annealing'; choose one of greedy, optuna, random"):
        get_strategy("annealing")


def test_a_registered_strategy_is_found_and_offered_by_the_cli(monkeypatch, capsys):
    class Best:
        name = "best-of-two"

        def run(self, context: SearchContext) -> dict:
            return {"arch": context.space.largest().to_dict()}

    monkeypatch.setitem(_STRATEGIES, "best-of-two", Best())  # undone after the test
    assert "best-of-two" in strategy_names() and get_strategy("best-of-two").name == "best-of-two"
    with pytest.raises(TypeError, match="run"):
        register_strategy(object())
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "best-of-two" in capsys.readouterr().out


# --- NSGA-II: the objective asked for, within its target --------------------------------------------


def _study(run: Path, name: str = "nas-search"):
    import optuna

    return optuna.load_study(study_name=name, storage=f"sqlite:///{run / 'optuna.db'}")


def test_nsga_optimises_the_objective_asked_for_even_with_a_latency_table(tmp_path):
    from optuna.study import StudyDirection

    from nas.latency import LatencyTable
    from nas.search.nsga import nsga_search

    space = load_space("efficientformerv2-tiny")
    table = LatencyTable.load("iphone12", space, 224)
    cost = cost_function(table, 224, 10)  # latency known: the old code optimised it whatever was asked
    for name, key, direction in (
        ("params", "params", StudyDirection.MINIMIZE),
        ("latency", "latency_ms", StudyDirection.MINIMIZE),
        ("mes", "mes", StudyDirection.MAXIMIZE),
    ):
        run = tmp_path / name
        run.mkdir()
        target = _mid_target(space, cost, key) if key != "mes" else cost(space.largest()).mes * 1.3
        objective = Objective(name, target)
        records, front = nsga_search(space, fake_accuracy, cost, objective, 6, 0, run)
        study = _study(run)
        assert study.directions == [StudyDirection.MAXIMIZE, direction]
        for t in study.trials:
            assert t.values[1] == pytest.approx(t.user_attrs[key]), name
        assert [r[key] for r in records] == [t.user_attrs[key] for t in study.trials]
        # The target is a constraint: the front holds only trials that meet it, from the cheapest.
        inside = {r["trial"] for r in records if (r[key] >= target if name == "mes" else r[key] <= target)}
        assert 0 < len(inside) < len(records), f"{name}: the target should split the trials"
        assert front and {r["trial"] for r in front} <= inside
        order = [r["params" if name == "params" else "latency_ms"] for r in front]  # the smallest or fastest first
        assert order == sorted(order)
        assert len((run / "trials.jsonl").read_text().splitlines()) == 6 and (run / "pareto.png").stat().st_size


def test_a_study_of_another_objective_or_target_is_refused(tmp_path):
    from nas.search.nsga import nsga_search

    space = load_space("efficientformerv2-tiny")
    cost = cost_function(None, 224, 10)
    target = _mid_target(space, cost, "params")
    nsga_search(space, fake_accuracy, cost, Objective("params", target), 2, 0, tmp_path)
    with pytest.raises(NasError, match=f"study nas-search holds params {target:g}, not params {target / 2:g}"):
        nsga_search(space, fake_accuracy, cost, Objective("params", target / 2), 2, 0, tmp_path)
    # The same objective and target continue the study.
    records, _ = nsga_search(space, fake_accuracy, cost, Objective("params", target), 3, 0, tmp_path)
    assert len(records) == 3


def test_optuna_search_with_objective_params_and_a_device_optimises_parameters(tiny_supernet, tmp_path, capsys):
    """The bug: ``--objective params --device iphone12`` optimised latency and ignored the target."""
    space = load_space("efficientformerv2-tiny")
    target = _mid_target(space, cost_function(None, 224, 10), "params")
    out = tmp_path / "nsga-params"
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", "optuna", "--trials", "6"]
    argv += ["--objective", "params", "--target", f"{target:g}", "--device", "iphone12", "--run", str(out)]
    assert main([*argv, "--bn-calib-batches", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    study = _study(out)
    assert [t.values[1] for t in study.trials] == [float(r["params"]) for r in trials]
    assert all(r["latency_ms"] is not None for r in trials)  # the table was loaded, and not optimised
    within = [r for r in trials if r["params"] <= target]
    assert 0 < len(within) < len(trials), "the target should split the trials"
    front = result["pareto"]
    assert front and all(r["params"] <= target for r in front)
    assert [r["params"] for r in front] == sorted(r["params"] for r in front)
    best = max(within, key=lambda r: r["accuracy"])
    assert result["digest"] == best["digest"] == ArchConfig.load(out / "arch.yaml").digest
    assert result["params"] <= target and result["within_target"] == len(within)
    assert json.loads((out / "result.json").read_text())["digest"] == best["digest"]


# --- random search -------------------------------------------------------------------------------------


def test_random_search_keeps_draws_within_the_target_whatever_the_batch():
    from nas.search.random_search import random_search
    from nas.search.sample import sample_distinct

    space = load_space("efficientformerv2-tiny")
    cost = cost_function(None, 224, 10)
    objective = Objective("params", _mid_target(space, cost, "params"))
    seen = []
    records = random_search(space, fake_accuracy, cost, objective, 10, random.Random(5), batch=3, on_batch=seen.append)
    assert len(records) == 10 and len(seen) == 4  # batches of 3, 3, 3, 1
    assert all(r["params"] <= objective.target for r in records)
    assert len({r["digest"] for r in records}) == 10
    expected = sample_distinct(space, 10, lambda a: objective.met(cost(a)), random.Random(5))
    assert [r["digest"] for r in records] == [a.digest for a in expected]
    again = random_search(space, fake_accuracy, cost, objective, 10, random.Random(5), batch=8)
    assert again == records
    with pytest.raises(NasError, match="none of 50 random sub-networks"):
        random_search(space, fake_accuracy, cost, Objective("params", 1), 3, random.Random(0), max_draws=50)


def test_random_strategy_writes_its_trials_and_the_best_arch_and_resumes(tiny_supernet, tmp_path, capsys):
    space = load_space("efficientformerv2-tiny")
    target = _mid_target(space, cost_function(None, 224, 10), "params")
    out = tmp_path / "random"
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", "random", "--trials", "4"]
    argv += ["--objective", "params", "--target", f"{target:g}", "--run", str(out), "--bn-calib-batches", "1"]
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 4 and all(r["params"] <= target for r in trials)
    best = max(trials, key=lambda r: r["accuracy"])
    assert result["strategy"] == "random" and result["digest"] == best["digest"]
    assert ArchConfig.load(out / "arch.yaml").digest == best["digest"]
    assert result["evaluations"] == 4 and result["within_target"] == 4
    saved = (out / "trials.jsonl").read_text()
    # Resumed: the same draws, every accuracy from the cache, the same outputs.
    evaluations = (out / "evaluations.jsonl").read_text()
    assert main([*argv, "--resume"]) == 0
    assert "the most accurate of 4 trials within params" in capsys.readouterr().out
    assert (out / "trials.jsonl").read_text() == saved
    assert (out / "evaluations.jsonl").read_text() == evaluations
    assert main(argv) == 2  # no --resume: the folder holds a search
    assert "already holds a search" in capsys.readouterr().err
