"""``nas rank-check``: the supernet's ranking against from-scratch training, beside free rankings."""

import json
import shutil

import numpy as np
import pytest

from nas import ArchConfig
from nas.cli import main
from nas.studies.stats import rank_stats


def test_rank_stats_on_known_rankings():
    same = rank_stats([1, 2, 3, 4, 5, 6, 7, 8], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    assert same["kendall_tau"] == pytest.approx(1.0) and same["spearman_rho"] == pytest.approx(1.0)
    assert same["kendall_tau_ci"] is None and same["top2_overlap"] == 1.0  # a perfect ranking: no interval
    assert same["kendall_tau_reason"].startswith("not estimable: a perfect ranking of 8 networks")
    reverse = rank_stats([8, 7, 6, 5, 4, 3, 2, 1], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    assert reverse["kendall_tau"] == pytest.approx(-1.0) and reverse["top2_overlap"] == 0.0
    noisy = rank_stats([1, 3, 2, 4, 6, 5, 8, 7], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    lo, hi = noisy["kendall_tau_ci"]
    assert lo <= noisy["kendall_tau"] <= hi < 1.0 + 1e-9 and 0 < noisy["kendall_tau"] < 1


def test_tau_difference_is_paired():
    from nas.studies.stats import rank_stats, tau_difference

    truth = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    same = tau_difference([1, 2, 3, 4, 5, 6, 7, 8], [10, 20, 30, 40, 50, 60, 70, 80], truth)
    assert same["difference"] == pytest.approx(0.0) and same["ci"] is None  # no network contributes any spread
    assert same["reason"].startswith("not estimable")
    opposite = tau_difference([1, 2, 3, 4, 5, 6, 7, 8], [8, 7, 6, 5, 4, 3, 2, 1], truth)
    assert opposite["difference"] == pytest.approx(2.0) and opposite["ci"] is None
    # Two noisy rankings of 20 networks one swap apart: a small difference whose paired interval is far
    # narrower than either ranking's own interval (their noise is shared).
    truth20 = list(range(20))
    noisy = [v + 6 * e for v, e in zip(truth20, np.random.default_rng(0).standard_normal(20))]
    order = np.argsort(noisy)
    swapped = list(noisy)
    swapped[order[9]], swapped[order[10]] = noisy[order[10]], noisy[order[9]]
    close = tau_difference(noisy, swapped, truth20)
    lo, hi = close["ci"]
    own = rank_stats(noisy, truth20)["kendall_tau_ci"]
    assert abs(close["difference"]) < 0.02 and lo < close["difference"] < hi
    assert hi - lo < 0.25 * (own[1] - own[0])
    assert tau_difference([1, 2, 3, 4], [2, 1, 3, 4], [1, 2, 3, 4])["reason"] == (
        "not estimable: 4 networks, at least 5 needed"
    )


def test_spread_indices_span_the_study():
    from nas.search.sample import spread_indices

    assert spread_indices(20, 5) == [0, 5, 10, 14, 19] and spread_indices(20, 0) == []
    assert spread_indices(5, 2) == [0, 4] and spread_indices(5, 1) == [2] and spread_indices(4, 4) == [0, 1, 2, 3]


@pytest.mark.slow
def test_rank_check_on_a_tiny_supernet(tiny_supernet, tmp_path, capsys, monkeypatch):
    out = tmp_path / "rank"
    argv = [
        "rank-check",
        "--supernet",
        str(tiny_supernet),
        "-n",
        "5",
        "--device",
        "iphone12",
        "--out",
        str(out),
        "--max-steps",
        "2",
        "--epochs",
        "1",
        "--batch-size",
        "32",
        "--img-size",
        "32",
        "--bn-calib-batches",
        "1",
        "--full-recipe",
        "demo",
        "--full-n",
        "2",
        "--json",
    ]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    rows = result["rows"]
    assert len(rows) == 5 and len({r["digest"] for r in rows}) == 5
    latencies = [r["latency_ms"] for r in rows]
    assert latencies == sorted(latencies)  # spread over the range, in order
    plan = json.loads((out / "plan.json").read_text())
    assert [r["digest"] for r in rows] == [ArchConfig.from_dict(a).digest for a in plan["networks"]]
    # Priced where the supernet trained and the networks train (32 px), not at 224 px, and said so.
    assert plan["config"]["img_size"] == 32
    assert result["sources"]["resolution"] == "cost priced at 32 px; trained and scored at 32 px"
    assert set(result["rankings"]) == {"supernet", "params", "macs", "latency", "synflow", "grad_norm"}
    for name, stats in result["rankings"].items():
        assert {"kendall_tau", "kendall_tau_ci", "spearman_rho", "spearman_rho_ci", "top1_overlap"} <= set(stats)
        assert ("supernet_minus_tau" in stats) == (name != "supernet")
    # The longer recipe checks the short one on networks spanning the range: the first and the last.
    assert result["short_vs_full"]["n"] == 2 and result["short_vs_full"]["networks"] == ["net-00", "net-04"]
    assert [("full_top1" in r) for r in rows] == [True, False, False, False, True]
    assert sorted(p.name for p in (out / "runs-full").iterdir()) == ["net-00", "net-04"]
    for row in rows:
        trained = json.loads((out / "runs" / row["network"] / "result.json").read_text())
        assert trained["top1"] == row["scratch_top1"]
    assert "| supernet |" in (out / "rank.md").read_text() and (out / "rank.csv").exists()
    # Resumed: nothing trained again, the same study; without --resume the folder is refused.
    assert main([*argv, "--resume"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in again.items() if k != "provenance"} == {
        k: v for k, v in result.items() if k != "provenance"
    }
    assert main(argv) == 2
    assert "pass --resume" in capsys.readouterr().err

    # A supernet variant (here: another BatchNorm calibration) against the same from-scratch trainings:
    # nothing is trained, the networks and their from-scratch top-1 are the earlier study's.
    variant = tmp_path / "variant"
    at = argv.index("--out")
    base = argv[:at] + argv[at + 2 :]
    base[base.index("--bn-calib-batches") + 1] = "2"
    assert main([*base, "--out", str(variant), "--scratch-from", str(out)]) == 0
    other = json.loads(capsys.readouterr().out)
    assert [r["scratch_top1"] for r in other["rows"]] == [r["scratch_top1"] for r in rows]
    assert [r["digest"] for r in other["rows"]] == [r["digest"] for r in rows]
    assert other["short_vs_full"] == result["short_vs_full"] and not (variant / "runs").exists()
    assert json.loads((variant / "plan.json").read_text())["config"]["scratch_from"] == str(out)
    assert other["sources"]["from scratch"].endswith(f"recorded by {out}")
    # A study as committed (plan.json and result.json, no training runs) is reused the same way.
    committed = tmp_path / "committed"
    committed.mkdir()
    for name in ("plan.json", "result.json"):
        shutil.copy(out / name, committed / name)
    assert main([*base, "--out", str(tmp_path / "v4"), "--scratch-from", str(committed)]) == 0
    reused = json.loads(capsys.readouterr().out)
    assert [r["scratch_top1"] for r in reused["rows"]] == [r["scratch_top1"] for r in rows]
    assert reused["rankings"] == other["rankings"] and reused["short_vs_full"] == result["short_vs_full"]
    # A result.json that does not match its plan (edited, or from another study) is refused.
    edited = json.loads((committed / "result.json").read_text())
    edited["rows"] = edited["rows"][::-1]
    (committed / "result.json").write_text(json.dumps(edited))
    assert main([*base, "--out", str(tmp_path / "v5"), "--scratch-from", str(committed)]) == 2
    assert "does not list the networks of its plan.json" in capsys.readouterr().err
    assert not (tmp_path / "v5").exists()
    (committed / "result.json").write_text('{"rows": [')  # cut short
    assert main([*base, "--out", str(tmp_path / "v6"), "--scratch-from", str(committed)]) == 2
    assert "result.json is not a ranking study's result" in capsys.readouterr().err
    assert not (tmp_path / "v6").exists()
    # Other trainings than the study would run, or a folder that holds no finished study: refused.
    assert main([*base, "--out", str(tmp_path / "v2"), "--scratch-from", str(out), "--seed", "1"]) == 2
    assert "its seed differs (0 there, 1 here)" in capsys.readouterr().err and not (tmp_path / "v2").exists()
    assert main([*base, "--out", str(tmp_path / "v3"), "--scratch-from", str(tmp_path / "nothing")]) == 2
    assert "not a finished ranking study" in capsys.readouterr().err


def test_the_networks_comparisons_trained_are_ranked_by_another_supernet(
    tiny_supernet, tiny_search, tiny_comparison, tmp_path, capsys
):
    """--scratch-from comparisons: every distinct network they trained (once, from the comparison that trained it
    with the most seeds), their recorded top-1 as the ground truth, nothing trained, and the supernet that scored
    them there as one more ranking, paired with the one scored now: how a supernet trained longer is checked."""
    from helpers import compare_argv

    # A second comparison of the same search: the same two random networks (reused, not trained again) and two
    # named members of the space as baselines.
    second = tmp_path / "second"
    named = ["--baseline", "efficientformerv2_tiny_min", "efficientformerv2_tiny_max"]
    assert main([*compare_argv(tiny_search, second), *named, "--reuse-trainings", str(tiny_comparison)]) == 0
    capsys.readouterr()
    out = tmp_path / "rank"
    argv = ["rank-check", "--supernet", str(tiny_supernet), "--bn-calib-batches", "1", "--json"]
    assert main([*argv, "--scratch-from", str(tiny_comparison), str(second), "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    compared = {
        r["digest"]: r
        for folder in (second, tiny_comparison)  # the first comparison's rows win a tie, as the study's
        for r in json.loads((folder / "result.json").read_text())["rows"]
    }
    rows = result["rows"]
    assert len(rows) == len(compared) == 5 and not (out / "runs").exists()
    assert [r["network"] for r in rows] == [
        f"{tiny_comparison.name}/searched",
        f"{tiny_comparison.name}/random-0",
        f"{tiny_comparison.name}/random-1",
        "efficientformerv2_tiny_min",
        "efficientformerv2_tiny_max",
    ]
    for row in rows:
        assert row["scratch_top1"] == compared[row["digest"]]["top1"]
        assert row["recorded_supernet_top1"] == compared[row["digest"]]["supernet_top1"]
        # the same supernet, scored as the comparisons scored it: the same top-1
        assert row["supernet_top1"] == pytest.approx(row["recorded_supernet_top1"], abs=1e-9)
    recorded = result["rankings"]["recorded supernet"]
    assert recorded["kendall_tau"] == result["rankings"]["supernet"]["kendall_tau"]
    assert recorded["supernet_minus_tau"]["difference"] == pytest.approx(0.0)
    plan = json.loads((out / "plan.json").read_text())["config"]
    assert plan["compared_from"] == [str(tiny_comparison), str(second)] and plan["scratch_from"] == ""
    assert (
        plan["n"] == 5
        and plan["recipe_name"] == json.loads((second / "plan.json").read_text())["config"]["recipe_name"]
    )
    assert f"as recorded by 2 comparisons ({tiny_comparison}, {second})" in result["sources"]["from scratch"]
    assert "| recorded supernet |" in (out / "rank.md").read_text()
    assert "recorded_supernet_top1" in (out / "rank.csv").read_text().splitlines()[0]

    # A comparison trained another way (another seed), a folder that is no finished comparison, or a ranking
    # study beside comparisons: one line, nothing written.
    other = tmp_path / "other-seed"
    shutil.copytree(tiny_comparison, other)
    plan_path = other / "plan.json"
    saved = json.loads(plan_path.read_text())
    saved["config"]["seed"] = 1
    plan_path.write_text(json.dumps(saved))
    for sources, message in [
        ([tiny_comparison, other], f"--scratch-from {other}: its seed differs from"),
        ([tiny_comparison, tmp_path / "nothing"], "not a finished comparison"),
        ([out, tiny_comparison], "takes one ranking study, or one or more comparisons"),
    ]:
        refused = tmp_path / "refused"
        assert main([*argv, "--scratch-from", *map(str, sources), "--out", str(refused)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
        assert not refused.exists()


def test_rank_check_bad_input(tiny_supernet, tmp_path, capsys):
    assert main(["rank-check", "--supernet", str(tiny_supernet), "-n", "3", "--out", str(tmp_path / "r")]) == 2
    assert "-n must be at least 4" in capsys.readouterr().err
    assert (
        main(["rank-check", "--supernet", str(tiny_supernet), "-n", "5", "--full-n", "2", "--out", str(tmp_path / "r")])
        == 2
    )
    assert "needs --full-recipe" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_ranking_study_is_stale_when_its_taus_are_not_the_current_statistics(tmp_path):
    import json
    import shutil
    from pathlib import Path

    from nas.core.errors import NasError
    from nas.studies.rankcheck import stale

    committed = Path(__file__).resolve().parent.parent / "docs" / "results" / "rank-check-v2-tiny-bn2"
    out = shutil.copytree(committed, tmp_path / "rank")
    assert not stale(out)
    result = json.loads((out / "result.json").read_text())
    result["rankings"]["supernet"]["kendall_tau_ci"] = None  # an interval the current statistics give
    (out / "result.json").write_text(json.dumps(result))
    assert stale(out)
    with pytest.raises(NasError, match="holds no finished ranking study"):
        stale(tmp_path / "missing")


def test_a_resumed_study_keeps_the_pricing_size_it_recorded(tmp_path):
    from nas.runs.folder import RANKING, SEARCH, RunFolder
    from nas.search.input_size import price_size

    study = RunFolder(tmp_path, RANKING)
    (tmp_path / "plan.json").write_text(json.dumps({"config": {"img_size": 224}}))
    assert study.recorded_setting("img_size", resume=True) == 224
    assert price_size(None, study.recorded_setting("img_size", resume=True), 32) == 224  # a study from before keeps 224
    assert price_size(None, study.recorded_setting("img_size", resume=False), 32) == 32  # a new one: the training size
    assert price_size(64, study.recorded_setting("img_size", resume=True), 32) == 64  # --price-size decides
    (tmp_path / "plan.json").write_text("{")
    assert study.recorded_setting("img_size", resume=True) is None  # the resume check says what is wrong
    assert RunFolder(tmp_path / "none", RANKING).recorded_setting("img_size", resume=True) is None
    (tmp_path / "config.yaml").write_text("img_size: true\n")  # a search's record; not a size
    assert RunFolder(tmp_path, SEARCH).recorded_setting("img_size", resume=True) is True
    assert price_size(None, True, 32) == 32
