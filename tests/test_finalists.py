"""Fidelity where the decision is made: scores at other draws and fidelities, the measured score noise,
and the finalists scored again, for every strategy."""

import json
import math
import random

import pytest

from nas import ArchConfig, NasError, load_space
from nas.cli import main
from nas.search.evaluator import DiskCache, Fidelity, SubnetEvaluator
from nas.search.finalists import pooled_sd
from nas.search.pool import EvaluatorPool
from nas.search.supernet_run import SupernetRun


def test_a_fidelity_names_its_images_and_draw():
    search = Fidelity(4, 1000)
    assert search.key == "search:4x1000#0" and Fidelity(8, None, 1).key == "search:8xall#1"
    assert "every image of the val split" in Fidelity(8, split="val").describe()
    with pytest.raises(NasError, match="search or val split"):
        Fidelity(4, split="test")
    with pytest.raises(NasError, match="1 or more"):
        Fidelity(0)


def test_scores_at_other_draws_and_splits_use_other_images_and_are_cached_apart(tiny_supernet, tmp_path):
    spec = SupernetRun.read(tiny_supernet).eval_spec(bn_calib_batches=1, search_images=60)
    evaluator = SubnetEvaluator(spec)
    arch = evaluator.space.smallest()
    assert spec.fidelity == Fidelity(1, 60) and evaluator.images() == 60
    assert evaluator.accuracy(arch, Fidelity(1, 60, 0)) == evaluator.accuracy(arch)  # draw 0: the search's own
    other = Fidelity(1, 60, 1)
    first_labels = [int(y) for _, labels in evaluator._loaders(Fidelity(1, 60))[1] for y in labels]
    other_labels = [int(y) for _, labels in evaluator._loaders(other)[1] for y in labels]
    assert len(other_labels) == 60 and other_labels != first_labels  # another subset of the split
    assert evaluator.images(Fidelity(2)) == len(evaluator.splits.search)
    assert evaluator.images(Fidelity(1, split="val")) == len(evaluator.splits.val)

    pool = EvaluatorPool(spec, cache=DiskCache(tmp_path / "evaluations.jsonl", spec.context()))
    scores = pool.score([arch], other) + pool([arch])
    assert pool.searched == 1 and pool.evaluations == 1  # the other draw is not a search evaluation
    cache = DiskCache(tmp_path / "evaluations.jsonl", spec.context())  # read back
    assert cache.values == {f"{arch.digest}@{other.key}": scores[0], arch.digest: scores[1]}
    assert [a.digest for a, _ in pool.evaluated()] == [arch.digest]


def test_a_batch_interrupted_midway_keeps_every_score_it_had(tiny_supernet, tmp_path, monkeypatch):
    """Greedy's full step is one batch of every shrink (minutes on a real supernet): each score lands in
    the cache as it comes, so a search killed in the batch resumes without scoring those again."""
    spec = SupernetRun.read(tiny_supernet).eval_spec(bn_calib_batches=1, search_images=30)
    space = load_space("efficientformerv2-tiny")
    archs = list({a.digest: a for a in (space.sample(random.Random(i)) for i in range(6))}.values())[:3]
    path = tmp_path / "evaluations.jsonl"
    pool = EvaluatorPool(spec, cache=DiskCache(path, spec.context()))
    scored = []
    real = pool.local.accuracy

    def killed_on_the_third(arch, fidelity=None):
        if len(scored) == 2:
            raise KeyboardInterrupt
        scored.append(arch.digest)
        return real(arch, fidelity)

    monkeypatch.setattr(pool.local, "accuracy", killed_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        pool(archs)
    assert pool.evaluations == 2 and set(DiskCache(path, spec.context()).values) == set(scored)
    resumed = EvaluatorPool(spec, cache=DiskCache(path, spec.context()))
    resumed(archs)
    assert resumed.evaluations == 1  # only the one in flight is scored again


def test_pooled_sd():
    assert pooled_sd([[1.0], [2.0]]) is None
    assert pooled_sd([[1.0, 3.0], [5.0, 5.0, 8.0]]) == pytest.approx(math.sqrt((2 + 6) / 3))


@pytest.mark.parametrize("strategy", ["greedy", "random"])
def test_every_strategy_measures_its_noise_and_chooses_by_its_finalists(tiny_supernet, tmp_path, capsys, strategy):
    out = tmp_path / strategy
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", strategy, "--objective", "params"]
    argv += ["--target", "300000", "--run", str(out), "--bn-calib-batches", "1", "--search-images", "60"]
    argv += ["--finalists", "3", "--final-draws", "2", "--noise-networks", "2", "--noise-draws", "1"]
    argv += ["--set", "evaluations=8"] if strategy == "random" else []
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    records = [json.loads(line) for line in (out / "evaluations.jsonl").read_text().splitlines()]
    others = [r for r in records if "key" in r]
    assert len(others) == result["extra_evaluations"] == 2 * 1 + 3 * 2
    assert result["evaluations"] == len(records) - len(others)
    # The finalists: on every image of the search split, twice the calibration batches, two draws.
    assert {r["fidelity"]["calib_batches"] for r in others if r["fidelity"]["images"] is None} == {2}
    finalists = result["finalists"]
    assert len(finalists) == 3 and all(len(f["final_scores"]) == 2 for f in finalists)
    assert result["strategy_choice"] in {f["digest"] for f in finalists}
    best = max(finalists, key=lambda f: (f["final_accuracy"], f["search_accuracy"], f["digest"]))  # ties: the search
    assert result["digest"] == best["digest"] == ArchConfig.load(out / "arch.yaml").digest
    assert result["accuracy"] == best["final_accuracy"] and result["scored_images"] == 60
    assert result["final_images"] > 60 and result["params"] <= 300000
    noise = result["score_noise"]
    assert noise["networks"] == 2 and noise["draws"] == 2 and noise["sd"] is not None
    runner_up = sorted(f["final_accuracy"] for f in finalists)[-2]
    margin = 2 * result["final_noise"]["sd"] * math.sqrt(2 / 2)
    assert result["within_noise"] == (best["final_accuracy"] - runner_up < margin)
    assert main([*argv, "--resume"]) == 0
    text = capsys.readouterr().out
    assert "noise        one search score ±" in text and "the best of 3 finalists" in text
    assert len((out / "evaluations.jsonl").read_text().splitlines()) == len(records)  # nothing scored again


def test_without_finalists_the_strategys_choice_stands(tiny_supernet, tmp_path, capsys):
    out = tmp_path / "plain"
    argv = ["search", "--supernet", str(tiny_supernet), "--strategy", "random", "--set", "evaluations=4"]
    argv += ["--objective", "params", "--target", "300000", "--run", str(out), "--bn-calib-batches", "1"]
    assert main([*argv, "--finalists", "0", "--noise-networks", "0", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["digest"] == result["strategy_choice"] and result["finalists"] == []
    assert result["accuracy"] == result["search_accuracy"] and result["score_noise"]["sd"] is None
    assert result["extra_evaluations"] == 0 and load_space("efficientformerv2-tiny").contains(
        ArchConfig.load(out / "arch.yaml")
    )


@pytest.mark.slow
def test_the_strategy_benchmark_runs_every_strategy_at_equal_evaluations_and_resumes(tiny_supernet, tmp_path):
    """benchmarks/search_strategies.py on the tiny space: every strategy, two seeds, judged on the
    validation split; run again, it reads every finished search back."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out, report = tmp_path / "bench", tmp_path / "report.txt"
    argv = [sys.executable, str(root / "benchmarks" / "search_strategies.py"), "--supernet", str(tiny_supernet)]
    argv += ["--objective", "params", "--target", "300000", "--budgets", "20", "--seeds", "2"]
    argv += ["--bn-calib-batches", "1", "--finalists", "2", "--out", str(out), "--report", str(report)]
    first = subprocess.run(argv, capture_output=True, text=True, cwd=root, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = json.loads((out / "benchmark.json").read_text())["rows"]
    budgeted = [r for r in rows if r["budget"] == 20]
    assert {r["strategy"] for r in rows} == {
        "greedy-full",
        "greedy-fast",
        "evolution",
        "evolution+predictor",
        "random",
        "optuna",
    }
    assert len(budgeted) == 4 * 2 and all(r["evaluations"] == 20 for r in budgeted)
    assert all(0 <= r["heldout"] <= 1 and r["value"] <= 300000 for r in rows)
    text = report.read_text()
    assert "judged on: every image of the val split" in text and "above random in" in text
    again = subprocess.run(argv, capture_output=True, text=True, cwd=root, timeout=900)
    assert again.returncode == 0 and json.loads((out / "benchmark.json").read_text())["rows"] == rows
