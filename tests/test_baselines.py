"""Issue 59, part 1: a comparison sets the searched network against named baselines (the published variants a
user would otherwise copy), trained the same way with the same seeds, each with its Welch test and its cost."""

import json

from helpers import compare_argv

from nas.cli import main
from nas.studies.compare_plan import baseline_name, network_kind
from nas.studies.stats import searched_vs_baselines, welch

SPACE = "efficientformerv2-tiny"


def test_baselines_train_beside_the_searched_network_and_are_tested(tiny_search, tiny_comparison, tmp_path, capsys):
    out = tmp_path / "cmp"
    in_band = tiny_comparison / "archs" / "random-0.yaml"  # a network of the search's band
    argv = compare_argv(tiny_search, out, "--random", "0", "--seeds", "2", "--json")
    argv += ["--baseline", "efficientformerv2_tiny_min", str(in_band), "--reuse-trainings", str(tiny_comparison)]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    rows = {r["network"]: r for r in result["rows"]}
    assert list(rows) == ["searched", "efficientformerv2_tiny_min", "baseline-random-0"]
    assert [r["kind"] for r in result["rows"]] == ["searched", "baseline", "baseline"]
    assert all(len(r["top1_seeds"]) == 2 for r in result["rows"])
    # The smallest member lies far above the MES band; the random network of the band inside it.
    assert rows["efficientformerv2_tiny_min"]["in_band"] is False and rows["baseline-random-0"]["in_band"] is True
    tests = {t["network"]: t for t in result["summary"]["vs_baselines"]}
    for name, test in tests.items():
        expected = welch(rows["searched"]["top1_seeds"], rows[name]["top1_seeds"])
        assert test["estimate"] == expected["estimate"] and test["ci"] == expected["ci"]
    assert tests["efficientformerv2_tiny_min"]["in_band"] is False
    # Seed 0 of the in-band baseline and of the searched network were trained by the first comparison: copied.
    assert (out / "runs" / "baseline-random-0" / "reused_from.json").is_file()
    assert (out / "runs" / "searched" / "reused_from.json").is_file()
    assert not (out / "runs" / "searched-seed1" / "reused_from.json").exists()
    text = (out / "compare.md").read_text()
    assert "## The searched network against the named baselines" in text
    assert "| *efficientformerv2_tiny_min* |" in text and "no (mes " in text
    assert "outside the band" in text
    assert "no random networks (--random 0)" in result["sources"]["sampling"]
    assert "baselines" in result["sources"] and (out / "compare.png").stat().st_size > 0
    assert main(["report", str(out)]) == 0 and "searched minus baseline" in (out / "report.html").read_text()
    capsys.readouterr()
    plan = json.loads((out / "plan.json").read_text())
    assert plan["config"]["baselines"] == [
        rows[n]["digest"] for n in ("efficientformerv2_tiny_min", "baseline-random-0")
    ]
    assert main([*argv[:-5], "--resume", "--baseline", "efficientformerv2_tiny_min", str(in_band)]) == 0
    capsys.readouterr()
    # Another baseline is another comparison: resuming with a different set is refused.
    assert main([*argv[:-5], "--resume", "--baseline", "efficientformerv2_tiny_min"]) == 2
    assert "baselines" in capsys.readouterr().err


def test_baselines_beside_random_networks_leave_the_random_statistics_alone(
    tiny_search, tiny_comparison, tmp_path, capsys
):
    out = tmp_path / "cmp"
    argv = compare_argv(tiny_search, out, "--random-from", str(tiny_comparison), "--json")
    assert main([*argv, "--baseline", "efficientformerv2_tiny_min"]) == 0
    result = json.loads(capsys.readouterr().out)
    first = json.loads((tiny_comparison / "result.json").read_text())
    assert [r["kind"] for r in result["rows"]] == ["searched", "random", "random", "baseline"]
    same = ("searched_top1", "random_top1_mean", "searched_rank", "networks", "margin_over_random_mean")
    assert {k: result["summary"][k] for k in same} == {k: first["summary"][k] for k in same}
    assert result["summary"]["vs_baselines"][0]["reason"].startswith("not estimable: one seed")
    assert "against efficientformerv2_tiny_min" in (out / "compare.md").read_text()


def test_bad_baselines_are_one_line(tiny_search, tmp_path, capsys):
    searched = str(tiny_search / "arch.yaml")
    for extra, fragment in (
        (["--baseline", "efficientformerv2_s9"], "neither a member of space"),
        (["--baseline", searched], "same network as the searched network"),
        (["--random", "0"], "0 only with --baseline"),
        (["--baseline", "efficientformerv2_tiny_min", "--reuse-trainings", str(tmp_path)], "no plan.json"),
    ):
        out = tmp_path / "cmp"
        assert main(compare_argv(tiny_search, out, *extra)) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0], (extra, err)
        assert not out.exists()


def test_baseline_names_are_file_safe_and_never_a_random_networks():
    assert baseline_name("efficientformerv2_s1") == "efficientformerv2_s1"
    assert baseline_name("runs/search-s1/arch.yaml") == "search-s1"
    assert baseline_name("my net.yaml") == "my-net"
    assert baseline_name("random-3.yaml") == "baseline-random-3" and baseline_name("searched") == "baseline-searched"
    assert [network_kind(n) for n in ("searched", "random-0", "s1")] == ["searched", "random", "baseline"]


def test_searched_vs_baselines_keeps_each_test_unadjusted():
    searched = {"top1_seeds": [0.62, 0.63, 0.64]}
    rows = [
        {"network": "s1", "top1_seeds": [0.58, 0.59, 0.60], "in_band": True},
        {"network": "s2", "top1_seeds": [0.66, 0.67, 0.65], "in_band": False},
    ]
    tests = searched_vs_baselines(searched, rows)
    assert [t["network"] for t in tests] == ["s1", "s2"] and [t["in_band"] for t in tests] == [True, False]
    assert tests[0]["ci"][0] > 0 and tests[1]["ci"][1] < 0
    assert tests[0]["p"] == welch(searched["top1_seeds"], rows[0]["top1_seeds"])["p"]


def test_a_comparison_says_how_many_seeds_its_margin_needs():
    from scipy import stats

    from nas.studies.stats import seeds_to_resolve

    n = seeds_to_resolve(0.01, 0.01)
    half = lambda k: stats.t.ppf(0.975, 2 * k - 2) * 0.01 * (2 / k) ** 0.5  # noqa: E731
    assert half(n) < 0.01 <= half(n - 1)
    assert seeds_to_resolve(-0.01, 0.01) == n  # either sign
    assert seeds_to_resolve(0.0, 0.01) is None and seeds_to_resolve(0.01, 0.0) is None
    assert seeds_to_resolve(0.0001, 0.05) is None  # beyond 100 seeds
    tests = searched_vs_baselines(
        {"top1_seeds": [0.62, 0.63, 0.64]}, [{"network": "s1", "top1_seeds": [0.61, 0.62, 0.63]}]
    )
    assert tests[0]["seeds_needed"] == seeds_to_resolve(0.01, 0.01)
