"""Issue 59, part 2: ``nas search --target T1 T2 ...`` returns a family, one network per target from one run with
one evaluation cache; greedy walks one path; a member is named RUN@TARGET by ``nas train`` and ``nas compare``."""

import json

import pytest
from helpers import search_argv

from nas.cli import main
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.search.evolution import EvolutionOptions
from nas.search.family import band_options, member_arch_path, ordered_targets


def _family_argv(supernet, run, *extra):
    argv = search_argv(supernet, run, "--json", *extra)
    i = argv.index("--target")
    return argv[: i + 1] + ["420", "520", "470"] + argv[i + 2 :]


@pytest.mark.slow  # three greedy searches besides the family's: 23 s
def test_a_greedy_family_is_one_path_and_costs_its_hardest_search(tiny_supernet, tiny_search, tmp_path, capsys):
    run = tmp_path / "family"
    assert main(_family_argv(tiny_supernet, run)) == 0
    family = json.loads(capsys.readouterr().out)
    assert family["targets"] == [420.0, 470.0, 520.0]  # MES: the easiest first
    members = family["members"]
    assert [m["target"] for m in members] == [420.0, 470.0, 520.0]
    for m in members:
        assert m["mes"] >= m["target"]
        assert ArchConfig.load(run / "targets" / f"{m['target']:g}" / "arch.yaml").digest == m["digest"]
    # One path: each target's steps begin with the previous target's steps.
    steps = [json.loads((run / "targets" / t / "state.json").read_text())["steps"] for t in ("420", "470", "520")]
    for shorter, longer in zip(steps, steps[1:]):
        assert [s["digest"] for s in longer[: len(shorter)]] == [s["digest"] for s in shorter]
    # The first target's search is the single search to it (same supernet, seed and options): the same path.
    single = json.loads((tiny_search / "state.json").read_text())["steps"]
    assert [s["digest"] for s in steps[0]] == [s["digest"] for s in single]
    # The family scored every sub-network once: at most the single search to its hardest target.
    hardest = tmp_path / "hardest"
    argv = search_argv(tiny_supernet, hardest, "--json")
    argv[argv.index("--target") + 1] = "520"
    assert main(argv) == 0
    single_hardest = json.loads(capsys.readouterr().out)
    named = family["named_evaluations"]  # the space's named members the search had not scored, to mark them
    assert family["evaluations"] - named <= single_hardest["evaluations"]
    assert sum(m["new_evaluations"] for m in members) == family["evaluations"] - named
    assert (run / "family.png").stat().st_size > 0 and "| 520 |" in (run / "family.md").read_text()
    assert {n["name"] for n in family["named"]} == {"efficientformerv2_tiny_max", "efficientformerv2_tiny_min"}
    # Resumed when finished: the same family, nothing scored again.
    assert main([*_family_argv(tiny_supernet, run), "--resume"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [m["digest"] for m in again["members"]] == [m["digest"] for m in members]
    assert again["evaluations"] == family["evaluations"] and again["members"] == members
    # The report shows the family's picture and every target's search.
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert page.count("Target ") >= 3 and "data:image/png" in page
    capsys.readouterr()
    # A member by target, for nas train and nas compare.
    assert member_arch_path(f"{run}@470") == str(run / "targets" / "470" / "arch.yaml")
    assert member_arch_path(f"{run}@470.0") == str(run / "targets" / "470" / "arch.yaml")
    with pytest.raises(NasError, match="no finished member at 500"):
        member_arch_path(f"{run}@500")
    assert member_arch_path("efficientformerv2_s1") == "efficientformerv2_s1"
    train = tmp_path / "train"
    quick = ["--max-steps", "1", "--epochs", "1", "--batch-size", "16", "--eval-batch-size", "128"]
    assert main(["train", f"{run}@470", "--run", str(train), "--img-size", "32", *quick]) == 0
    out = capsys.readouterr().out
    assert members[1]["digest"] in out


def test_an_evolution_family_splits_its_budget_and_starts_bands_from_what_is_known(tiny_supernet, tmp_path, capsys):
    run = tmp_path / "family"
    options = ["--set", "evaluations=8", "--set", "population=4", "--set", "parents=2"]
    argv = _family_argv(tiny_supernet, run, *options, "--finalists", "2", "--noise-networks", "0")
    argv[argv.index("greedy")] = "evolution"
    assert main(argv) == 0
    family = json.loads(capsys.readouterr().out)
    for m in family["members"]:
        config = (run / "targets" / f"{m['target']:g}" / "config.yaml").read_text()
        assert "evaluations: 4" in config  # 1.5 x 8 over 3 bands
        population = json.loads((run / "targets" / f"{m['target']:g}" / "population.json").read_text())
        assert len(population["members"]) == 4
    assert family["evaluations"] - family["named_evaluations"] <= 12  # 1.5 x a single search's 8
    assert "1.5x in all" in family["budget_note"]


def test_targets_are_ordered_from_the_easiest_and_budgets_split():
    assert ordered_targets("latency", [1.08, 1.59, 1.2]) == [1.59, 1.2, 1.08]
    assert ordered_targets("mes", [300, 100, 200, 100]) == [100, 200, 300]
    assert band_options(EvolutionOptions(evaluations=100), 3).evaluations == 50
    assert band_options(EvolutionOptions(evaluations=100), 1).evaluations == 100


def test_an_unreachable_family_member_is_one_line_and_nothing_written(tiny_supernet, tmp_path, capsys):
    run = tmp_path / "family"
    argv = _family_argv(tiny_supernet, run)
    argv[argv.index("520")] = "100000"
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "100000" in err[0], err
    assert not run.exists()
