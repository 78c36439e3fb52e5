"""The tools users live in: TensorBoard event files, an optuna database, ``nas report`` in a real
headless browser, released weights (``--init``), one budget for an arch file, mixed precision."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nas import ArchConfig, LatencyTable, load_space
from nas.cli import main

QUICK = ["--epochs", "1", "--batch-size", "32", "--bn-calib-batches", "1", "--eval-batch-size", "128"]


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series TensorBoard would show for ``folder`` (purged steps hidden)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


# --- TensorBoard ------------------------------------------------------------------------------------


def test_training_writes_tensorboard_curves_and_a_resume_continues_them(tmp_path):
    run = tmp_path / "run"
    argv = [
        "train-supernet",
        "efficientformerv2",
        "--space",
        "efficientformerv2-tiny",
        "--run",
        str(run),
        *QUICK,
        "--log-every",
        "1",
        "--checkpoint-every",
        "3",
    ]
    assert main([*argv, "--max-steps", "3"]) == 0
    at_three = run / "step3.pt"
    shutil.copy(run / "checkpoint.pt", at_three)
    assert main([*argv, "--max-steps", "5", "--resume"]) == 0
    # Pretend the process died after step 5 with its last checkpoint at step 3: the resumed run
    # logs steps 4.. again, and TensorBoard shows each step once.
    shutil.copy(at_three, run / "checkpoint.pt")
    assert main([*argv, "--max-steps", "6", "--resume"]) == 0
    curves = _scalars(run)
    assert {"train/loss", "train/lr", "train/images_per_s", "eval/largest_top1", "eval/smallest_top1"} <= set(curves)
    steps = [s for s, _ in curves["train/loss"]]
    assert steps == [1, 2, 3, 4, 5, 6]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    losses = {m["step"]: m["loss"] for m in metrics if not m.get("final")}
    assert [round(v, 5) for _, v in curves["train/loss"]] == [round(losses[s], 5) for s in steps]


def test_search_writes_its_trajectory_to_tensorboard(tiny_search):
    result = json.loads((tiny_search / "result.json").read_text())
    curves = _scalars(tiny_search)
    assert [s for s, _ in curves["search/mes"]] == list(range(result["steps"] + 1))
    last = json.loads((tiny_search / "search.jsonl").read_text().splitlines()[-1])  # the path's end, not the finalist
    assert curves["search/mes"][-1][1] == pytest.approx(last["mes"], rel=1e-6)
    assert curves["search/accuracy"][-1][1] == pytest.approx(last["accuracy"], rel=1e-6)


# --- optuna database ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_share_one_sqlite_study_and_a_study_resumes(tiny_supernet, tmp_path):
    import optuna

    db = f"sqlite:///{tmp_path / 'shared.db'}"  # target 7e5 parameters: every tiny sub-network meets it
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def search(run: str, seed: int, trials: int, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nas",
                "search",
                "--supernet",
                str(tiny_supernet),
                "--strategy",
                "optuna",
                "--trials",
                str(trials),
                "--objective",
                "params",
                "--target",
                "7e5",
                "--bn-calib-batches",
                "1",
                "--storage",
                db,
                "--seed",
                str(seed),
                "--run",
                str(tmp_path / run),
                *extra,
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )

    procs = [search("a", 1, 8), search("b", 2, 8)]
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()[-2000:]
    study = optuna.load_study(study_name="nas-search", storage=db)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) >= 8
    assert {t.user_attrs["run"] for t in done} == {str(tmp_path / "a"), str(tmp_path / "b")}  # both added trials
    # Each run's trials.jsonl and front come from the whole study.
    assert len((tmp_path / "a" / "trials.jsonl").read_text().splitlines()) >= 8
    # Continue the study in the default database of a run: the finished trials stay, new ones are added.
    own = tmp_path / "own"
    assert (
        main(
            [
                "search",
                "--supernet",
                str(tiny_supernet),
                "--strategy",
                "optuna",
                "--trials",
                "3",
                "--objective",
                "params",
                "--target",
                "7e5",
                "--bn-calib-batches",
                "1",
                "--run",
                str(own),
            ]
        )
        == 0
    )
    first = optuna.load_study(study_name="nas-search", storage=f"sqlite:///{own / 'optuna.db'}")
    kept = [(t.number, t.values) for t in first.trials]
    assert (
        main(
            [
                "search",
                "--supernet",
                str(tiny_supernet),
                "--strategy",
                "optuna",
                "--trials",
                "5",
                "--objective",
                "params",
                "--target",
                "7e5",
                "--bn-calib-batches",
                "1",
                "--run",
                str(own),
                "--resume",
            ]
        )
        == 2
    )  # --trials changes the result: refused
    assert (
        main(
            [
                "search",
                "--supernet",
                str(tiny_supernet),
                "--strategy",
                "optuna",
                "--trials",
                "3",
                "--objective",
                "params",
                "--target",
                "7e5",
                "--bn-calib-batches",
                "1",
                "--run",
                str(own),
                "--resume",
            ]
        )
        == 0
    )
    again = optuna.load_study(study_name="nas-search", storage=f"sqlite:///{own / 'optuna.db'}")
    assert [(t.number, t.values) for t in again.trials] == kept  # nothing re-run


# --- nas report in a real browser -----------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def pipeline(tiny_supernet, tiny_search, tiny_comparison):
    """A search of the tiny supernet and a comparison of its result, as users run them."""
    return {"supernet": tiny_supernet, "search": tiny_search, "compare": tiny_comparison}


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (CI installs it)")
def test_report_pages_load_in_a_headless_browser_with_the_runs_numbers(pipeline, tmp_path):
    from playwright.sync_api import sync_playwright

    pages = {}
    for kind, run in pipeline.items():
        out = tmp_path / f"{kind}.html"
        assert main(["report", str(run), "--out", str(out)]) == 0
        pages[kind] = out
    args = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            for kind, path in pages.items():
                page = browser.new_page()
                errors, requests = [], []
                page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.on("request", lambda r, requests=requests: requests.append(r.url))
                page.goto(path.as_uri())
                page.wait_for_load_state("load")
                assert errors == [], (kind, errors)
                assert all(url.startswith(("file:", "data:")) for url in requests), requests  # no network
                images = page.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth])")
                assert images and all(done and width > 0 for done, width in images), (kind, images)
                cells = page.evaluate(
                    "Array.from(document.querySelectorAll('[data-value]'))"
                    ".map(e => [e.dataset.key, JSON.parse(e.dataset.value), e.textContent])"
                )
                _check_numbers(kind, pipeline[kind], cells)
                page.close()
        finally:
            browser.close()


def _check_numbers(kind: str, run: Path, cells: list) -> None:
    shown = {}
    for key, value, text in cells:
        shown.setdefault(key, []).append((value, text))
    if kind == "compare":
        result = json.loads((run / "result.json").read_text())
        assert [v for v, _ in shown["top1"]] == [r["top1"] for r in result["rows"]]
        assert [t for _, t in shown["top1"]] == [f"{100 * r['top1']:.2f}" for r in result["rows"]]
        assert [t for _, t in shown["latency_ms"]] == [f"{r['latency_ms']:.3f}" for r in result["rows"]]
        assert shown["summary.random_top1_mean"][0][0] == result["summary"]["random_top1_mean"]
    elif kind == "search":
        steps = [json.loads(line) for line in (run / "search.jsonl").read_text().splitlines()]
        assert [v for v, _ in shown["accuracy"]] == [s["accuracy"] for s in steps]
        assert [t for _, t in shown["mes"]] == [f"{s['mes']:.1f}" for s in steps]
        result = json.loads((run / "result.json").read_text())
        assert shown["result.mes"][0][0] == result["mes"]
    else:
        result = json.loads((run / "result.json").read_text())
        assert shown["result.largest_top1"][0] == (result["largest_top1"], f"{100 * result['largest_top1']:.2f}")
        last = [
            json.loads(line)
            for line in (run / "metrics.jsonl").read_text().splitlines()
            if "loss" in line and '"final"' not in line
        ][-1]
        assert shown["last.loss"][0][0] == last["loss"]


def test_report_of_a_folder_that_is_no_run(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run folder of nas" in capsys.readouterr().err


# --- released weights -------------------------------------------------------------------------------


def test_train_supernet_from_released_weights_of_its_largest_network(tmp_path, capsys):
    import timm

    weights = tmp_path / "l.pth"
    torch.save(timm.create_model("efficientformerv2_l").state_dict(), weights)  # 1000 classes, at 224
    run = tmp_path / "run"
    assert (
        main(
            [
                "train-supernet",
                "efficientformerv2",
                "--space",
                "efficientformerv2-l",
                "--init",
                str(weights),
                "--run",
                str(run),
                "--img-size",
                "32",
                "--max-steps",
                "1",
                *QUICK,
            ]
        )
        == 0
    )
    capsys.readouterr()
    config = (run / "config.yaml").read_text()
    assert "init_digest:" in config
    # A network of another family does not fit: one line naming the keys.
    s0 = tmp_path / "swift.pth"
    torch.save(timm.create_model("swiftformer_xs").state_dict(), s0)
    assert (
        main(
            [
                "train-supernet",
                "efficientformerv2",
                "--space",
                "efficientformerv2-l",
                "--init",
                str(s0),
                "--run",
                str(tmp_path / "bad"),
                "--img-size",
                "32",
                "--max-steps",
                "1",
                *QUICK,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "does not fit" in err[0]
        and "missing keys: stem.conv1" in err[0]
        and "unexpected keys:" in err[0]
    )
    assert not (tmp_path / "bad").exists()


def test_train_supernet_again_from_a_trained_supernets_checkpoint(tmp_path, capsys):
    # A warm restart (issue 11's longer training): a supernet's checkpoint is its largest network's
    # weights, so --init takes it and a new schedule starts from where the first stopped.
    from nas.runs.checkpoint import file_digest

    def train(run: Path, *extra: str) -> dict:
        args = ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny", "--run", str(run)]
        assert main([*args, *extra, "--img-size", "32", "--max-steps", "1", *QUICK]) == 0
        capsys.readouterr()
        return torch.load(run / "checkpoint.pt", weights_only=True)["model"]

    first = train(tmp_path / "first")
    again = train(tmp_path / "again", "--init", str(tmp_path / "first" / "checkpoint.pt"))
    fresh = train(tmp_path / "fresh", "--seed", "1")
    assert (
        f"init_digest: {file_digest(tmp_path / 'first' / 'checkpoint.pt')}"
        in (tmp_path / "again" / "config.yaml").read_text()
    )
    key = "stages.1.blocks.0.mlp.fc1.conv.weight"
    # One step from the first supernet's weights: near them, and nearer than an independent start.
    moved = (again[key] - first[key]).abs().max()
    assert 0 < moved < 0.05 and moved < (fresh[key] - first[key]).abs().max()


def test_released_weights_load_exactly(tmp_path):
    import timm

    from nas.runs.checkpoint import load_pretrained
    from supernets import build_supernet

    reference = timm.create_model("efficientformerv2_l", num_classes=10).eval()
    weights = tmp_path / "l.pth"
    torch.save({"state_dict": reference.state_dict()}, weights)
    space = load_space("efficientformerv2-l")
    net = build_supernet(space, img_size=224, num_classes=10).eval()
    assert load_pretrained(net, weights) == []
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert torch.allclose(net(x, space.largest()), reference(x), atol=1e-5)


def test_fine_tune_a_member_from_released_weights(tmp_path, capsys):
    import timm

    weights = tmp_path / "s0.pth"
    torch.save(timm.create_model("efficientformerv2_s0").state_dict(), weights)
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "efficientformerv2_s0",
                "--init",
                str(weights),
                "--run",
                str(run),
                "--img-size",
                "32",
                "--max-steps",
                "1",
                *QUICK,
            ]
        )
        == 0
    )
    state = torch.load(run / "checkpoint.pt", weights_only=True)["model"]
    released = torch.load(weights, weights_only=True)
    # One step of AdamW from the released weights: close to them, far from a fresh initialisation.
    key = "stages.1.blocks.0.mlp.fc1.conv.weight"
    assert (state[key] - released[key]).abs().max() < 0.05


# --- one budget everywhere --------------------------------------------------------------------------


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
            [
                "sample",
                "--space",
                "efficientformerv2-tiny",
                "--objective",
                "mes",
                "--target",
                "450",
                "--device",
                "iphone12",
                "--num-classes",
                "10",
                "-n",
                "1",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    sampled = json.loads(capsys.readouterr().out)["archs"][0]
    assert main(["profile", str(out / "random-0.yaml"), "--device", "iphone12", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mes"] == pytest.approx(sampled["mes"])
    assert LatencyTable.__module__ == "nas.latency.table"  # exported from nas, as DESIGN promises
    assert ArchConfig.load(out / "random-0.yaml").family == "efficientformerv2"


# --- mixed precision ----------------------------------------------------------------------------------


def test_bf16_autocast_on_cpu_matches_float32_within_tolerance(tmp_path):
    from nas.data import eval_loader, load_splits
    from nas.recipe import load_recipe
    from nas.scoring import top1

    losses = {}
    for amp in ("none", "bf16"):
        run = tmp_path / amp
        assert (
            main(
                [
                    "train",
                    "efficientformerv2_s0",
                    "--run",
                    str(run),
                    "--img-size",
                    "32",
                    "--max-steps",
                    "3",
                    "--log-every",
                    "1",
                    "--amp",
                    amp,
                    "--channels-last",
                    "true",
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
