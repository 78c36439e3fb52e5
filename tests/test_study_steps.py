"""The study scripts' resumable step (docs/results/studies/step.sh): a step left unfinished when a session ends is
kept without checkpoints (its finished trainings only) and carried back onto the next machine, which resumes it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP = ROOT / "docs" / "results" / "studies" / "step.sh"


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {STEP}; {script}"], cwd=cwd, capture_output=True, text=True
    )


def test_an_unfinished_step_is_kept_without_checkpoints_and_resumed_on_the_next_machine(tmp_path):
    run = tmp_path / "runs" / "published-x"
    (run / "archs").mkdir(parents=True)
    (run / "archs" / "searched.yaml").write_text("family: efficientformerv2\n")
    (run / "plan.json").write_text(json.dumps({"config": {"seeds": 6}}))
    (run / ".lock").write_text("1234")
    done, under_way = run / "runs" / "searched-seed3", run / "runs" / "searched-seed4"
    for training in (done, under_way):
        training.mkdir(parents=True)
        (training / "checkpoint.pt").write_bytes(b"\0" * 1000)
        (training / "config.yaml").write_text("seed: 3\n")
    (done / "result.json").write_text(json.dumps({"top1": 0.6365}))
    (done / "events.out.tfevents.1.vm").write_bytes(b"\0")

    kept = _bash("keep_unfinished runs/published-x", tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert "kept 1 finished trainings" in kept.stdout
    copy = tmp_path / "docs" / "results" / "studies" / "unfinished" / "published-x"
    files = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
    assert files == [
        "archs/searched.yaml",
        "plan.json",
        "runs/searched-seed3/config.yaml",
        "runs/searched-seed3/result.json",
    ]

    # The next machine: runs/ is empty; the step copies the kept folder back and resumes the command.
    shutil.rmtree(tmp_path / "runs")
    resumed = _bash("step runs/published-x echo nas compare --out runs/published-x", tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "carried over: runs/published-x" in resumed.stdout
    assert resumed.stdout.rstrip().endswith("nas compare --out runs/published-x --resume")
    assert json.loads((run / "runs" / "searched-seed3" / "result.json").read_text())["top1"] == 0.6365
    assert not (run / "runs" / "searched-seed4").exists()  # under way when kept: trained again from its start

    # A step that has not started is not kept; a finished one is skipped, carried copy or not.
    assert _bash("keep_unfinished runs/nothing", tmp_path).returncode == 2
    (run / "result.json").write_text("{}")
    assert _bash("step runs/published-x false", tmp_path).stdout.strip() == "done: runs/published-x"
