"""TensorBoard event files: a training's curves, continued on resume, and a search's trajectory."""

import json
import shutil
from pathlib import Path

import pytest

from nas.cli import main

QUICK = ["--epochs", "1", "--batch-size", "32", "--bn-calib-batches", "1", "--eval-batch-size", "128"]


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series TensorBoard would show for ``folder`` (purged steps hidden)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_training_writes_tensorboard_curves_and_a_resume_continues_them(tmp_path):
    run = tmp_path / "run"
    argv = [
        "train-supernet",
        "efficientformerv2",
        "--space",
        "efficientformerv2-tiny",
        "--run",
        str(run),
        *QUICK,
        "--log-every",
        "1",
        "--checkpoint-every",
        "3",
    ]
    assert main([*argv, "--max-steps", "3"]) == 0
    at_three = run / "step3.pt"
    shutil.copy(run / "checkpoint.pt", at_three)
    assert main([*argv, "--max-steps", "5", "--resume"]) == 0
    # Pretend the process died after step 5 with its last checkpoint at step 3: the resumed run
    # logs steps 4.. again, and TensorBoard shows each step once.
    shutil.copy(at_three, run / "checkpoint.pt")
    assert main([*argv, "--max-steps", "6", "--resume"]) == 0
    curves = _scalars(run)
    assert {"train/loss", "train/lr", "train/images_per_s", "eval/largest_top1", "eval/smallest_top1"} <= set(curves)
    steps = [s for s, _ in curves["train/loss"]]
    assert steps == [1, 2, 3, 4, 5, 6]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    losses = {m["step"]: m["loss"] for m in metrics if not m.get("final")}
    assert [round(v, 5) for _, v in curves["train/loss"]] == [round(losses[s], 5) for s in steps]


def test_search_writes_its_trajectory_to_tensorboard(tiny_search):
    result = json.loads((tiny_search / "result.json").read_text())
    curves = _scalars(tiny_search)
    assert [s for s, _ in curves["search/mes"]] == list(range(result["steps"] + 1))
    last = json.loads((tiny_search / "search.jsonl").read_text().splitlines()[-1])  # the path's end, not the finalist
    assert curves["search/mes"][-1][1] == pytest.approx(last["mes"], rel=1e-6)
    assert curves["search/accuracy"][-1][1] == pytest.approx(last["accuracy"], rel=1e-6)
