"""Kill anywhere, resume to the same result: ``nas search`` and ``nas compare`` are SIGKILLed at
three points of their work (each run anew with ``--resume``) and finished; they end with the same
architecture, accuracies and tables as a run that was never interrupted, which runs beside them.
(Supernet training killed three times: ``tests/test_train_supernet.py``.)

The kill points are files the run writes (so many evaluations logged, a checkpoint, a finished
network): each kill lands on unfinished work, whatever the machine's speed."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import search_argv

from nas import load_space

ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

pytestmark = pytest.mark.slow


def _nas(*argv: str) -> list[str]:
    return [sys.executable, "-m", "nas", *argv]


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    """``nas ARGV`` in a new process, its stderr to ``log`` (a pipe nobody reads could fill and stall it)."""
    with log.open("a") as err:
        return subprocess.Popen(_nas(*argv), env=ENV, stdout=subprocess.DEVNULL, stderr=err)


def _finish(proc: subprocess.Popen, log: Path) -> None:
    assert proc.wait(timeout=900) == 0, log.read_text()[-3000:]


def _kill_at_and_resume(argv: list[str], run: Path, started: str, kill_points: list[Callable[[Path], bool]]) -> int:
    """Start ``argv`` once per kill point (with ``--resume`` once ``run/started`` exists) and SIGKILL it
    as soon as the point is reached in ``run``; then finish it. Returns how many kills interrupted
    unfinished work (no ``result.json`` yet)."""
    interrupted = 0
    log = run.with_name(run.name + ".log")
    for reached in kill_points:
        resume = ["--resume"] if (run / started).exists() else []
        proc = _start([*argv, *resume], log)
        deadline = time.time() + 300
        while not reached(run) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, f"the run ended before its kill point: {log.read_text()[-2000:]}"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        interrupted += not (run / "result.json").exists()
    _finish(_start([*argv, "--resume"], log), log)
    return interrupted


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _without_times(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "provenance"}


def _accuracies(path: Path) -> dict:
    return {r.get("key", r["digest"]): r["accuracy"] for r in map(json.loads, path.read_text().splitlines())}


def test_search_killed_three_times_ends_as_an_uninterrupted_one(tiny_supernet, tiny_search, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    uninterrupted = _start(search_argv(tiny_supernet, a), tmp_path / "a.log")
    # killed after a quarter, half and three quarters of the evaluations the same search makes
    total = _lines(tiny_search / "evaluations.jsonl")
    assert total >= 8, total
    kill_points = [lambda run, k=k: _lines(run / "evaluations.jsonl") >= k * total // 4 for k in (1, 2, 3)]
    interrupted = _kill_at_and_resume(search_argv(tiny_supernet, b), b, "evaluations.jsonl", kill_points)
    _finish(uninterrupted, tmp_path / "a.log")
    assert interrupted == 3
    for name in ("arch.yaml", "search.jsonl", "state.json", "summary.md", "config.yaml"):
        assert (a / name).read_text() == (b / name).read_text(), name
    ra, rb = (json.loads((r / "result.json").read_text()) for r in (a, b))
    assert _without_times(ra) == _without_times(rb)
    assert _accuracies(a / "evaluations.jsonl") == _accuracies(b / "evaluations.jsonl")
    assert not (b / ".lock").exists()


def test_evolution_killed_three_times_ends_as_an_uninterrupted_one(tiny_supernet, tmp_path):
    """Killed inside its generations and its finalists' scores, an evolution resumed ends exactly as an
    uninterrupted one: the same population, choice and scores."""

    def argv(run: Path) -> list[str]:
        options = ["evaluations=24", "population=6", "predictor=true", "screen=2"]
        return [
            "search",
            "--supernet",
            str(tiny_supernet),
            "--strategy",
            "evolution",
            *[x for option in options for x in ("--set", option)],
            "--objective",
            "params",
            "--target",
            "300000",
            "--bn-calib-batches",
            "1",
            "--run",
            str(run),
        ]

    a, b = tmp_path / "a", tmp_path / "b"
    uninterrupted = _start(argv(a), tmp_path / "a.log")
    # 24 evaluations, then 6 noise scores and 8 finalist scores: killed in generations 2 and 4 and in the finalists
    kill_points = [lambda run, k=k: _lines(run / "evaluations.jsonl") >= k for k in (8, 20, 30)]
    interrupted = _kill_at_and_resume(argv(b), b, "evaluations.jsonl", kill_points)
    _finish(uninterrupted, tmp_path / "a.log")
    assert interrupted == 3
    for name in ("arch.yaml", "population.json", "config.yaml"):
        assert (a / name).read_text() == (b / name).read_text(), name
    ra, rb = (json.loads((r / "result.json").read_text()) for r in (a, b))
    assert _without_times(ra) == _without_times(rb)
    assert _accuracies(a / "evaluations.jsonl") == _accuracies(b / "evaluations.jsonl")


def test_compare_killed_three_times_ends_as_an_uninterrupted_one(tiny_supernet, tmp_path):
    arch = load_space("efficientformerv2-tiny").sample(random.Random(3)).save(tmp_path / "arch.yaml")

    def argv(out: Path) -> list[str]:
        return [
            "compare",
            "--searched",
            str(arch),
            "--random",
            "1",
            "--objective",
            "params",
            "--tolerance",
            "0.2",
            "--supernet",
            str(tiny_supernet),
            "--bn-calib-batches",
            "1",
            "--out",
            str(out),
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--max-steps",
            "12",
            "--checkpoint-every",
            "3",
            "--img-size",
            "32",
            "--eval-batch-size",
            "128",
        ]

    a, b = tmp_path / "a", tmp_path / "b"
    uninterrupted = _start(argv(a), tmp_path / "a.log")
    # mid-training of the searched network, between the two networks, mid-training of the random one
    kill_points = [
        lambda run: (run / "runs" / "searched" / "checkpoint.pt").exists(),
        lambda run: (run / "runs" / "searched" / "result.json").exists(),
        lambda run: (run / "runs" / "random-0" / "checkpoint.pt").exists(),
    ]
    interrupted = _kill_at_and_resume(argv(b), b, "plan.json", kill_points)
    _finish(uninterrupted, tmp_path / "a.log")
    assert interrupted == 3
    for name in ("compare.md", "compare.csv", "plan.json"):
        assert (a / name).read_text() == (b / name).read_text(), name
    ra, rb = (json.loads((r / "result.json").read_text()) for r in (a, b))
    assert _without_times(ra) == _without_times(rb)
    for network in ("searched", "random-0"):
        wa, wb = (torch.load(r / "runs" / network / "checkpoint.pt", weights_only=True)["model"] for r in (a, b))
        assert all(torch.equal(wa[k], wb[k]) for k in wa), network
