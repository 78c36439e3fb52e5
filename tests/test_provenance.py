"""Every run's ``result.json`` says which code made it and how long it took over all sessions."""

import json
import subprocess
import threading
import time

import pytest

from nas.cli import main
from nas.runs.provenance import RunClock, code_version

QUICK = ["--epochs", "1", "--batch-size", "32", "--eval-batch-size", "128", "--log-every", "2", "--img-size", "32"]


def test_code_version_is_this_checkout():
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    version = code_version()
    assert version["commit"] == head and isinstance(version["dirty"], bool)


def test_wall_time_adds_up_over_a_resumed_run(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "swiftformer_xs", "--run", str(run), "--max-steps", "2", *QUICK]) == 0
    first = json.loads((run / "result.json").read_text())["provenance"]
    assert first["sessions"] == 1 and first["wall_seconds"] > 0 and first["commit"] == code_version()["commit"]
    assert {"torch", "timm", "python", "cpus"} <= set(first)
    (run / "result.json").unlink()  # as if stopped after the checkpoint at step 2
    assert main(["train", "swiftformer_xs", "--run", str(run), "--max-steps", "4", "--resume", *QUICK]) == 0
    second = json.loads((run / "result.json").read_text())["provenance"]
    sessions = json.loads((run / "wall.json").read_text())["sessions"]
    assert second["sessions"] == len(sessions) == 2
    assert abs(second["wall_seconds"] - sum(s["seconds"] for s in sessions)) < 0.2
    assert second["wall_seconds"] > first["wall_seconds"]


def test_a_new_run_restarts_the_count_and_a_bad_wall_file_is_only_a_warning(tmp_path, caplog):
    (tmp_path / "wall.json").write_text("{not json")
    clock = RunClock(tmp_path, resume=True)
    assert "unreadable" in caplog.text
    assert clock.summary()["sessions"] == 1
    assert RunClock(tmp_path, resume=False).summary()["sessions"] == 1
    assert RunClock(tmp_path, resume=True).summary()["sessions"] == 2


def test_a_session_records_the_code_it_started_with(tmp_path, monkeypatch):
    """A commit made while a long run goes, before its first save, does not change what it says it ran."""
    import nas.runs.provenance

    started = code_version()
    clock = RunClock(tmp_path, resume=False)
    monkeypatch.setattr(nas.runs.provenance, "code_version", lambda: {"commit": "later", "dirty": True})
    assert clock.summary()["commit"] == started["commit"] != "later"
    assert json.loads((tmp_path / "wall.json").read_text())["sessions"][0]["commit"] == started["commit"]


def test_a_ticking_clock_records_the_time_while_the_work_saves_elsewhere(tmp_path):
    """A comparison's network trains in its own folder: the comparison's clock ticks on a timer, so a session
    killed mid-training still left its time so far in the comparison's wall.json (then once more at the end)."""
    clock = RunClock(tmp_path, resume=False)
    wall = tmp_path / "wall.json"
    with clock.ticking(every_s=0.05):
        deadline = time.monotonic() + 30
        while not wall.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        during = json.loads(wall.read_text())["sessions"]
        assert len(during) == 1 and during[0]["seconds"] > 0
        time.sleep(0.1)
    after = json.loads(wall.read_text())["sessions"]
    assert len(after) == 1 and after[0]["seconds"] >= during[0]["seconds"] + 0.1
    assert not [t for t in threading.enumerate() if t.name.startswith("wall clock of")]
    with pytest.raises(KeyboardInterrupt), clock.ticking(every_s=60):  # an interrupted block still records
        raise KeyboardInterrupt
    assert json.loads(wall.read_text())["sessions"][0]["seconds"] >= after[0]["seconds"]
