"""One budget for an arch file: ``nas profile`` and ``nas sample`` price as the search did."""

import json

import pytest
from helpers import argv

from nas import ArchConfig, LatencyTable
from nas.cli import main


def test_profile_prices_a_searched_arch_as_the_search_did(pipeline, capsys):
    result = json.loads((pipeline["search"] / "result.json").read_text())
    assert main(["profile", str(pipeline["search"] / "arch.yaml"), "--device", "iphone12", "--json"]) == 0
    profiled = json.loads(capsys.readouterr().out)
    assert profiled["num_classes"] == 10 and profiled["mes"] == pytest.approx(result["mes"])
    assert profiled["params"] == result["params"]


def test_sample_records_its_classifier_size(tmp_path, capsys):
    out = tmp_path / "random"
    assert (
        main(
            argv(
                "sample --space efficientformerv2-tiny --objective mes --target 450 --device "
                "iphone12 --num-classes 10 -n 1 --out {} --json",
                out,
            )
        )
        == 0
    )
    sampled = json.loads(capsys.readouterr().out)["archs"][0]
    assert main(["profile", str(out / "random-0.yaml"), "--device", "iphone12", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mes"] == pytest.approx(sampled["mes"])
    assert LatencyTable.__module__ == "nas.latency.table"  # exported from nas, as DESIGN promises
    assert ArchConfig.load(out / "random-0.yaml").family == "efficientformerv2"
