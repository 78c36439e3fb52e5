import json
import os
import signal

import pytest
from helpers import argv, copy_run, search_argv

from nas import ArchConfig, load_space
from nas.cli import main
from nas.search.greedy.algorithm import greedy_slim
from nas.search.objective import Objective, SearchProblem, cost_function
from nas.search.pool import EvaluatorPool
from nas.search.supernet_run import SupernetRun


@pytest.fixture
def supernet_run(tiny_supernet):
    return tiny_supernet


def test_search_cli_outputs_and_resume(supernet_run, tiny_search, tmp_path, capsys):
    out = copy_run(tiny_search, tmp_path / "search")  # resumed below
    argv = search_argv(supernet_run, out, "--json")
    result = json.loads((out / "result.json").read_text())
    assert result["mes"] >= 420 and "predicted on iphone12" in result["latency_source"]
    lo, hi = result["latency_interval_ms"]  # the predicted latency's 80% interval, from the table's header
    assert lo < result["latency_ms"] < hi
    steps = [json.loads(line) for line in (out / "search.jsonl").read_text().splitlines()]
    assert len(steps) == result["steps"] > 0
    assert {"action", "delta_accuracy", "gain", "accuracy", "params", "latency_ms", "mes"} <= set(steps[0])
    assert steps[0]["latency_source"].startswith("predicted on iphone12")
    # Screened by default: the first step evaluates the largest shrink of each kind and stage, later
    # ones the predictor's picks; search.jsonl lists every candidate (predicted, measured), state.json
    # also their architectures.
    kinds = {(r["kind"], r["stage"]) for r in steps[0]["screen"]}
    assert steps[0]["candidates"] > 4 and "arch" not in steps[0]["screen"][0]
    assert steps[0]["evaluated"] == len(kinds) < steps[0]["candidates"]
    assert result["evaluations"] == 1 + sum(s["evaluated"] for s in steps) <= result["shrinks_considered"]
    if len(steps) > 1:
        assert steps[1]["evaluated"] == min(steps[1]["candidates"], 4)
        assert all(r["predicted"] is not None for r in steps[1]["screen"])
    saved = json.loads((out / "state.json").read_text())["steps"][0]["screen"]
    assert all(("arch" in r) == (r["accuracy"] is not None) for r in saved)
    assert ArchConfig.load(out / "arch.yaml").digest == result["digest"]
    summary = (out / "summary.md").read_text()
    assert (out / "trajectory.png").stat().st_size > 0 and "| step |" in summary and "(80% interval)" in summary
    assert main(argv) == 2  # the folder holds a search
    assert "pass --resume" in capsys.readouterr().err
    # Resume from the state after step 1: the same path, with cached evaluations.
    state = json.loads((out / "state.json").read_text())
    state["steps"] = state["steps"][:1]
    (out / "state.json").write_text(json.dumps(state))
    assert main(argv + ["--resume"]) == 0
    assert json.loads(capsys.readouterr().out)["digest"] == result["digest"]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--objective", "mes", "--target", "5000", "--device", "iphone12"], "out of reach"),
        (["--objective", "mes", "--target", "100"], "needs --device"),
        (["--objective", "speed", "--target", "1"], "unknown objective 'speed'"),
        (["--objective", "latency", "--target", "1", "--device", "iphone99"], "unknown device 'iphone99'"),
        (["--objective", "params", "--target", "1e5", "--space", "swiftformer"], "does not match"),
    ],
)
def test_search_bad_input(supernet_run, tmp_path, capsys, argv, fragment):
    assert main(["search", "--supernet", str(supernet_run), "--run", str(tmp_path / "s"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]


def test_not_a_supernet_run(tmp_path, capsys):
    assert main(["search", "--supernet", str(tmp_path), "--objective", "params", "--target", "1e5"]) == 2
    assert "not a trained supernet run" in capsys.readouterr().err


@pytest.mark.xdist_group("ray")  # one local Ray cluster at a time under pytest -n
@pytest.mark.slow
def test_ray_pool_survives_a_killed_worker(supernet_run):
    space = load_space("efficientformerv2-tiny")
    spec = SupernetRun.read(supernet_run).eval_spec(bn_calib_batches=1)
    cost = cost_function(None, 224, 10)
    objective = Objective("params", 250_000)
    local = greedy_slim(SearchProblem(space, EvaluatorPool(spec, workers=0), cost, objective))

    pool = EvaluatorPool(spec, workers=2)
    try:
        pids = pool.worker_pids()
        assert len(set(pids)) == 2
        calls = []

        def accuracy(archs):
            calls.append(len(archs))
            if len(calls) == 3:  # mid-search: kill one worker process
                os.kill(pids[0], signal.SIGKILL)
            return pool(archs)

        distributed = greedy_slim(SearchProblem(space, accuracy, cost, objective))
        assert pool.worker_pids()[0] != pids[0]  # the actor was restarted
    finally:
        pool.close()
    assert [s.arch for s in distributed.steps] == [s.arch for s in local.steps]
    assert [s.accuracy for s in distributed.steps] == [s.accuracy for s in local.steps]


@pytest.mark.parametrize("space_name", ["efficientformerv2-tiny", "efficientformer-tiny", "swiftformer-tiny"])
def test_trial_architectures_are_valid(space_name):
    import optuna

    from nas.search.optuna_nsga import arch_from_trial

    space = load_space(space_name)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(30):
        trial = study.ask()
        assert space.contains(arch_from_trial(space, trial))
        study.tell(trial, 0.0)


def test_optuna_strategy_writes_the_pareto_front(supernet_run, tmp_path, capsys):
    out = tmp_path / "nsga"
    assert (
        main(
            argv(
                "search --supernet {} --strategy optuna --set evaluations=6 --objective mes --target 400 "
                "--device iphone12 --run {} --bn-calib-batches 1 --json",
                supernet_run,
                out,
            )
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    front = result["pareto"]
    assert front and all(set(r) >= {"accuracy", "latency_ms", "params", "mes", "arch"} for r in front)
    assert [r["latency_ms"] for r in front] == sorted(r["latency_ms"] for r in front)
    assert len((out / "trials.jsonl").read_text().splitlines()) == 6
    assert (out / "pareto.yaml").exists() and (out / "pareto.png").stat().st_size > 0


def test_evaluator_preloads_its_images_and_scores_as_the_loaders_do(supernet_run):
    import dataclasses

    from nas.metrics.accuracy import subnet_accuracy
    from nas.search.evaluator import SubnetEvaluator

    spec = SupernetRun.read(supernet_run).eval_spec(bn_calib_batches=1)
    evaluator = SubnetEvaluator(spec)
    assert isinstance(evaluator.search, list) and isinstance(evaluator.calib, list)  # digits fit in memory
    small = SubnetEvaluator(dataclasses.replace(spec, recipe={**spec.recipe, "cache_max_mb": 0}))
    assert not isinstance(small.search, list)  # over the budget: the loaders themselves
    arch = evaluator.space.smallest()
    assert evaluator.accuracy(arch) == small.accuracy(arch)
    assert subnet_accuracy(evaluator.net, arch, small.calib, small.search) == evaluator.accuracy(arch)


def test_search_images_scores_a_fixed_balanced_subset_recorded_with_the_run(supernet_run, tmp_path, capsys):
    import collections

    from nas.config.recipe import recipe_from_saved
    from nas.data import balanced_indices, load_splits
    from nas.search.evaluator import SubnetEvaluator

    spec = SupernetRun.read(supernet_run).eval_spec(bn_calib_batches=1, search_images=60)
    splits = load_splits(spec.data, recipe_from_saved(spec.recipe), spec.seed)
    chosen = balanced_indices(splits.search, 60, 5)
    assert chosen == sorted(set(chosen)) and len(chosen) == 60 == len(balanced_indices(splits.search, 60, 5))
    assert chosen == balanced_indices(splits.search, 60, 5) != balanced_indices(splits.search, 60, 6)
    per_class = collections.Counter(splits.search.labels[i] for i in chosen)
    assert len(per_class) == 10 and max(per_class.values()) - min(per_class.values()) <= 1
    assert balanced_indices(splits.search, 10**6, 5) == list(range(len(splits.search)))
    evaluator = SubnetEvaluator(spec)
    assert sum(len(labels) for _, labels in evaluator.search) == 60
    assert (
        spec.context()["search_images"] == 60
        and "search_images" not in SupernetRun.read(supernet_run).eval_spec().context()
    )

    out = tmp_path / "search"
    argv = ["search", "--supernet", str(supernet_run), "--objective", "params", "--target", "1e9", "--run", str(out)]
    argv += ["--strategy", "greedy", "--bn-calib-batches", "1", "--search-images", "60", "--json"]
    assert main(argv) == 0  # the largest already meets it: greedy's one evaluation
    capsys.readouterr()
    assert "search_images: 60" in (out / "config.yaml").read_text()
    assert json.loads((out / "result.json").read_text())["scored_images"] == 60
    record = json.loads((out / "evaluations.jsonl").read_text().splitlines()[0])
    assert record["context"]["search_images"] == 60
    assert record["accuracy"] == evaluator.accuracy(ArchConfig.from_dict(record["arch"]))
    assert "class-balanced 60 images" in (out / "summary.md").read_text()
    assert main(argv[:-3] + ["--search-images", "61", "--resume"]) == 2
    assert "different search_images" in capsys.readouterr().err
