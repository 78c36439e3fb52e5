"""Kill anywhere, resume to the same result: ``nas search`` and ``nas compare`` are SIGKILLed at
several random moments and resumed; they end with the same architecture, accuracies and tables as
a run that was never interrupted. (Supernet training killed three times:
``tests/test_train_supernet.py``.)"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from nas import load_space

ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def _nas(*argv: str) -> list[str]:
    return [sys.executable, "-m", "nas", *argv]


def _run_to_end(argv: list[str], run: Path) -> None:
    proc = subprocess.run(_nas(*argv), env=ENV, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _kill_and_resume(
    argv: list[str],
    run: Path,
    started: str,
    rng: random.Random,
    kills: int = 3,
    window: tuple[float, float] = (0.2, 3.0),
) -> int:
    """Start ``argv`` ``kills`` times, each time SIGKILLing it a random time after ``run/started``
    appears (or, once it exists, after the process starts); then finish it. Each start after the
    first passes ``--resume``. Returns how many kills interrupted unfinished work."""
    interrupted = 0
    for _ in range(kills):
        resume = ["--resume"] if (run / started).exists() else []
        proc = subprocess.Popen(_nas(*argv, *resume), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 300
        while not (run / started).exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(*window))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            interrupted += not (run / "result.json").exists()
        proc.wait()
    _run_to_end([*argv, *(["--resume"] if (run / started).exists() else [])], run)
    return interrupted


def _without_times(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "provenance"}


def _accuracies(path: Path) -> dict:
    return {r["digest"]: r["accuracy"] for r in map(json.loads, path.read_text().splitlines())}


def test_search_killed_at_random_moments_ends_as_an_uninterrupted_one(tiny_supernet, tmp_path):
    def argv(run: Path) -> list[str]:
        return [
            "search",
            "--supernet",
            str(tiny_supernet),
            "--objective",
            "mes",
            "--target",
            "420",
            "--device",
            "iphone12",
            "--bn-calib-batches",
            "1",
            "--run",
            str(run),
        ]

    a, b = tmp_path / "a", tmp_path / "b"
    _run_to_end(argv(a), a)
    interrupted = _kill_and_resume(argv(b), b, "evaluations.jsonl", random.Random(11), window=(0.0, 2.5))
    print("search kills that interrupted:", interrupted)
    assert interrupted >= 1, "no kill landed before the search finished"
    for name in ("arch.yaml", "search.jsonl", "state.json", "summary.md", "config.yaml"):
        assert (a / name).read_text() == (b / name).read_text(), name
    ra, rb = (json.loads((r / "result.json").read_text()) for r in (a, b))
    assert _without_times(ra) == _without_times(rb)
    assert _accuracies(a / "evaluations.jsonl") == _accuracies(b / "evaluations.jsonl")
    assert not (b / ".lock").exists()


def test_compare_killed_at_random_moments_ends_as_an_uninterrupted_one(tiny_supernet, tmp_path):
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
    _run_to_end(argv(a), a)
    interrupted = _kill_and_resume(argv(b), b, "plan.json", random.Random(5), window=(0.3, 2.5))
    print("compare kills that interrupted:", interrupted)
    assert interrupted >= 1, "no kill landed before the comparison finished"
    for name in ("compare.md", "compare.csv", "plan.json"):
        assert (a / name).read_text() == (b / name).read_text(), name
    ra, rb = (json.loads((r / "result.json").read_text()) for r in (a, b))
    assert _without_times(ra) == _without_times(rb)
    for network in ("searched", "random-0"):
        wa, wb = (torch.load(r / "runs" / network / "checkpoint.pt", weights_only=True)["model"] for r in (a, b))
        assert all(torch.equal(wa[k], wb[k]) for k in wa), network
