"""docs/tutorial.md runs as written: its fenced ``bash`` and ``python`` blocks, in order, in one empty folder,
with ``nas`` and ``python`` this checkout's; then the files each step says it writes are checked."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)

pytestmark = pytest.mark.slow


def blocks(text: str) -> list[tuple[str, str]]:
    """The page's fenced blocks that run, as (language, code), in order (other fences are output to read)."""
    return [(lang, code) for lang, code in FENCE.findall(text) if lang in ("bash", "python")]


def test_the_tutorials_blocks_are_what_the_test_runs():
    found = blocks(TUTORIAL.read_text())
    assert [lang for lang, _ in found] == ["python", "bash", "bash", "bash", "bash", "bash", "bash", "python"]
    commands = [code.split()[1] for lang, code in found if lang == "bash"]
    assert commands == ["data", "build-table", "train-supernet", "search", "train", "export"]


def test_the_tutorial_runs_as_written(tmp_path):
    work = tmp_path / "tutorial"
    work.mkdir()
    bin_dir = tmp_path / "bin"  # `nas` and `python` are this checkout's, whatever is installed
    bin_dir.mkdir()
    for name, argv in (("nas", f'"{sys.executable}" -m nas'), ("python", f'"{sys.executable}"')):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    # The shipped tables, as in a fresh checkout: the page's `nas build-table` writes one of its own at 32 px,
    # which must not replace the one the worker's other tests price the tiny space with.
    env["NAS_LATENCY_DIR"] = str(shutil.copytree(ROOT / "latency_tables", tmp_path / "latency_tables"))
    outputs = []
    for i, (lang, code) in enumerate(blocks(TUTORIAL.read_text())):
        if lang == "python":
            script = tmp_path / f"block{i}.py"
            script.write_text(code)
            argv = [sys.executable, str(script)]
        else:
            argv = ["bash", "-euo", "pipefail", "-c", code]
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, f"block {i} ({lang}) failed:\n{code}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    make, check, table, supernet, search, train, export, inspect = outputs

    # 1-2: the folder, as the page says
    assert len(list((work / "digits" / "train").glob("*/*.png"))) == 1433
    assert len(list((work / "digits" / "val").glob("*/*.png"))) == 364
    assert "train: 1433 images in 10 classes" in check and "val: 364 images in 10 classes" in check
    # 3: a predicted table at the training size, labelled as such
    assert re.search(r"^source\s+predicted$", table, re.M)
    written = Path(re.search(r"^table\s+(\S+)$", table, re.M).group(1))
    assert written.name == "efficientformerv2-tiny-32.json"
    assert json.loads(written.read_text())["header"]["source"] == "predicted"
    # 4: the supernet learned something on the search split
    result = json.loads((work / "runs" / "supernet" / "result.json").read_text())
    assert result["largest_top1"] > 0.3 and result["smallest_top1"] > 0.2, result
    assert (work / "runs" / "supernet" / "checkpoint.pt").exists()
    # 5: the searched arch meets its target, priced at 32 px on the phone's predicted table
    from nas import ArchConfig

    arch = ArchConfig.load(work / "runs" / "search" / "arch.yaml")
    searched = json.loads((work / "runs" / "search" / "result.json").read_text())
    assert searched["mes"] >= 450 and "MES" in search
    assert "cost priced at 32 px" in search
    assert searched["strategy"] == "evolution" and searched["evaluations"] == 100  # the default strategy
    assert searched["mes"] <= 450 * 1.05  # in the band
    for name in ("population.json", "evaluations.jsonl"):
        assert (work / "runs" / "search" / name).exists(), name
    # 6: trained from scratch, scored on val/
    trained = json.loads((work / "runs" / "train" / "result.json").read_text())
    assert "on val/ folder (364 images" in train
    assert trained["top1"] > 0.3, trained
    # 7-8: the Core ML package of that arch, with the input and output the page describes
    package = work / "digits.mlpackage"
    assert (package / "Manifest.json").exists() and "wrote digits.mlpackage" in export
    assert "x [1, 3, 32, 32]" in inspect
    assert re.search(r"\[1, 10\]$", inspect, re.M), inspect
    if sys.platform == "darwin":
        assert "Core ML top-1 on val/" in inspect
    assert arch.family == "efficientformerv2"
