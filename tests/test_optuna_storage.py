"""An optuna database shared by two processes, and a study that resumes."""

import os
import subprocess
import sys

import pytest

from nas.cli import main


@pytest.mark.slow
def test_two_processes_share_one_sqlite_study_and_a_study_resumes(tiny_supernet, tmp_path):
    import optuna

    db = f"sqlite:///{tmp_path / 'shared.db'}"  # target 7e5 parameters: every tiny sub-network meets it
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def search(run: str, seed: int, trials: int, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nas",
                "search",
                "--supernet",
                str(tiny_supernet),
                "--strategy",
                "optuna",
                "--trials",
                str(trials),
                "--objective",
                "params",
                "--target",
                "7e5",
                "--bn-calib-batches",
                "1",
                "--storage",
                db,
                "--seed",
                str(seed),
                "--run",
                str(tmp_path / run),
                *extra,
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )

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
    assert (
        main(
            [
                "search",
                "--supernet",
                str(tiny_supernet),
                "--strategy",
                "optuna",
                "--trials",
                "3",
                "--objective",
                "params",
                "--target",
                "7e5",
                "--bn-calib-batches",
                "1",
                "--run",
                str(own),
            ]
        )
        == 0
    )
    first = optuna.load_study(study_name="nas-search", storage=f"sqlite:///{own / 'optuna.db'}")
    kept = [(t.number, t.values) for t in first.trials]
    assert (
        main(
            [
                "search",
                "--supernet",
                str(tiny_supernet),
                "--strategy",
                "optuna",
                "--trials",
                "5",
                "--objective",
                "params",
                "--target",
                "7e5",
                "--bn-calib-batches",
                "1",
                "--run",
                str(own),
                "--resume",
            ]
        )
        == 2
    )  # --trials changes the result: refused
    assert (
        main(
            [
                "search",
                "--supernet",
                str(tiny_supernet),
                "--strategy",
                "optuna",
                "--trials",
                "3",
                "--objective",
                "params",
                "--target",
                "7e5",
                "--bn-calib-batches",
                "1",
                "--run",
                str(own),
                "--resume",
            ]
        )
        == 0
    )
    again = optuna.load_study(study_name="nas-search", storage=f"sqlite:///{own / 'optuna.db'}")
    assert [(t.number, t.values) for t in again.trials] == kept  # nothing re-run
