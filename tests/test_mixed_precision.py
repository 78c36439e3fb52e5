"""Mixed precision: bf16 autocast on the CPU against float32."""

import json

import pytest
import torch
from helpers import argv

from nas import load_space
from nas.cli import main

QUICK = ["--epochs", "1", "--batch-size", "32", "--bn-calib-batches", "1", "--eval-batch-size", "128"]


def test_bf16_autocast_on_cpu_matches_float32_within_tolerance(tmp_path):
    from nas.config.recipe import load_recipe
    from nas.data import eval_loader, load_splits
    from nas.metrics.accuracy import top1

    losses = {}
    for amp in ("none", "bf16"):
        run = tmp_path / amp
        assert (
            main(
                [
                    *argv(
                        "train efficientformerv2_s0 --run {} --img-size 32 --max-steps 3 --log-every 1 "
                        "--amp {} --channels-last true",
                        run,
                        amp,
                    ),
                    *QUICK,
                ]
            )
            == 0
        )
        losses[amp] = [
            json.loads(line)["loss"]
            for line in (run / "metrics.jsonl").read_text().splitlines()
            if '"final"' not in line
        ]
    assert losses["bf16"] == pytest.approx(losses["none"], rel=0.02)
    from supernets import build_static

    model = build_static(load_space("efficientformerv2").named("efficientformerv2_s0"), img_size=32, num_classes=10)
    model.load_state_dict(torch.load(tmp_path / "none" / "checkpoint.pt", weights_only=True)["model"])
    recipe = load_recipe("demo")
    loader = eval_loader(load_splits(None, recipe, 0).val, recipe)
    assert top1(model, loader, amp="bf16") == pytest.approx(top1(model, loader), abs=0.02)
