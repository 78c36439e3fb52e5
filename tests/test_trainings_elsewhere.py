"""A comparison's trainings made on another machine (docs/results/studies/trainings_elsewhere.py: the
study's seed-2 networks trained on a lent GPU) are the ones ``nas compare`` plans, and it adopts them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import compare_argv

from nas.cli import main
from nas.reports.comparison import hardware_words

SCRIPT = Path(__file__).parent.parent / "docs" / "results" / "studies" / "trainings_elsewhere.py"


def _script(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # plans, trains in two processes, packs and adopts: 34 s
def test_trainings_made_elsewhere_are_adopted_by_the_comparison(tiny_search, tmp_path, capsys):
    out = tmp_path / "out"
    argv = compare_argv(tiny_search, out, "--seeds", "2", "--json")
    jobs = tmp_path / "jobs.pkl"
    planned = _script("plan", str(jobs), "--", *argv[1:])
    assert planned.returncode == 0, planned.stderr[-3000:]
    listing = json.loads(jobs.with_suffix(".json").read_text())
    runs = [Path(j["run"]) for j in listing["jobs"]]
    assert [r.name for r in runs] == [f"{n}{s}" for n in ("searched", "random-0", "random-1") for s in ("", "-seed1")]

    pack = tmp_path / "back" / "trainings.tar.gz"
    trained = _script("train", str(jobs), "--processes", "2", "--threads", "1", "--pack", str(pack))
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    record = json.loads((pack.parent / "trainings.json").read_text())
    assert len(record["trainings"]) == 6 and not record["failed"] and record["gpu"] is None
    assert pack.stat().st_size > 0
    stamps = {r: (r / "result.json").stat().st_mtime_ns for r in runs}

    assert main(argv) == 0  # adopts the six finished run folders: trains none of them again
    result = json.loads(capsys.readouterr().out)
    assert {r: (r / "result.json").stat().st_mtime_ns for r in runs} == stamps
    plan = json.loads((out / "plan.json").read_text())
    assert [n["digest"] for n in plan["networks"]] == [j["arch_digest"] for j in listing["jobs"][::2]]
    assert (
        result["sources"]["hardware"].startswith("trained on the CPU (")
        and "6 of 6 trainings" in result["sources"]["hardware"]
    )
    checked = _script("check", str(jobs))
    assert checked.returncode == 0 and "6 trainings finished, each the network its comparison plans" in checked.stdout

    # A run folder that trained another network than the comparison plans is found.
    first = json.loads(jobs.with_suffix(".json").read_text())["jobs"][0]["run"]
    plan["networks"][0]["digest"] = "000000000000"
    (out / "plan.json").write_text(json.dumps(plan))
    checked = _script("check", str(jobs))
    assert checked.returncode == 1 and f"{first}: trained" in checked.stdout


def test_hardware_words_count_the_trainings_of_each_machine():
    gpu = {"provenance": {"cuda": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cpus": 16}}
    cpu = {"provenance": {"cuda": None, "torch": "2.14.1+cu130", "cpus": 2}}
    assert hardware_words([gpu] * 3) == "trained on NVIDIA H100 80GB HBM3 (CUDA), torch 2.11.0+cu130: 3 of 3 trainings"
    assert hardware_words([cpu, gpu, cpu]) == (
        "trained on the CPU (2 cores), torch 2.14.1+cu130: 2 of 3 trainings; "
        "NVIDIA H100 80GB HBM3 (CUDA), torch 2.11.0+cu130: 1 of 3 trainings"
    )
