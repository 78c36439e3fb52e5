"""Issue 36, parts 2 and 3: every comparison draws its own random networks (or reuses another's, said so),
fits the random frontier (top-1 against ln MACs and predicted latency) and works at equal predicted latency."""

import json
import math
import random

import numpy as np
import pytest
from helpers import compare_argv, copy_run

from nas.cli import main
from nas.config.recipe import Recipe
from nas.config.spaces import load_space
from nas.core.arch import ArchConfig
from nas.latency import LatencyTable
from nas.search.objective import cost_function
from nas.search.sample import sample_within_budget
from nas.studies.compare import CompareRequest, planned_networks, prepare
from nas.studies.compare_plan import draw_seed
from nas.studies.stats import random_frontier

SPACE = "efficientformerv2-tiny"


def _twins() -> tuple[ArchConfig, ArchConfig]:
    """Two sub-networks of the same params, MACs and latency (their first stage's two hidden widths swapped):
    the same budget, so drawing from --seed alone gave both the same random networks."""
    # Mid-sized (like a searched network), where the MES band holds many sub-networks to draw.
    hidden = [[48, 96], [128, 128], [128, 128, 128], [256, 256]]
    data = {"family": "efficientformerv2", "depths": [2, 2, 3, 2], "widths": [24, 32, 32, 64], "attention": [0] * 4}
    a = ArchConfig.from_dict({**data, "hidden_widths": hidden})
    b = ArchConfig.from_dict({**data, "hidden_widths": [hidden[0][::-1], *hidden[1:]]})
    return a, b


def _planned(searched: ArchConfig, seed: int, tmp_path) -> tuple[float, list[str], int]:
    request = CompareRequest(
        searched=searched,
        space=load_space(SPACE),
        recipe=Recipe(img_size=32),
        out=tmp_path / "unused",
        n_random=3,
        seed=seed,
        objective="mes",
        device="iphone12",
    )
    objective, networks, draws = planned_networks(request, prepare(request))
    assert [n for n, _ in networks] == ["searched", "random-0", "random-1", "random-2"]
    return objective.target, [a.digest for _, a in networks[1:]], draws["draw_seed"]


def test_draw_seed_is_stable_and_depends_on_the_searched_arch_and_the_seed(tmp_path):
    # SHA-256, not Python's salted hash(): the same number in every process and on every machine.
    assert draw_seed("f38dbe8e352c", 0) == 3511556234
    assert draw_seed("f38dbe8e352c", 1) == 2823445649
    assert draw_seed("ab642f33ceb7", 0) == 3469743903
    a, b = _twins()
    target_a, drawn_a, seed_a = _planned(a, 0, tmp_path)
    target_b, drawn_b, seed_b = _planned(b, 0, tmp_path)
    _, drawn_a1, seed_a1 = _planned(a, 1, tmp_path)
    assert target_a == pytest.approx(target_b)  # one budget ...
    assert seed_a == draw_seed(a.digest, 0) and seed_b == draw_seed(b.digest, 0) and seed_a1 == draw_seed(a.digest, 1)
    assert len({seed_a, seed_b, seed_a1}) == 3
    assert not set(drawn_a) & set(drawn_b)  # ... but independent draws for the two searched networks
    assert not set(drawn_a) & set(drawn_a1)  # and for two seeds
    assert _planned(a, 0, tmp_path)[1] == drawn_a  # the same comparison draws the same networks again
    # Drawing from --seed alone (before issue 36) gave the twins one set of random networks.
    space = load_space(SPACE)
    cost = cost_function(LatencyTable.load("iphone12", space), 224, 10)
    from nas.search.objective import Objective

    old = [
        [x.digest for x in sample_within_budget(space, 3, Objective("mes", target_a), cost, random.Random(0))]
        for _ in (a, b)
    ]
    assert old[0] == old[1] and old[0] != drawn_a


def test_random_from_reuses_the_networks_and_is_recorded(tiny_search, tiny_comparison, tmp_path, capsys):
    out = tmp_path / "again"
    assert main(compare_argv(tiny_search, out, "--random-from", str(tiny_comparison), "--json")) == 0
    result = json.loads(capsys.readouterr().out)
    first = json.loads((tiny_comparison / "result.json").read_text())
    assert [r["digest"] for r in result["rows"]] == [r["digest"] for r in first["rows"]]
    plan = json.loads((out / "plan.json").read_text())
    from nas.runs.checkpoint import file_digest

    digest = file_digest(tiny_comparison / "plan.json")
    assert plan["random_from"] == {"path": str(tiny_comparison), "plan_digest": digest} and "draw_seed" not in plan
    assert plan["config"]["random_from"] == str(tiny_comparison) and plan["config"]["random_from_digest"] == digest
    # same recipe, data and seed: every training (the searched network's too: the same one) is copied
    assert result["draws"] == {"random_from": {**plan["random_from"], "trainings_reused": 3}}
    assert [r["top1_seeds"] for r in result["rows"][1:]] == [r["top1_seeds"] for r in first["rows"][1:]]
    assert "not an independent draw" in result["sources"]["sampling"]
    # The first comparison drew its own (recorded), as does one of another seed.
    first_plan = json.loads((tiny_comparison / "plan.json").read_text())
    assert first_plan["draw_seed"] == draw_seed(first["rows"][0]["digest"], 0) == first["draws"]["draw_seed"]
    # Resuming needs the same source; --random 1 takes the first of them.
    assert main([*compare_argv(tiny_search, out, "--random-from", str(tiny_comparison)), "--resume"]) == 0
    capsys.readouterr()
    fewer = tmp_path / "fewer"
    assert main(compare_argv(tiny_search, fewer, "--random-from", str(tiny_comparison), "--random", "1", "--json")) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["digest"] for r in rows] == [r["digest"] for r in first["rows"][:2]]


@pytest.mark.parametrize(
    "searched, extra, fragment",
    [
        ("largest", [], "outside this comparison's band"),  # far more MACs: a much lower MES
        ("search", ["--random", "3"], "holds 2 random networks"),
        ("search", ["--objective", "params", "--tolerance", "0.001"], "outside this comparison's band"),
        ("nowhere", [], "not a comparison folder"),
    ],
)
def test_random_from_refuses_networks_outside_the_band(
    tiny_search, tiny_comparison, tmp_path, capsys, searched, extra, fragment
):
    arch = tiny_search / "arch.yaml"
    if searched == "largest":
        arch = tmp_path / "largest.yaml"
        load_space(SPACE).largest().save(arch)
    source = tmp_path / "nowhere" if searched == "nowhere" else tiny_comparison
    out = tmp_path / "cmp"
    argv = compare_argv(tiny_search, out, "--random-from", str(source), *extra)
    argv[argv.index("--searched") + 1] = str(arch)
    if searched == "largest":
        argv += ["--space", SPACE, "--device", "iphone12"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()


def test_a_comparison_from_before_draw_seeds_resumes_with_its_plan(tiny_search, tiny_comparison, tmp_path, capsys):
    out = copy_run(tiny_comparison, tmp_path / "old")
    plan = json.loads((out / "plan.json").read_text())
    del plan["draw_seed"]
    for key in ("random_from", "random_from_digest"):  # configs written before these settings
        del plan["config"][key]
    (out / "plan.json").write_text(json.dumps(plan))
    assert main([*compare_argv(tiny_search, out, "--json"), "--resume"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["digest"] for r in result["rows"]] == [n["digest"] for n in plan["networks"]]
    assert result["draws"] == {"draw_seed": 0, "seed_only": True}
    assert "--seed 0 alone" in result["sources"]["sampling"]


def _rows(macs, top1, latency=None, seeds=None):
    seeds = seeds or [[t] for t in top1]
    return [
        {
            "network": "searched" if i == 0 else f"random-{i - 1}",
            "kind": "searched" if i == 0 else "random",
            "top1": t,
            "top1_seeds": s,
            "macs": m,
            "latency_ms": None if latency is None else latency[i],
        }
        for i, (m, t, s) in enumerate(zip(macs, top1, seeds))
    ]


def test_frontier_recovers_a_known_line():
    # Random networks on top-1 = 0.1 + 0.04 ln(MACs) + small noise; the searched one 0.03 above it.
    macs = [60e6, 30e6, 40e6, 50e6, 70e6, 90e6]
    noise = [0, 0.002, -0.001, -0.002, 0.0015, -0.0005]
    line = [0.1 + 0.04 * math.log(m) for m in macs]
    top1 = [line[0] + 0.03] + [y + e for y, e in zip(line[1:], noise[1:])]
    latency = [1.0 + m / 1e8 for m in macs]
    seeds = [[top1[0] - 0.004, top1[0], top1[0] + 0.004]] + [[t] * 3 for t in top1[1:]]
    fit = random_frontier(_rows(macs, top1, latency, seeds))
    mac_fit = fit["log_macs"]
    assert mac_fit["estimable"] and mac_fit["randoms"] == 5 and mac_fit["dof"] == 3
    assert mac_fit["slope"] == pytest.approx(0.04, abs=0.005)
    assert mac_fit["residual"] == pytest.approx(0.03, abs=0.002)
    lo, hi = mac_fit["residual_ci"]
    assert 0 < lo < 0.03 < hi and mac_fit["p_above"] < 0.05 and mac_fit["seed_noise_included"]
    # Against the line fitted exactly (numpy), and its interval from the formula by hand.
    slope, intercept = np.polyfit(np.log(macs[1:]), top1[1:], 1)
    assert mac_fit["slope"] == pytest.approx(slope) and mac_fit["intercept"] == pytest.approx(intercept)
    x, xs = np.log(macs[1:]), math.log(macs[0])
    s2 = float(np.sum((np.asarray(top1[1:]) - intercept - slope * x) ** 2)) / 3
    se = math.sqrt(s2 * (1 / 5 + (xs - x.mean()) ** 2 / np.sum((x - x.mean()) ** 2)) + 0.004**2 / 3)
    assert mac_fit["residual_se"] == pytest.approx(se)
    assert hi - lo == pytest.approx(2 * 3.182446305 * se)  # t(0.975, 3 dof)
    assert mac_fit["searched_rank_by_cost"] == 3  # 90M and 70M above its 60M
    # Latency is linear in MACs here, so its fit is as good.
    assert fit["latency_ms"]["estimable"] and fit["latency_ms"]["residual"] > 0.02
    # Not estimable: two random networks, no spread in cost, no latency.
    assert random_frontier(_rows(macs[:3], top1[:3]))["log_macs"] == {
        "x": "ln(MACs)",
        "networks": 3,
        "searched_rank_by_cost": 1,
        "searched_cost_over_random_mean": pytest.approx(60 / 35),
        "estimable": False,
        "reason": "fewer than 3 random networks (2)",
    }
    flat = random_frontier(_rows([50e6] * 5, top1[:5]))
    assert not flat["log_macs"]["estimable"] and "do not vary" in flat["log_macs"]["reason"]
    assert not flat["latency_ms"]["estimable"] and "no predicted latency" in flat["latency_ms"]["reason"]


def test_frontier_interval_keeps_its_coverage_at_the_sizes_users_run():
    """5 random networks, 3 seeds, band spread 1.2 points and seed sd 0.5 (issue 36): the residual's 95%
    interval covers the true one within 3 points, and a searched network on the line is called above it at
    most 5% of the time."""
    rng = np.random.default_rng(36)
    covered = above = 0
    trials = 1500
    for _ in range(trials):
        macs = np.exp(rng.uniform(math.log(40e6), math.log(80e6), 6))
        rows = []
        for i, m in enumerate(macs):
            mean = 0.2 + 0.03 * math.log(m) + (0.0 if i == 0 else rng.normal(0, 0.012))
            seeds = mean + rng.normal(0, 0.005, 3)
            rows.append({"top1": float(seeds.mean()), "top1_seeds": list(seeds), "macs": float(m)})
        fit = random_frontier(rows)["log_macs"]
        covered += fit["residual_ci"][0] <= 0 <= fit["residual_ci"][1]
        above += fit["p_above"] < 0.05
    assert abs(covered / trials - 0.95) <= 0.03
    assert above / trials <= 0.05


def test_two_networks_searched_to_one_target_share_its_band(tiny_search, tmp_path, capsys):
    """--target: the budget is the search's target, not the searched network's own cost, so a second
    network searched to the same target (greedy's beside evolution's) is compared with the first one's
    random networks, and their trainings are reused."""
    space, cost = load_space(SPACE), cost_function(None, 32, 10)
    first_arch = ArchConfig.load(tiny_search / "arch.yaml")
    target = round(cost(first_arch).params * 1.02)  # the first network meets it, 2% under
    second_arch = next(
        a
        for a in (space.sample(random.Random(i)) for i in range(5000))
        if 0.85 * target <= cost(a).params <= 0.9 * target  # under the band: cheaper than any random network
    )
    budget = ["--objective", "params", "--target", str(target), "--tolerance", "0.1"]
    first = tmp_path / "first"
    assert main(compare_argv(tiny_search, first, *budget, "--json")) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["objective"] == {"name": "params", "target": target} and result["target_given"]
    assert all(0.9 * target <= r["params"] <= target for r in result["rows"][1:])
    assert f"Budget: params {target:.4g} (--target; the searched network" in (first / "compare.md").read_text()
    assert f"within 10% of --target's params {target:.4g}" in result["sources"]["sampling"]

    second_arch.save(tmp_path / "second.yaml")
    second = tmp_path / "second"
    argv = compare_argv(tiny_search, second, *budget, "--random-from", str(first), "--json")
    argv[argv.index("--searched") + 1] = str(tmp_path / "second.yaml")
    assert main([*argv, "--space", SPACE]) == 0
    shared = json.loads(capsys.readouterr().out)
    assert [r["digest"] for r in shared["rows"][1:]] == [r["digest"] for r in result["rows"][1:]]
    assert shared["draws"]["random_from"]["trainings_reused"] == 2  # the random networks' trainings, copied
    assert shared["rows"][0]["digest"] == second_arch.digest

    over = tmp_path / "over"
    argv = compare_argv(tiny_search, over, "--objective", "params", "--target", str(target // 2))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not meet it" in err[0] and not over.exists()


def test_a_comparison_at_equal_predicted_latency(tiny_search, tmp_path, capsys):
    out = tmp_path / "latency"
    assert main(compare_argv(tiny_search, out, "--objective", "latency", "--random", "3", "--json")) == 0
    result = json.loads(capsys.readouterr().out)
    rows = result["rows"]
    space = load_space(SPACE)
    priced_at = json.loads((out / "plan.json").read_text())["config"]["img_size"]
    assert priced_at == 32  # the size the networks train at (one resolution)
    table = LatencyTable.load("iphone12", space, priced_at)
    target = table.latency(ArchConfig.load(tiny_search / "arch.yaml"))
    assert result["objective"] == {"name": "latency", "target": pytest.approx(target)}
    assert rows[0]["latency_ms"] == pytest.approx(target)
    for row in rows[1:]:  # the side that meets it: at most the searched network's latency, within 5%
        assert 0.95 * target <= row["latency_ms"] <= target
    frontier = result["summary"]["frontier"]
    assert frontier["latency_ms"]["searched_rank_by_cost"] == 1
    assert set(frontier) == {"log_macs", "latency_ms"}
    for fit in frontier.values():
        assert fit["randoms"] == 3 if fit["estimable"] else "reason" in fit
    assert frontier["log_macs"]["estimable"]
    md = (out / "compare.md").read_text()
    assert "Budget: latency" in md and "## Where each network sits on cost" in md
    assert "the highest predicted latency of the 4" in md
    assert "- against ln(MACs): the random networks' top-1 changes by" in md
    assert "- against predicted latency:" in md
    macs_rank = 1 + sum(r["macs"] > rows[0]["macs"] for r in rows[1:])
    assert frontier["log_macs"]["searched_rank_by_cost"] == macs_rank
    assert "within 5% of the searched network's latency" in result["sources"]["sampling"]
    assert (out / "compare.png").stat().st_size > 0


def test_committed_comparisons_that_share_draws_count_as_one():
    from pathlib import Path

    from nas.studies.compare_plan import draw_groups

    results = Path(__file__).parent.parent / "docs" / "results"
    randoms = {
        p.parent.name: [r["digest"] for r in json.loads(p.read_text())["rows"][1:]]
        for p in sorted(results.glob("compare-*/result.json"))
    }
    groups = draw_groups(randoms)
    assert sorted(n for g in groups for n in g) == sorted(randoms)
    # Issue 36: all three main-space MES 200 comparisons after the first, and four tiny MES 800 ones, drew
    # the same five random networks; more share some of them.
    same_main = {"compare-v2-main-1ep-plus1-mes200", "compare-v2-main-1ep-seed1-mes200"}
    same_tiny = {"compare-v2-tiny-mes800", "compare-v2-tiny-proj-mes800", "compare-v2-tiny-band800-seed1-mes800"}
    assert any(same_main <= set(g) for g in groups) and any(same_tiny <= set(g) for g in groups)
    mes = [n for n in randoms if "-mes" in n]
    assert len(mes) == 16 and len([g for g in groups if set(g) <= set(mes)]) == 6
    # The 64 px equal-latency study's two comparisons drew fresh networks: each is its own group. The study where
    # the pilot shows room compares evolution's and greedy's networks of one supernet with the same draw: one group.
    assert [g for g in groups if any("-lat" in n for n in g)] == [
        ["compare-v2-main-32px-seed0-lat224", "compare-v2-main-32px-seed0-lat224-greedy"],
        ["compare-v2-main-32px-seed1-lat224", "compare-v2-main-32px-seed1-lat224-greedy"],
        ["compare-v2-main-32px-seed2-lat224", "compare-v2-main-32px-seed2-lat224-greedy"],
        ["compare-v2-main-64px-seed0-lat"],
        ["compare-v2-main-64px-seed1-lat"],
    ]
    assert draw_groups({"a": ["x", "y"], "b": ["z"], "c": ["y", "w"], "d": ["w"]}) == [["a", "c", "d"], ["b"]]
