"""``benchmarks/gpu.py --smoke``: the GPU run's script, every step on the CPU (the figures are not speeds)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_script_smoke_runs_every_step(tmp_path):
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu.py"),
            "--smoke",
            "--work",
            str(tmp_path / "w"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    for name in ("fp32", "bf16", "bf16-channels-last", "bf16-channels-last-shards"):
        window = figures[f"supernet.sandwich.{name}"]
        assert window["images_per_s"] > 0 and 0 <= window["data_wait"] <= 1
    assert figures["train.s0.bf16-channels-last"]["images_per_s"] > 0
    assert figures["train.s0.timm_own_model_images_per_s"]["ours_over_timm"] > 0
    assert figures["search.subnets_scored_per_minute"]["per_minute"] > 0
    assert figures["latency.cpu.table"]["entries"] > 0 and figures["latency.cpu.table"]["mean_ape"] >= 0
    lines = proc.stdout.splitlines()
    assert any(line.startswith("supernet.sandwich.bf16-channels-last-shards") for line in lines)
