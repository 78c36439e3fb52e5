"""``nas headroom``: the pilot that says, before a comparison's spend, whether its band leaves room; and
``nas compare --random-from PILOT`` counting the pilot's trainings instead of repeating them."""

import json
import random

import pytest

from nas.cli import main
from nas.studies.headroom import ROOM, pilot_summary


def _simulated(network_sd: float, seed_sd: float, k: int, n: int, rng: random.Random) -> list[list[float]]:
    quality = [0.5 + rng.gauss(0, network_sd) for _ in range(k)]
    return [[q + rng.gauss(0, seed_sd) for _ in range(n)] for q in quality]


def test_the_verdict_follows_the_networks_spread_not_the_seed_count():
    rng = random.Random(0)
    # identical networks: the std of their means is still seed noise / sqrt(n); the verdict must not see room
    flat = [pilot_summary(_simulated(0.0, 0.01, 4, 2, rng), 5) for _ in range(200)]
    assert sum(s["room"] for s in flat) <= 10  # a false "room" in at most 5% of pilots
    assert all(s["band_spread_over_seed_noise"] > s["spread_over_noise"] for s in flat)
    # networks 4 seed deviations apart: room, nearly always
    wide = [pilot_summary(_simulated(0.04, 0.01, 4, 2, rng), 5) for _ in range(200)]
    assert sum(s["room"] for s in wide) >= 180
    # the 80% interval of the ratio covers the truth (4.0) about 80% of the time
    covered = [s["spread_over_noise_interval"][0] <= 4.0 <= s["spread_over_noise_interval"][1] for s in wide]
    assert 0.7 <= sum(covered) / len(covered) <= 0.9
    s = wide[0]
    assert s["verdict"] == "room for a search to show" and s["room_threshold"] == ROOM
    assert s["margin_needed_over_random_mean"] > s["network_spread"]  # the best of 5 draws, plus a seed


@pytest.mark.slow
def test_pilot_then_a_comparison_that_reuses_its_trainings(tmp_path, capsys):
    pilot = tmp_path / "pilot"
    budget = ["--space", "efficientformerv2-tiny", "--objective", "params", "--target", "400000", "--tolerance", "0.2"]
    argv = ["headroom", *budget, "--networks", "2", "--seeds", "2", "--max-steps", "2", "--out", str(pilot)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "verdict: " in printed and "spread over noise" in printed and (pilot / "headroom.md").exists()
    result = json.loads((pilot / "result.json").read_text())
    rows = result["rows"]
    assert len(rows) == 2 and all(len(r["top1_seeds"]) == 2 for r in rows)
    assert all(0.8 * 400000 <= r["params"] <= 400000 for r in rows)  # in the band
    assert result["summary"]["seeds"] == 2 and isinstance(result["summary"]["room"], bool)
    # run again: finished, the same result, nothing trained again
    assert main([*argv, "--resume", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == rows
    # a comparison reusing the pilot's networks copies the trainings it would repeat (recipe, data, seeds)
    compare = tmp_path / "compare"
    searched = "efficientformerv2_tiny_max"  # 0.6M parameters: a band of 60% below it holds the pilot's
    argv = ["compare", "--searched", searched, "--objective", "params", "--tolerance", "0.6", "--seeds", "2"]
    assert main([*argv, "--random-from", str(pilot), "--max-steps", "2", "--out", str(compare), "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)
    assert compared["draws"]["random_from"]["trainings_reused"] == 4
    assert "4 trainings copied from there" in compared["sources"]["sampling"]
    by_digest = {r["digest"]: r["top1_seeds"] for r in rows}
    assert [r["top1_seeds"] for r in compared["rows"][1:]] == [by_digest[r["digest"]] for r in compared["rows"][1:]]
    assert (compare / "runs" / "random-0-seed1" / "reused_from.json").exists()
    assert not (compare / "runs" / "searched" / "reused_from.json").exists()


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--networks", "1"], "--networks must be at least 2"),
        (["--seeds", "1"], "--seeds must be at least 2"),
        (["--objective", "mes"], "objective mes needs --device"),
        (["--target", "1000"], "params target 1000 is out of reach"),
    ],
)
def test_bad_pilot_input_is_one_line(tmp_path, capsys, extra, fragment):
    argv = ["headroom", "--space", "efficientformerv2-tiny", "--objective", "params", "--target", "400000"]
    assert main([*argv, "--out", str(tmp_path / "p"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not (tmp_path / "p").exists()
