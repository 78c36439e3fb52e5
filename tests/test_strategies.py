"""Search strategies: the registry and plug-ins, options set with --set, NSGA-II's objective and target
(the optuna bug), random search in the band."""

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nas import ArchConfig, NasError, load_space
from nas.cli import main
from nas.search.objective import Objective, SearchProblem, cost_function
from nas.search.strategy import (
    _STRATEGIES,
    Scored,
    SearchContext,
    StrategyOutcome,
    get_strategy,
    parse_assignments,
    register_strategy,
    strategy_names,
    strategy_options,
)

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
    assert proc.stdout.strip().split(",") == sorted(_STRATEGIES._builtin)


def test_get_strategy_loads_each_builtin_with_its_options_and_refuses_an_unknown_name():
    for name in _STRATEGIES._builtin:
        strategy = get_strategy(name)
        assert strategy.name == name and callable(strategy.run) and dataclasses.is_dataclass(strategy.options)
        defaults = strategy_options(strategy)  # every option has a default and a meaning
        assert all(f.metadata.get("help") for f in dataclasses.fields(defaults)), name
    with pytest.raises(NasError, match="unknown search strategy 'annealing'; choose one of ") as error:
        get_strategy("annealing")
    assert all(name in str(error.value) for name in strategy_names())


@pytest.mark.parametrize("name", strategy_names())
def test_every_strategy_searches_end_to_end(tiny_supernet, tmp_path, capsys, name):
    """A short ``nas search`` with each registered strategy: a network of the space under the target,
    its score noise and finalists reported, whatever the strategy."""
    fields = {f.name for f in dataclasses.fields(strategy_options(get_strategy(name)))}
    sets = {"evaluations": 6, "population": 4}
    options = [arg for key, value in sets.items() if key in fields for arg in ("--set", f"{key}={value}")]
    out = tmp_path / name
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", name, *options, "--objective", "params"]
    argv += ["--target", "300000", "--run", str(out), "--bn-calib-batches", "1", "--finalists", "2"]
    assert main([*argv, "--noise-networks", "1", "--noise-draws", "1", "--json"]) == 0, name
    result = json.loads(capsys.readouterr().out)
    chosen = ArchConfig.load(out / "arch.yaml")
    assert load_space("efficientformerv2-tiny").contains(chosen) and chosen.digest == result["digest"]
    assert result["params"] <= 300000 and 0 <= result["accuracy"] <= 1
    assert result["score_noise"]["sd"] is not None and len(result["finalists"]) >= 1


@dataclasses.dataclass(frozen=True)
class _LargestOptions:
    pass


def test_a_registered_strategy_is_found_and_offered_by_the_cli(monkeypatch, capsys):
    class Largest:
        name = "largest"
        options = _LargestOptions

        def run(self, context: SearchContext, options) -> StrategyOutcome:
            largest = Scored(context.space.largest(), context.pool([context.space.largest()])[0])
            return StrategyOutcome(largest, (largest,))

    monkeypatch.setitem(_STRATEGIES._objects, "largest", Largest())  # undone after the test
    assert "largest" in strategy_names() and get_strategy("largest").name == "largest"
    with pytest.raises(TypeError, match="run"):
        register_strategy(object())
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "largest" in capsys.readouterr().out


PLUGIN = """
import dataclasses
from nas.core.typed_yaml import setting
from nas.search.strategy import Scored, StrategyOutcome, register_strategy


@dataclasses.dataclass(frozen=True)
class SmallestOptions:
    repeat: int = setting(1, low=1, help="how often to score the smallest network")


class Smallest:
    name = "smallest"
    options = SmallestOptions

    def run(self, context, options):
        smallest = context.space.smallest()
        scored = Scored(smallest, context.pool([smallest] * options.repeat)[0])
        return StrategyOutcome(scored, (scored,), ("smallest     the smallest network, scored",))


register_strategy(Smallest())
"""


def test_a_strategy_of_another_package_registers_through_its_entry_point(tiny_supernet, tmp_path):
    """A package installed beside the engine (a dist-info with an entry point in ``nas.strategies``) adds
    a strategy in one file: listed without importing it, loaded when asked for, run by nas search."""
    site = tmp_path / "site"
    (site / "smallest-0.1.dist-info").mkdir(parents=True)
    (site / "smallest_strategy.py").write_text(PLUGIN)
    (site / "smallest-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: smallest\nVersion: 0.1\n")
    (site / "smallest-0.1.dist-info" / "entry_points.txt").write_text(
        "[nas.strategies]\nsmallest = smallest_strategy\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from nas.search.strategy import strategy_names; print(strategy_names()); "
            "assert 'smallest_strategy' not in sys.modules",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert listed.returncode == 0 and "'smallest'" in listed.stdout, listed.stderr[-2000:]
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "nas", "search", "--supernet", str(tiny_supernet), "--strategy", "smallest"]
    argv += ["--set", "repeat=2", "--objective", "params", "--target", "1e9", "--run", str(out)]
    argv += ["--bn-calib-batches", "1", "--finalists", "0", "--noise-networks", "0", "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["strategy"] == "smallest" and result["options"] == {"repeat": 2}
    assert result["digest"] == load_space("efficientformerv2-tiny").smallest().digest
    assert "repeat: 2" in (out / "config.yaml").read_text()
    bad = subprocess.run(
        [*argv[:-1], "--set", "repeat=0"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "strategy smallest: --set.repeat must be at least 1, got 0" in bad.stderr


# --- options: --set, the old flags, recorded and checked on resume ----------------------------------


def test_options_are_typed_validated_and_reject_unknown_keys():
    evolution = get_strategy("evolution")
    options = strategy_options(
        evolution, parse_assignments(["evaluations=300", "predictor=true", "include=a.yaml", "tolerance=0.1"])
    )
    assert (options.evaluations, options.predictor, options.include, options.tolerance) == (300, True, ("a.yaml",), 0.1)
    assert strategy_options(evolution, {"include": "[a.yaml, b.yaml]"}).include == ("a.yaml", "b.yaml")
    with pytest.raises(NasError, match="strategy greedy: --set: unknown key 'evaluations'; allowed keys: evaluate_top"):
        strategy_options(get_strategy("greedy"), {"evaluations": "3"})
    with pytest.raises(NasError, match=r"strategy evolution: --set.mutation must be in \[0, 1\], got 2"):
        strategy_options(evolution, {"mutation": "2"})
    with pytest.raises(NasError, match="strategy random: --set.evaluations"):
        strategy_options(get_strategy("random"), {"evaluations": "many"})
    with pytest.raises(NasError, match="--set 'evaluations': give key=value"):
        parse_assignments(["evaluations"])


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--strategy", "greedy", "--set", "trials=3"], "strategy greedy: --set: unknown key 'trials'"),
        (["--strategy", "greedy", "--trials", "3"], "--trials is not an option of strategy greedy"),
        (["--strategy", "random", "--evaluate-top", "3"], "--evaluate-top is not an option of strategy random"),
        (["--strategy", "evolution", "--set", "parents=0"], "--set.parents must be at least 1"),
        (["--strategy", "evolution", "--set", "include=nowhere.yaml"], "nowhere.yaml"),
        (["--strategy", "random", "--set", "tolerance=1e-9"], "lies in the band"),
    ],
)
def test_bad_options_are_one_line_and_leave_no_folder(tiny_supernet, tmp_path, capsys, extra, fragment):
    out = tmp_path / "s"
    argv = ["search", "--supernet", str(tiny_supernet), "--objective", "params", "--target", "300000"]
    assert main([*argv, "--run", str(out), "--bn-calib-batches", "1", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]
    assert not out.exists()


def test_options_are_recorded_and_a_resume_with_others_is_refused(tiny_supernet, tmp_path, capsys, caplog):
    out = tmp_path / "random"
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", "random", "--trials", "4", "--objective"]
    argv += ["params", "--target", "300000", "--run", str(out), "--bn-calib-batches", "1", "--finalists", "2"]
    assert main(argv) == 0
    # --trials: the old flag, deprecated: the same option, and one line that says the --set form
    assert "--trials is deprecated: use --set evaluations=4" in caplog.text
    capsys.readouterr()
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["strategy_options"] == {"evaluations": 4, "tolerance": 0.05}
    assert config["final_scoring"]["finalists"] == 2
    assert main([*argv, "--set", "tolerance=0.1", "--resume"]) == 2
    assert "different strategy_options.tolerance (0.05 in the run, 0.1 now)" in capsys.readouterr().err
    assert main([*argv[:-2], "--finalists", "3", "--resume"]) == 2
    assert "different final_scoring.finalists" in capsys.readouterr().err


# --- NSGA-II: the objective asked for, within its target --------------------------------------------


def _study(run: Path, name: str = "nas-search"):
    import optuna

    return optuna.load_study(study_name=name, storage=f"sqlite:///{run / 'optuna.db'}")


def test_nsga_optimises_the_objective_asked_for_even_with_a_latency_table(tmp_path):
    from optuna.study import StudyDirection

    from nas.latency import LatencyTable
    from nas.search.optuna_nsga import nsga_search

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
        records, front = nsga_search(SearchProblem(space, fake_accuracy, cost, objective), 6, 0, run)
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
    from nas.search.optuna_nsga import nsga_search

    space = load_space("efficientformerv2-tiny")
    cost = cost_function(None, 224, 10)
    target = _mid_target(space, cost, "params")
    nsga_search(SearchProblem(space, fake_accuracy, cost, Objective("params", target)), 2, 0, tmp_path)
    with pytest.raises(NasError, match=f"study nas-search holds params {target:g}, not params {target / 2:g}"):
        nsga_search(SearchProblem(space, fake_accuracy, cost, Objective("params", target / 2)), 2, 0, tmp_path)
    # The same objective and target continue the study.
    records, _ = nsga_search(SearchProblem(space, fake_accuracy, cost, Objective("params", target)), 3, 0, tmp_path)
    assert len(records) == 3


def test_a_study_records_its_objective_in_one_write_and_reads_the_two_attributes_of_earlier_versions(tmp_path):
    """Two processes opening one new study: written as two attributes, the second process could read
    the objective without its target and refused the study (CI, stop 66)."""
    import optuna

    from nas.search.optuna_nsga import open_study

    storage = f"sqlite:///{tmp_path / 'a.db'}"
    open_study(storage, "s", 0, Objective("params", 5e6))
    attrs = optuna.load_study(study_name="s", storage=storage).user_attrs
    assert attrs == {"objective": {"name": "params", "target": 5e6}}
    open_study(storage, "s", 1, Objective("params", 5e6))  # the same objective: continued
    with pytest.raises(NasError, match="holds params 5e.06, not latency 2"):
        open_study(storage, "s", 0, Objective("latency", 2.0))

    earlier = optuna.create_study(study_name="old", storage=storage, directions=["maximize", "minimize"])
    earlier.set_user_attr("objective", "latency")
    earlier.set_user_attr("target", 1.5)
    open_study(storage, "old", 0, Objective("latency", 1.5))
    with pytest.raises(NasError, match="holds latency 1.5, not latency 1.2"):
        open_study(storage, "old", 0, Objective("latency", 1.2))


def test_optuna_search_with_objective_params_and_a_device_optimises_parameters(tiny_supernet, tmp_path, capsys):
    """The bug: ``--objective params --device iphone12`` optimised latency and ignored the target."""
    space = load_space("efficientformerv2-tiny")
    target = _mid_target(space, cost_function(None, 224, 10), "params")
    out = tmp_path / "nsga-params"
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", "optuna", "--set", "evaluations=6"]
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
    assert result["strategy_choice"] == best["digest"]
    assert result["digest"] == ArchConfig.load(out / "arch.yaml").digest
    assert result["digest"] in {r["digest"] for r in within}  # the best finalist, all within the target
    assert result["params"] <= target and result["within_target"] == len(within)
    assert json.loads((out / "result.json").read_text())["digest"] == result["digest"]


# --- random search -------------------------------------------------------------------------------------


def test_random_search_draws_in_the_band_whatever_the_batch():
    from nas.search.random_search import random_search
    from nas.search.sample import sample_distinct

    space = load_space("efficientformerv2-tiny")
    cost = cost_function(None, 224, 10)
    objective = Objective("params", _mid_target(space, cost, "params"))
    seen = []
    records = random_search(
        SearchProblem(space, fake_accuracy, cost, objective),
        10,
        random.Random(5),
        batch=3,
        on_batch=seen.append,
        tolerance=0.1,
    )
    assert len(records) == 10 and len(seen) == 4  # batches of 3, 3, 3, 1
    assert all(0.9 * objective.target <= r["params"] <= objective.target for r in records)  # two-sided
    assert len({r["digest"] for r in records}) == 10
    expected = sample_distinct(space, 10, lambda a: objective.in_band(cost(a), 0.1), random.Random(5))
    assert [r["digest"] for r in records] == [a.digest for a in expected]
    again = random_search(
        SearchProblem(space, fake_accuracy, cost, objective), 10, random.Random(5), batch=8, tolerance=0.1
    )
    assert again == records
    one_sided = random_search(
        SearchProblem(space, fake_accuracy, cost, objective), 30, random.Random(5)
    )  # tolerance None
    assert any(r["params"] < 0.9 * objective.target for r in one_sided)
    with pytest.raises(NasError, match="none of 50 random sub-networks"):
        random_search(
            SearchProblem(space, fake_accuracy, cost, Objective("params", 1)), 3, random.Random(0), max_draws=50
        )


def test_random_strategy_writes_its_trials_and_resumes(tiny_supernet, tmp_path, capsys):
    space = load_space("efficientformerv2-tiny")
    target = _mid_target(space, cost_function(None, 224, 10), "params")
    out = tmp_path / "random"
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", "random", "--set", "evaluations=4"]
    argv += ["--set", "tolerance=0.2", "--objective", "params", "--target", f"{target:g}", "--run", str(out)]
    argv += ["--bn-calib-batches", "1"]
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 4 and all(0.8 * target <= r["params"] <= target for r in trials)
    best = max(trials, key=lambda r: r["accuracy"])
    assert result["strategy"] == "random" and result["strategy_choice"] == best["digest"]
    # The choice is the best finalist at the finalists' fidelity, among the trials.
    finalists = {f["digest"]: f for f in result["finalists"]}
    assert result["digest"] in finalists and best["digest"] in finalists
    assert result["accuracy"] == max(f["final_accuracy"] for f in finalists.values())
    assert ArchConfig.load(out / "arch.yaml").digest == result["digest"]
    assert result["evaluations"] == 4 and result["within_target"] == 4 and result["band"] == [0.8 * target, target]
    saved = (out / "trials.jsonl").read_text()
    # Resumed: the same draws, every accuracy from the cache, the same outputs.
    evaluations = (out / "evaluations.jsonl").read_text()
    assert main([*argv, "--resume"]) == 0
    assert "sub-networks drawn uniformly in the band" in capsys.readouterr().out
    assert (out / "trials.jsonl").read_text() == saved
    assert (out / "evaluations.jsonl").read_text() == evaluations
    assert main(argv) == 2  # no --resume: the folder holds a search
    assert "already holds a search" in capsys.readouterr().err
