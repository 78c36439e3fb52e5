"""``docs/results`` cannot drift from its artifacts: the documents are regenerated from the committed
files and must match, and no committed file holds a path of the machine it ran on."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def test_every_results_document_is_what_its_files_say():
    proc = subprocess.run(
        [sys.executable, str(RESULTS / "generate.py"), "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (
        "regenerate with `python docs/results/generate.py`:\n" + proc.stdout[-4000:] + proc.stderr[-2000:]
    )


def test_no_machine_paths_in_committed_results():
    machine_path = re.compile(r"(?<![\w.])/(home|root|tmp|work|Users|check)/")
    for path in RESULTS.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".json", ".jsonl", ".yaml", ".csv"):
            text = path.read_text(encoding="utf-8")
            assert not machine_path.search(text), f"{path.relative_to(ROOT)} holds a machine path"
