"""``nas compare --seeds K``: mean and spread per network, bootstrap intervals of the margins."""

import csv
import json
import random
import statistics

import numpy as np
import pytest

from nas import load_space
from nas.cli import main
from nas.studies.stats import expected_max_normal, headroom, holm, margins, mean_std, pooled_std, searched_vs_random


def test_margins_on_known_data():
    """Welch intervals against each random network, Holm-adjusted one-sided p-values, the two-level margin
    over the random mean, the best random network named; scipy's Welch test agrees."""
    from scipy import stats

    searched = [0.80, 0.81, 0.79]
    randoms = [[0.70, 0.72, 0.71], [0.76, 0.74, 0.75], [0.73, 0.72, 0.74]]
    m = margins(searched, randoms, ["a", "b", "c"])
    assert m["margin_over_random_mean"] == pytest.approx(0.8 - statistics.fmean([0.71, 0.75, 0.73]))
    assert m["best_random_network"] == "b" and m["margin_over_best_random"] == pytest.approx(0.05)
    welch_p = stats.ttest_ind(searched, randoms[1], equal_var=False, alternative="greater").pvalue
    assert m["margin_over_best_random_p"] == pytest.approx(welch_p)
    lo, hi = m["margin_over_best_random_ci"]
    assert lo < 0.05 < hi and lo > 0  # 5 points against a seed std of 1: clearly above
    ps = [row["p"] for row in m["vs_random"]]
    assert [row["p_holm"] for row in m["vs_random"]] == pytest.approx(holm(ps))
    assert m["beats_every_random"] is True and m["beats_every_random_p"] == pytest.approx(max(holm(ps)))
    # the two-level interval: the spread of the 3 means over 3, plus the searched seeds' variance over 3
    se = (statistics.variance([0.71, 0.75, 0.73]) / 3 + statistics.variance(searched) / 3) ** 0.5
    lo, hi = m["margin_over_random_mean_ci"]
    assert (hi - lo) / 2 > stats.t.ppf(0.975, 4) * se > (hi - lo) / 2 - se  # Welch-Satterthwaite dof in [2, 4]
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert pooled_std(randoms) == pytest.approx(0.01) and mean_std([0.5]) == (0.5, 0.0)


def test_a_figure_over_independent_comparisons_is_scipys_one_sample_interval():
    from scipy import stats as scipy_stats

    from nas.studies.stats import over_comparisons

    margins = [0.012, -0.004, 0.021]
    pooled = over_comparisons(margins, level=0.95)
    expected = scipy_stats.ttest_1samp(margins, 0.0, alternative="greater")
    low, high = scipy_stats.ttest_1samp(margins, 0.0).confidence_interval(0.95)
    assert pooled["estimate"] == pytest.approx(sum(margins) / 3)
    assert pooled["ci"] == pytest.approx([low, high]) and pooled["p"] == pytest.approx(expected.pvalue)
    assert pooled["dof"] == pytest.approx(2)
    alone = over_comparisons([0.012])
    assert alone["estimate"] == 0.012 and alone["ci"] is None and "one comparison" in alone["reason"]


def test_degenerate_margins_are_not_estimable():
    one_seed = margins([0.8], [[0.7], [0.75]])
    assert one_seed["margin_over_random_mean_ci"] is None and one_seed["margin_over_best_random_ci"] is None
    assert one_seed["margin_over_random_mean_reason"].startswith("not estimable: one seed")
    assert one_seed["beats_every_random"] is None and one_seed["beats_every_random_p"] is None
    flat = margins([0.8, 0.8, 0.8], [[0.7, 0.7, 0.7], [0.75, 0.75, 0.75]])
    assert flat["margin_over_best_random_ci"] is None and "zero variance" in flat["margin_over_best_random_reason"]
    lone = margins([0.8, 0.81, 0.79], [[0.7, 0.72, 0.71]])
    assert (
        lone["margin_over_random_mean_ci"] is None
        and "fewer than 2 random networks" in (lone["margin_over_random_mean_reason"])
    )
    assert lone["margin_over_best_random_ci"] is not None  # one network still has a Welch interval
    row = {"network": "searched", "top1": 0.8, "top1_seeds": [0.8], "supernet_top1": None}
    summary = {"summary": {"searched_top1": 0.8, "random_top1_mean": 0.7, "random_top1_std": 0.0}}
    from nas.reports.comparison import summary_line

    rows = [row, {**row, "network": "random-0", "top1": 0.7, "top1_seeds": [0.7]}]
    summary["summary"] = searched_vs_random(rows, with_supernet=False)
    line = summary_line(summary)
    assert "not estimable: one seed" in line and "beats every random network: not estimable" in line


def test_rejudge_recomputes_a_committed_comparison(tmp_path):
    """A finished comparison judged again from its rows: the committed summary (written by the current
    statistics) comes back, compare.md is rewritten with the p-values, a folder without a result is refused."""
    import shutil
    from pathlib import Path

    from nas.core.errors import NasError
    from nas.studies.compare import rejudge

    committed = Path(__file__).resolve().parent.parent / "docs" / "results" / "compare-v2-tiny-mes800"
    out = shutil.copytree(committed, tmp_path / "cmp")
    (out / "compare.md").write_text("stale\n")
    (out / "compare.png").unlink()
    result = rejudge(out)
    assert (out / "compare.png").read_bytes().startswith(b"\x89PNG")  # redrawn, with the random frontier
    assert result["summary"] == json.loads((committed / "result.json").read_text())["summary"]
    text = (out / "compare.md").read_text()
    assert text == (committed / "compare.md").read_text()
    assert "Holm-adjusted" in text and "one-sided p =" in text and "beats every random network: no" in text
    with pytest.raises(NasError, match="no finished comparison"):
        rejudge(tmp_path / "missing")


def test_a_comparison_is_stale_when_its_summary_is_not_the_current_statistics(tmp_path):
    import shutil
    from pathlib import Path

    from nas.core.errors import NasError
    from nas.studies.compare import rejudge, stale

    committed = Path(__file__).resolve().parent.parent / "docs" / "results" / "compare-v2-tiny-mes800"
    out = shutil.copytree(committed, tmp_path / "cmp")
    assert not stale(out)
    result = json.loads((out / "result.json").read_text())
    del result["summary"]["frontier"]  # as a comparison written before the frontier was
    (out / "result.json").write_text(json.dumps(result))
    assert stale(out)
    rejudge(out)
    assert not stale(out)
    with pytest.raises(NasError, match="holds no finished comparison"):
        stale(tmp_path / "missing")


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
    table = (out / "compare.md").read_text()
    if s["margin_over_random_mean_ci"] is not None:  # two training steps may leave every seed alike
        lo, hi = s["margin_over_random_mean_ci"]
        assert lo <= s["margin_over_random_mean"] <= hi and "95% CI" in table
    else:
        assert "not estimable" in table
    assert len(s["vs_random"]) == 2 and "Holm-adjusted" in table and "beats every random network:" in table
    assert " ± " in table and "pooled seed std" in table
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
    from nas.reports.comparison import table_lines, to_csv

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
