"""``nas train`` (fixed architectures from scratch), ``nas compare`` and ``nas demo``."""

import csv
import json
import random
from pathlib import Path

import pytest
import torch
from helpers import argv, compare_argv, copy_run

from nas import ArchConfig, load_space
from nas.cli import main
from nas.latency import LatencyTable
from nas.search.objective import cost_function

QUICK = ["--epochs", "1", "--batch-size", "32", "--eval-batch-size", "128", "--log-every", "2"]


def _searched_like_arch(tmp_path) -> Path:
    """An arch YAML of the tiny space that is no timm model (as nas search writes them)."""
    space = load_space("efficientformerv2-tiny")
    arch = space.sample(random.Random(3))
    assert arch not in (space.largest(), space.smallest())
    return arch.save(tmp_path / "arch.yaml")


def test_train_named_member_loads_into_timm_and_exports(tmp_path, capsys):
    import timm

    run = tmp_path / "run"
    assert (
        main(["train", "swiftformer_xs", "--run", str(run), "--img-size", "32", "--max-steps", "3", "--json", *QUICK])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["step"] == 3 and result["arch"] == "swiftformer_xs" and result["num_classes"] == 10
    assert result["val"].startswith("20% of scikit-learn digits") and 0 <= result["top1"] <= 1
    assert result["train_images"] == 1438  # a fixed network trains on every training image
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    reference = timm.create_model("swiftformer_xs", num_classes=10)
    reference.load_state_dict(state["model"], strict=True)  # timm's own class, timm's names
    assert state["step"] == 3 and state["config"]["command"] == "train"
    onnx_path = tmp_path / "xs.onnx"
    assert (
        main(
            argv(
                "export swiftformer_xs --checkpoint {} --format onnx --out {} --img-size 32 --num-classes 10 --json",
                run / "checkpoint.pt",
                onnx_path,
            )
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["max_abs_diff"] <= 1e-4


def test_train_searched_arch_on_real_images_with_ema_and_teacher(real_images, tmp_path, capsys):
    arch_path = _searched_like_arch(tmp_path)
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                str(arch_path),
                "--data",
                str(real_images),
                "--run",
                str(run),
                "--img-size",
                "32",
                "--model-ema",
                "true",
                "--teacher",
                "resnet18",
                "--max-steps",
                "2",
                *QUICK,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "space efficientformerv2-tiny" in out and "on test/ folder (30 images" in out and "top-1 (EMA)" in out
    result = json.loads((run / "result.json").read_text())
    assert result["train_images"] == 120 and result["digest"] == ArchConfig.load(arch_path).digest
    assert {"top1", "top1_ema"} <= set(result)
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    assert "model_ema" in state and state["arch"] == ArchConfig.load(arch_path).to_dict()


def test_train_images_trains_on_a_fixed_class_balanced_subset(real_images, tmp_path, capsys):
    import collections

    from nas.config.recipe import Recipe
    from nas.data import load_splits

    def splits(n: int, seed: int = 0, hold_out_search: bool = False):
        return load_splits(str(real_images), Recipe(img_size=32, train_images=n), seed, hold_out_search)

    whole, subset = splits(0), splits(30)
    assert len(whole.train) == 120 and len(subset.train) == 30
    assert collections.Counter(subset.train.labels) == {0: 10, 1: 10, 2: 10}
    assert subset.train.pixels is not None  # the subset is decoded up front (a corrupt file fails early)
    assert set(subset.train.paths) < set(whole.train.paths)
    assert subset.train.paths == splits(30).train.paths != splits(30, seed=1).train.paths
    held_out = splits(30, hold_out_search=True)  # the search split is drawn before the subset: unchanged
    assert held_out.search.paths == splits(0, hold_out_search=True).search.paths
    assert not set(held_out.train.paths) & set(held_out.search.paths)
    assert len(splits(10**6).train) == 120  # more than there are: all of them

    run = tmp_path / "run"
    argv = ["train", "efficientformerv2_s0", "--data", str(real_images), "--run", str(run), "--img-size", "32"]
    assert main([*argv, *QUICK, "--train-images", "30", "--max-steps", "1", "--batch-size", "8"]) == 0
    assert "(1 epochs planned, 30 training images)" in capsys.readouterr().out
    assert json.loads((run / "result.json").read_text())["train_images"] == 30


def test_resume_matches_an_uninterrupted_run(tmp_path):
    arch_path = _searched_like_arch(tmp_path)
    common = ["train", str(arch_path), "--img-size", "32", "--model-ema", "true", "--checkpoint-every", "2", *QUICK]
    assert main([*common, "--run", str(tmp_path / "a"), "--max-steps", "6"]) == 0
    assert main([*common, "--run", str(tmp_path / "b"), "--max-steps", "3"]) == 0
    assert main([*common, "--run", str(tmp_path / "b"), "--max-steps", "6", "--resume"]) == 0
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    assert a["step"] == b["step"] == 6
    for key in ("model", "model_ema"):
        assert all(torch.equal(a[key][k], b[key][k]) for k in a[key])
    records = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert sum(bool(r.get("final")) for r in records) == 1  # the early stop's final line was dropped
    assert (
        json.loads((tmp_path / "a" / "result.json").read_text())["top1"]
        == json.loads((tmp_path / "b" / "result.json").read_text())["top1"]
    )


def test_resume_of_a_run_stopped_before_its_first_save_starts_it_again(tmp_path, capsys, caplog):
    arch_path = _searched_like_arch(tmp_path)
    common = ["train", str(arch_path), "--img-size", "32", "--max-steps", "3", *QUICK]
    assert main([*common, "--run", str(tmp_path / "a")]) == 0
    assert main([*common, "--run", str(tmp_path / "b")]) == 0
    # What a kill before the first checkpoint leaves: the recorded settings and a metrics line, no save.
    (tmp_path / "b" / "checkpoint.pt").unlink()
    (tmp_path / "b" / "result.json").unlink()
    assert main([*common, "--run", str(tmp_path / "b"), "--seed", "1", "--resume"]) == 2  # other settings
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed" in err[0]
    assert main([*common, "--run", str(tmp_path / "b"), "--resume"]) == 0
    assert "stopped before its first save" in caplog.text
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    assert a["step"] == b["step"] == 3
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    records = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert sum(bool(r.get("final")) for r in records) == 1  # the first start's lines were dropped


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["efficientformerv9_s0"], "is not a named member of any space"),
        (["efficientformerv2_s0", "--space", "swiftformer"], "is neither a member of space 'swiftformer'"),
        (["efficientformerv2_s0", "--data", "/no/such/folder"], "data folder not found"),
        (["efficientformerv2_s0", "--resume"], "nothing to resume"),
    ],
)
def test_train_bad_input(tmp_path, capsys, argv, fragment):
    run = tmp_path / "run"
    assert main(["train", *argv, "--run", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]
    assert not run.exists() or not any(run.iterdir())


def test_train_arch_outside_its_space(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "family: efficientformerv2\ndepths: [2, 2, 3, 1]\nwidths: [24, 32, 48, 47]\n"
        "attention: [0, 0, 0, 0]\nhidden_widths: [[96, 96], [128, 128], [144, 96, 192], [192]]\n"
    )
    assert main(["train", str(bad), "--run", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.yaml" in err[0] and "width" in err[0]


def test_compare_on_a_tiny_slice(tiny_search, tiny_comparison, tmp_path, capsys):
    arch_path = tiny_search / "arch.yaml"
    out = copy_run(tiny_comparison, tmp_path / "cmp")  # continued below
    argv = compare_argv(tiny_search, out, "--json")
    result = json.loads((out / "result.json").read_text())
    rows = result["rows"]
    assert [r["network"] for r in rows] == ["searched", "random-0", "random-1"]
    assert len({r["digest"] for r in rows}) == 3
    # The random networks meet the searched network's MES within 5% (on the side that meets it) ...
    space = load_space("efficientformerv2-tiny")
    cost = cost_function(LatencyTable.load("iphone12", space, 32), 32, 10)  # where the supernet trained
    target = cost(ArchConfig.load(arch_path)).mes
    assert result["objective"] == {"name": "mes", "target": pytest.approx(target)}
    for row in rows[1:]:
        assert target <= row["mes"] <= 1.05 * target
        assert row["mes"] == pytest.approx(cost(ArchConfig.from_dict(row["arch"])).mes)
    # ... and each was trained from scratch in its own run.
    for row in rows:
        run_result = json.loads((out / "runs" / row["network"] / "result.json").read_text())
        assert run_result["step"] == 2 and run_result["top1"] == row["top1"]
    table = (out / "compare.md").read_text()
    assert "| **searched** |" in table and "predicted on iphone12" in table and "from scratch" in table
    with (out / "compare.csv").open() as handle:
        assert [r["network"] for r in csv.DictReader(handle)] == ["searched", "random-0", "random-1"]
    assert (out / "compare.png").stat().st_size > 0
    # Again: refused without --resume; with it, nothing is retrained and the table is the same.
    assert main(argv) == 2
    assert "pass --resume" in capsys.readouterr().err
    stamp = (out / "runs" / "random-1" / "checkpoint.pt").stat().st_mtime_ns
    assert main([*argv, "--resume"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == rows
    assert (out / "runs" / "random-1" / "checkpoint.pt").stat().st_mtime_ns == stamp


@pytest.mark.xdist_group("ray")  # one local Ray cluster at a time under pytest -n
@pytest.mark.slow
def test_compare_on_ray_workers_trains_the_same_networks(tmp_path, capsys):
    arch_path = _searched_like_arch(tmp_path)
    common = [
        "compare",
        "--searched",
        str(arch_path),
        "--random",
        "1",
        "--objective",
        "params",
        "--img-size",
        "32",
        "--max-steps",
        "1",
        "--json",
        *QUICK,
    ]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main([*common, "--out", str(tmp_path / "ray"), "--workers", "2"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert [r["digest"] for r in remote["rows"]] == [r["digest"] for r in local["rows"]]
    assert remote["sources"]["latency"] == "no latency table (no --device)"
    for row in remote["rows"]:
        assert json.loads((tmp_path / "ray" / "runs" / row["network"] / "result.json").read_text())["step"] == 1


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--objective", "speed"], "unknown objective 'speed'"),
        (["--tolerance", "2"], "argument --tolerance: expected a number between 0 and 1"),
        (["--objective", "mes"], "objective mes needs --device"),
        (["--device", "iphone99"], "unknown device"),
        (["--device", "iphone12", "--tolerance", "1e-9"], "widen --tolerance"),
        (["--objective", "params", "--resume"], "nothing to resume"),
        (["--objective", "params", "--supernet", "/no/such/run"], "not a trained supernet run"),
    ],
)
def test_compare_bad_input(tmp_path, capsys, extra, fragment):
    arch_path = _searched_like_arch(tmp_path)
    out = tmp_path / "cmp"
    try:
        code = main(["compare", "--searched", str(arch_path), "--out", str(out), *extra])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()


@pytest.mark.slow
def test_demo_with_a_reduced_budget(tmp_path, capsys):
    run = tmp_path / "demo"
    assert main(argv("demo --run {} --supernet-epochs 1 --train-epochs 1 --random 2 --target-fraction 0.1", run)) == 0
    out = capsys.readouterr().out
    for fragment in (
        "[1/4] latency table",
        "[2/4] supernet",
        "[3/4] search",
        "[4/4] compare",
        "| **searched** |",
        "random-1",
        "where the numbers come from",
        "predicted on iphone12",
        "trained from scratch",
        "supernet top-1 (%)",
        "Kendall's tau, supernet vs from-scratch ranking",
    ):
        assert fragment in out, fragment
    result = json.loads((run / "demo.json").read_text())
    assert result["search"]["mes"] >= result["target_mes"]
    searched = ArchConfig.load(run / "search" / "arch.yaml")
    rows = result["comparison"]["rows"]
    assert rows[0]["digest"] == searched.digest
    # The comparison scores the supernet at the search's fidelity, so its cached score is the search's
    # own; ``accuracy`` is the finalists' (more images, more draws) and may differ from it.
    assert rows[0]["supernet_top1"] == pytest.approx(result["search"]["search_accuracy"])
    assert f"supernet top-1 {100 * result['search']['search_accuracy']:.1f}% on the search split" in out
    page = (run / "report.html").read_text()  # the demo ends with its report: every stage on one page
    assert all(f"Stage: {stage}" in page for stage in ("supernet", "search", "compare")) and "<img" in page
    # A second run finds every stage done and prints the same table.
    assert main(argv("demo --run {} --supernet-epochs 1 --train-epochs 1 --random 2 --target-fraction 0.1", run)) == 0
    assert "| **searched** |" in capsys.readouterr().out


def test_demo_rejects_a_bad_target_before_training(tmp_path, capsys):
    run = tmp_path / "demo"
    assert main(["demo", "--run", str(run), "--target-fraction", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--target-fraction must be in (0, 1]" in err[0]
    assert not run.exists()
