"""``nas compare --seeds K``: mean and spread per network, bootstrap intervals of the margins."""

import csv
import json
import random

import numpy as np
import pytest

from nas import load_space
from nas.cli import main
from nas.stats import bootstrap_margins, expected_max_normal, headroom, mean_std, pooled_std


def test_bootstrap_margins_on_known_data():
    # No noise at all: the intervals collapse onto the margins.
    exact = bootstrap_margins([0.8, 0.8, 0.8], [[0.7, 0.7], [0.75, 0.75]], replicates=2000)
    assert exact["margin_over_random_mean"] == pytest.approx(0.075)
    assert exact["margin_over_best_random"] == pytest.approx(0.05)
    assert exact["margin_over_best_random_ci"][0] == pytest.approx(0.05)  # the best can only be 0.75
    assert exact["margin_over_random_mean_ci"][0] == pytest.approx(0.05)  # two draws of the best network
    assert exact["margin_over_random_mean_ci"][1] == pytest.approx(0.10)  # two draws of the worst
    # Seed noise widens the interval, and it covers the true margin.
    rng = random.Random(0)
    searched = [0.80 + rng.gauss(0, 0.01) for _ in range(5)]
    randoms = [[0.75 + rng.gauss(0, 0.01) for _ in range(5)] for _ in range(6)]
    noisy = bootstrap_margins(searched, randoms, seed=1)
    lo, hi = noisy["margin_over_random_mean_ci"]
    assert lo < noisy["margin_over_random_mean"] < hi and lo < 0.05 < hi and hi - lo < 0.04
    assert noisy == bootstrap_margins(searched, randoms, seed=1)  # seeded: the same intervals
    assert pooled_std(randoms) == pytest.approx(0.01, abs=0.005)
    assert mean_std([0.5]) == (0.5, 0.0) and pooled_std([[0.5], [0.7]]) == 0.0


def test_headroom_of_a_budget_band():
    """The best of k random networks lies E[max of k normals] band stds above their mean; to beat it by
    the seed noise a network must sit that plus one seed std above the mean (issue 11)."""
    rng = np.random.default_rng(0)
    simulated = rng.standard_normal((200_000, 5)).max(axis=1).mean()
    assert expected_max_normal(5) == pytest.approx(simulated, abs=0.01) and expected_max_normal(5) == pytest.approx(
        1.163, abs=1e-3
    )
    assert expected_max_normal(1) == pytest.approx(0.0, abs=1e-9) and expected_max_normal(2) == pytest.approx(
        1 / np.sqrt(np.pi)
    )
    room = headroom(random_std=0.005, seed_std=0.01, draws=5)
    assert room["band_spread_over_seed_noise"] == pytest.approx(0.5)
    assert room["expected_best_random_over_mean"] == pytest.approx(0.005 * expected_max_normal(5))
    assert room["margin_needed_over_random_mean"] == pytest.approx(0.005 * expected_max_normal(5) + 0.01)
    assert headroom(0.005, 0.0, 5)["band_spread_over_seed_noise"] is None  # one seed: no noise to compare with
    with pytest.raises(ValueError, match="at least 1"):
        expected_max_normal(0)


def test_compare_with_seeds_reports_spread_and_intervals(tmp_path, capsys):
    arch = load_space("efficientformerv2-tiny").sample(random.Random(3)).save(tmp_path / "arch.yaml")
    out = tmp_path / "cmp"
    argv = [
        "compare",
        "--searched",
        str(arch),
        "--random",
        "2",
        "--seeds",
        "2",
        "--objective",
        "params",
        "--tolerance",
        "0.2",
        "--out",
        str(out),
        "--img-size",
        "32",
        "--max-steps",
        "2",
        "--epochs",
        "1",
        "--batch-size",
        "32",
        "--eval-batch-size",
        "128",
        "--json",
    ]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    for row in result["rows"]:
        runs = [
            json.loads((out / "runs" / name / "result.json").read_text())
            for name in (row["network"], f"{row['network']}-seed1")
        ]
        assert [r["top1"] for r in runs] == row["top1_seeds"]
        assert row["top1"] == pytest.approx(sum(row["top1_seeds"]) / 2)
        assert [
            json.loads((out / "runs" / n / "config.yaml").read_text().split("seed: ")[1].split("\n")[0])
            for n in (row["network"], f"{row['network']}-seed1")
        ] == [0, 1]
    s = result["summary"]
    assert s["seeds"] == 2 and 0 <= s["random_beaten"] <= 2
    lo, hi = s["margin_over_random_mean_ci"]
    assert lo <= s["margin_over_random_mean"] <= hi
    assert s["margin_over_best_random_ci"][0] <= s["margin_over_best_random_ci"][1]
    table = (out / "compare.md").read_text()
    assert " ± " in table and "95% CI" in table and "pooled seed std" in table
    assert s["margin_needed_over_random_mean"] == pytest.approx(
        headroom(s["random_top1_std"], s["pooled_seed_std"], 2)["margin_needed_over_random_mean"]
    )
    if s["pooled_seed_std"] > 0:
        assert "x the seed noise: to beat the best of 2 by more than the seed noise" in table
    rows = list(csv.DictReader((out / "compare.csv").open()))
    assert {"top1_std", "top1_seeds"} <= set(rows[0]) and len(rows[0]["top1_seeds"].split()) == 2
    # Resumed, nothing is trained again and the result is the same; other seeds are refused.
    assert main([*argv, "--resume"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in again.items() if k != "provenance"} == {
        k: v for k, v in result.items() if k != "provenance"
    }
    assert main([*argv[:-1], "--resume", "--seeds", "3"]) == 2
    assert "cannot resume with a different seeds (2 in the run, 3 now)" in capsys.readouterr().err


def test_compare_table_shows_latency_intervals():
    from nas.studies.compare import table_lines, to_csv

    row = {
        "network": "searched",
        "kind": "searched",
        "top1": 0.5,
        "top1_std": 0.0,
        "top1_seeds": [0.5],
        "params": 1e6,
        "macs": 1e8,
        "latency_ms": 1.0,
        "latency_interval_ms": [0.8, 1.25],
        "mes": 170.0,
        "digest": "abc",
    }
    lines = table_lines([row, {**row, "network": "random-0", "kind": "random", "latency_interval_ms": None}])
    assert "latency (ms, interval)" in lines[0] and "| 1.000 (0.800–1.250) |" in lines[2]
    assert "| 1.000 |" in lines[3]
    csv_lines = to_csv([row]).splitlines()
    assert "latency_low_ms,latency_high_ms" in csv_lines[0] and ",0.8,1.25," in csv_lines[1]
    assert "interval" not in table_lines([{**row, "latency_interval_ms": None}])[0]
