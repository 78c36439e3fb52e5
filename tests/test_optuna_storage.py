"""An optuna database shared by two processes, and a study that resumes."""

import os
import subprocess
import sys

import pytest

from nas.cli import main


def optuna_search(supernet, run, trials: int, *extra: str) -> list[str]:
    """``nas search``'s arguments for an optuna search of ``trials`` on the tiny supernet, to 7e5
    parameters (every tiny sub-network meets it), with one BatchNorm calibration batch."""
    return [
        "search",
        *("--supernet", str(supernet), "--strategy", "optuna", "--set", f"evaluations={trials}"),
        *("--objective", "params", "--target", "7e5", "--bn-calib-batches", "1", "--run", str(run)),
        *extra,
    ]


@pytest.mark.slow
def test_two_processes_share_one_sqlite_study_and_a_study_resumes(tiny_supernet, tmp_path):
    import optuna

    db = f"sqlite:///{tmp_path / 'shared.db'}"
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def search(run: str, seed: int, trials: int) -> subprocess.Popen:
        args = optuna_search(tiny_supernet, tmp_path / run, trials, "--set", f"storage={db}", "--seed", str(seed))
        return subprocess.Popen([sys.executable, "-m", "nas", *args], env=env, stderr=subprocess.PIPE, text=True)

    procs = [search("a", 1, 8), search("b", 2, 8)]
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()[-2000:]
    study = optuna.load_study(study_name="nas-search", storage=db)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) >= 8
    assert {t.user_attrs["run"] for t in done} == {str(tmp_path / "a"), str(tmp_path / "b")}  # both added trials
    # Each run's trials.jsonl and front come from the whole study.
    assert len((tmp_path / "a" / "trials.jsonl").read_text().splitlines()) >= 8
    # Continue the study in the default database of a run: the finished trials stay, new ones are added.
    own = tmp_path / "own"
    assert main(optuna_search(tiny_supernet, own, 3)) == 0
    first = optuna.load_study(study_name="nas-search", storage=f"sqlite:///{own / 'optuna.db'}")
    kept = [(t.number, t.values) for t in first.trials]
    assert main(optuna_search(tiny_supernet, own, 5, "--resume")) == 2  # --trials changes the result: refused
    assert main(optuna_search(tiny_supernet, own, 3, "--resume")) == 0
    again = optuna.load_study(study_name="nas-search", storage=f"sqlite:///{own / 'optuna.db'}")
    assert [(t.number, t.values) for t in again.trials] == kept  # nothing re-run
