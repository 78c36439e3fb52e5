import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import argv

from nas import NasError, load_space
from nas.cli import main
from nas.config.recipe import load_recipe
from nas.train.supernet import SupernetTrainingRequest, gumbel_temperature, train_supernet

QUICK = [
    "--epochs",
    "1",
    "--batch-size",
    "32",
    "--bn-calib-batches",
    "1",
    "--eval-batch-size",
    "64",
    "--log-every",
    "2",
]


def cli(*argv):
    return [sys.executable, "-m", "nas", *argv]


def test_sandwich_training_on_real_images(real_images, tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        main(
            [
                *argv(
                    "train-supernet efficientformerv2 --space efficientformerv2-tiny --recipe demo "
                    "--data {} --run {} --json",
                    real_images,
                    run,
                ),
                *QUICK,
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["train_split"] + result["search_split"] == 120 and result["chance"] == pytest.approx(1 / 3)
    assert 0 <= result["largest_top1"] <= 1 and 0 <= result["smallest_top1"] <= 1
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"loss", "lr", "images_per_s"} <= set(records[0]) and records[-1]["final"]
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    assert state["step"] == result["step"] and state["space"] == "efficientformerv2-tiny"
    assert (run / "config.yaml").exists() and (run / "result.json").exists()


def test_swiftformer_sandwich_and_teacher_distillation(tmp_path, monkeypatch):
    from nas.train import loop

    real_load_teacher, real_supervised_loss = loop.load_teacher, loop.Trainer.supervised_loss
    teacher_labels, distilled = [], []  # the teacher's hard labels of each batch; what the loss did with them

    def load_teacher(*args):
        teacher = real_load_teacher(*args)
        teacher.register_forward_hook(lambda module, inputs, out: teacher_labels.append(out.argmax(dim=-1)))
        return teacher

    def supervised_loss(self, output, targets, labels):
        loss, logits = real_supervised_loss(self, output, targets, labels)
        with torch.no_grad():  # the same loss with other labels in the teacher's place
            other, _ = real_supervised_loss(self, output, targets, (labels + 1) % self.splits.num_classes)
        distilled.append((labels, loss.item(), other.item()))
        return loss, logits

    monkeypatch.setattr(loop, "load_teacher", load_teacher)
    monkeypatch.setattr(loop.Trainer, "supervised_loss", supervised_loss)
    recipe = dataclasses.replace(load_recipe("demo"), epochs=1, batch_size=32, teacher="resnet18", bn_calib_batches=1)
    result = train_supernet(
        SupernetTrainingRequest(
            load_space("swiftformer-tiny"), recipe=recipe, data=None, run=tmp_path / "run", max_steps=3, progress=False
        )
    )
    assert result["step"] == 3 and "largest_top1" in result
    # The teacher labelled each step's batch, and its labels entered the loss (the distillation head's term).
    assert len(teacher_labels) == 3 and len(distilled) >= 3
    assert all(any(torch.equal(labels, t) for labels, _, _ in distilled) for t in teacher_labels)
    assert all(any(torch.equal(labels, t) for t in teacher_labels) for labels, _, _ in distilled)
    assert all(loss != other for _, loss, other in distilled)


def test_gumbel_training_saves_alpha_and_importance(tmp_path):
    recipe = dataclasses.replace(load_recipe("demo"), epochs=2, batch_size=32, bn_calib_batches=1, alpha_lr=0.05)
    result = train_supernet(
        SupernetTrainingRequest(
            load_space("efficientformer-tiny"),
            recipe=recipe,
            data=None,
            run=tmp_path / "run",
            max_steps=6,
            progress=False,
        )
    )
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    alphas = [v for k, v in state["model"].items() if k.startswith("arch_logits")]
    assert len(alphas) == 4 and any(a.abs().sum() > 0 for a in alphas)  # α moved from zero
    assert state["temperature"] < recipe.gumbel_tau_start
    readable = json.loads((tmp_path / "run" / "importance.json").read_text())
    assert readable["step"] == 6 and len(readable["blocks"]) == 4
    assert result["importance"]["stages"] == readable["stages"]


def test_temperature_anneals_exponentially():
    recipe = load_recipe("imagenet")
    assert gumbel_temperature(recipe, 0) == recipe.gumbel_tau_start
    assert gumbel_temperature(recipe, 1) == pytest.approx(recipe.gumbel_tau_end)
    assert gumbel_temperature(recipe, 0.5) == pytest.approx((recipe.gumbel_tau_start * recipe.gumbel_tau_end) ** 0.5)


def _final_weights(run: Path) -> dict:
    return torch.load(run / "checkpoint.pt", weights_only=True)["model"]


def _step(run: Path) -> int:
    return torch.load(run / "checkpoint.pt", weights_only=True)["step"] if (run / "checkpoint.pt").exists() else 0


@pytest.mark.slow
def test_killed_three_times_then_resumed_matches_an_uninterrupted_run(tmp_path):
    args = [
        "train-supernet",
        "efficientformerv2",
        "--space",
        "efficientformerv2-tiny",
        "--epochs",
        "2",
        "--batch-size",
        "32",
        "--checkpoint-every",
        "3",
        "--bn-calib-batches",
        "1",
        "--max-steps",
        "40",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # the uninterrupted run, beside the killed ones
    uninterrupted = subprocess.Popen(
        cli(*args, "--run", str(tmp_path / "a")), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    b = tmp_path / "b"
    killed_at = []
    # SIGKILL once the checkpoint passes each of these steps; the last leaves 18 steps to go, because on a loaded
    # machine the poll below has been seen to lag the run by two checkpoints (6 steps) and a run that finishes
    # before its kill tests nothing
    for kill_after in (4, 13, 22):
        resume = ["--resume"] if (b / "checkpoint.pt").exists() else []
        proc = subprocess.Popen(
            cli(*args, "--run", str(b), *resume), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None and _step(b) < kill_after:
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_at.append(_step(b))
    assert killed_at == sorted(killed_at) and 0 < killed_at[0] and killed_at[-1] < 40, killed_at
    subprocess.run(cli(*args, "--run", str(b), "--resume"), check=True, env=env, capture_output=True, timeout=600)
    assert uninterrupted.wait(timeout=600) == 0
    a_weights, b_weights = _final_weights(tmp_path / "a"), _final_weights(b)
    assert all(torch.equal(a_weights[k], b_weights[k]) for k in a_weights)
    records = [json.loads(line) for line in (b / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in records if not r.get("final")]
    assert steps == sorted(steps) and len(steps) == len(set(steps))  # no duplicated log lines
    assert sum(bool(r.get("final")) for r in records) == 1
    assert not (b / ".lock").exists()


@pytest.mark.slow
def test_two_process_ddp_on_cpu(tmp_path, real_images):
    run, data = tmp_path / "ddp", tmp_path / "data"
    shutil.copytree(real_images, data)  # a fresh folder: never checked
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "nas",
            "--",
            "-v",
            "train-supernet",
            "efficientformerv2",
            "--space",
            "efficientformerv2-tiny",
            "--run",
            str(run),
            "--batch-size",
            "16",
            "--epochs",
            "1",
            "--max-steps",
            "3",
            "--bn-calib-batches",
            "1",
            "--data",
            str(data),
            "--img-size",
            "32",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, OMP_NUM_THREADS="1", NAS_DATA_CACHE=str(tmp_path / "cache")),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Rank 0 decodes every image once; rank 1 waits for its result instead of checking again.
    assert proc.stderr.count("checking 150 images") == 1, proc.stderr[-2000:]
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 1
    assert "world_size: 2" in (run / "config.yaml").read_text()
    assert json.loads((run / "result.json").read_text())["step"] == 3


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["efficientformerv2", "--data", "/no/such/folder"], "data folder not found"),
        (["efficientformerv3"], "unknown family 'efficientformerv3'"),
        (["efficientformerv2", "--space", "swiftformer-tiny"], "is a swiftformer space, not efficientformerv2"),
        (["efficientformerv2", "--recipe", "nope"], "unknown recipe 'nope'"),
        (["efficientformerv2", "--resume"], "nothing to resume"),
    ],
)
def test_bad_input(tmp_path, capsys, argv, fragment):
    run = tmp_path / "run"
    assert main(["train-supernet", *argv, "--run", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]
    assert not run.exists() or not any(run.iterdir())


def test_folder_without_images_and_unknown_recipe_field(tmp_path, capsys):
    (tmp_path / "empty" / "train" / "cat").mkdir(parents=True)
    assert (
        main(["train-supernet", "efficientformerv2", "--data", str(tmp_path / "empty"), "--run", str(tmp_path / "run")])
        == 2
    )
    assert "no images" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 1\nlearning_rate: 3\n")
    assert main(["train-supernet", "efficientformerv2", "--recipe", str(bad), "--run", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'learning_rate'" in err and "allowed keys: epochs" in err
    with pytest.raises(SystemExit) as info:
        main(["train-supernet", "efficientformerv2", "--learning-rate", "3"])
    assert info.value.code == 2


def test_existing_run_needs_resume(tmp_path):
    recipe = dataclasses.replace(load_recipe("demo"), epochs=1, batch_size=32, bn_calib_batches=1)
    request = SupernetTrainingRequest(
        load_space("efficientformerv2-tiny"),
        recipe=recipe,
        data=None,
        run=tmp_path / "run",
        max_steps=1,
        progress=False,
    )
    train_supernet(request)
    with pytest.raises(NasError, match="pass --resume"):
        train_supernet(request)


def test_sandwich_samples_within_a_parameter_band():
    from types import SimpleNamespace

    from nas.metrics import count_params
    from nas.train.supernet import SandwichRule

    space = load_space("efficientformerv2-tiny")
    recipe = dataclasses.replace(
        load_recipe("demo"), img_size=32, sandwich_params_low=1.1e5, sandwich_params_high=1.6e5
    )
    trainer = SimpleNamespace(space=space, recipe=recipe, splits=SimpleNamespace(num_classes=10), seed=0)
    strategy = SandwichRule(trainer)
    drawn = [count_params(strategy.sample(), 32, 10) for _ in range(20)]
    assert all(0.11e6 <= p <= 0.16e6 for p in drawn) and len(set(drawn)) > 1  # uniform draws: 3% of them fall here
    again = SandwichRule(trainer)
    assert [count_params(again.sample(), 32, 10) for _ in range(20)] == drawn  # seeded
    trainer.recipe = dataclasses.replace(recipe, sandwich_params_low=5e6, sandwich_params_high=6e6)
    with pytest.raises(NasError, match="widen sandwich_params_low"):
        SandwichRule(trainer).sample()
    with pytest.raises(NasError, match="sandwich_params_low .* exceeds"):
        dataclasses.replace(recipe, sandwich_params_low=3e5, sandwich_params_high=2e5).check("recipe")


def test_alpha_divergence_inplace_distillation(real_images, tmp_path):
    from timm.loss import SoftTargetCrossEntropy

    from nas.train.losses import AdaptiveAlphaDivergence

    torch.manual_seed(0)
    logits = torch.randn(16, 10, dtype=torch.float64, requires_grad=True)
    teacher = torch.randn(16, 10, dtype=torch.float64).mul(2).softmax(-1)
    q = logits.softmax(-1)
    loss = AdaptiveAlphaDivergence(-1.0, 1.0, iw_clip=1e9)
    for alpha in (-1.0, -0.5, 0.5, 2.0):
        # unclipped, the surrogate's gradient is the alpha-divergence's, and its value is the divergence
        closed = (q * ((teacher / q) ** alpha - 1)).sum(-1) / (alpha * (alpha - 1))
        value, surrogate = loss.divergence(logits, teacher, alpha)
        assert torch.allclose(value, closed.detach())
        expected, got = (torch.autograd.grad(x.sum(), logits, retain_graph=True)[0] for x in (closed, surrogate))
        assert torch.allclose(got, expected, atol=1e-10)
    kl = (teacher * (teacher.log() - logits.log_softmax(-1))).sum(-1)
    assert torch.allclose(loss.divergence(logits, teacher, 1.0)[0], kl.detach())
    # each example takes the larger side: alpha = -1 where the teacher is the sharper (the student is not
    # sure enough), alpha = +1 where the student is
    ramp = torch.linspace(-1, 1, 10, dtype=torch.float64)
    students = torch.stack([ramp, 4 * ramp]).requires_grad_(True)
    teachers = torch.stack([4 * ramp, ramp]).softmax(-1)
    (low, low_grad), (high, high_grad) = (loss.divergence(students, teachers, a) for a in (-1.0, 1.0))
    assert low[0] > high[0] and low[1] < high[1]
    value = loss(students, teachers)
    assert torch.allclose(value, torch.stack([low[0], high[1]]).mean())
    pick = torch.stack([low_grad[0], high_grad[1]]).mean()
    assert torch.allclose(*(torch.autograd.grad(v, students, retain_graph=True)[0] for v in (value, pick)))
    zero = torch.autograd.grad(loss(logits, logits.softmax(-1)), logits)[0]
    assert zero.abs().max() < 1e-12  # a student that matches its teacher learns nothing
    # a student sure of a class its teacher gives 1e-4: the importance weight q/p is ~7000 and its gradient
    # ~1500 unclipped; clipped at 5 it stays of the order of cross-entropy's
    confident = torch.zeros(1, 10, dtype=torch.float64)
    confident[0, 0] = 3.0
    confident.requires_grad_(True)
    doubtful = torch.full((1, 10), (1 - 1e-4) / 9, dtype=torch.float64)
    doubtful[0, 0] = 1e-4
    grads = [
        torch.autograd.grad(AdaptiveAlphaDivergence(-1.0, 1.0, iw_clip=c)(confident, doubtful), confident)[0]
        for c in (5.0, 1e9)
    ]
    assert grads[0].abs().max() < 2 and grads[1].abs().max() > 1000
    # unlike KL's (soft-target cross-entropy's), the gradient sees the alpha < 0 side
    ce = torch.autograd.grad(SoftTargetCrossEntropy()(logits, teacher), logits)[0]
    assert not torch.allclose(torch.autograd.grad(loss(logits, teacher), logits)[0], ce)
    with pytest.raises(ValueError, match="alpha_min must be below 0"):
        AdaptiveAlphaDivergence(0.5, 1.0)

    run = tmp_path / "run"
    argv = ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny", "--recipe", "demo"]
    argv += ["--data", str(real_images), "--run", str(run), *QUICK, "--inplace-distill-divergence", "alpha"]
    assert main(argv) == 0
    assert "inplace_distill_divergence: alpha" in (run / "config.yaml").read_text()
    losses = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines() if "loss" in line]
    assert losses and all(0 < x < 20 for x in losses)  # cross-entropy and divergences are positive


def test_gradient_projection_prioritises_the_smaller_subnetworks(tmp_path, real_images):
    """NASViT §3.2: where the largest sub-network's gradient of a tensor conflicts with the others',
    it loses its component along theirs before the two are summed; elsewhere they are summed."""
    import copy
    import random

    from nas.train.supernet import MAX_PROJECTION_COEFFICIENT, project_conflicting_gradients, set_aside_gradients
    from supernets import build_supernet
    from supernets.elastic_ops import enable_slice_gradients

    def projected(largest, others):
        param = torch.nn.Parameter(torch.zeros(len(others), dtype=torch.float64))
        param.grad = torch.tensor(others, dtype=torch.float64)
        counts = project_conflicting_gradients({param: torch.tensor(largest, dtype=torch.float64)})
        return param.grad, counts

    # conflicting: g_l = (-2, 1), g_s = (1, 0): g_l loses (-2, 0); the sum is g_s + (0, 1)
    summed, counts = projected([-2.0, 1.0], [1.0, 0.0])
    assert torch.allclose(summed, torch.tensor([1.0, 1.0], dtype=torch.float64)) and counts == (1, 1)
    others = torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert torch.dot(summed - others, others) == 0  # what is left of g_l is orthogonal to g_s
    # agreeing: the plain sandwich sum
    summed, counts = projected([2.0, 1.0], [1.0, 3.0])
    assert torch.equal(summed, torch.tensor([3.0, 4.0], dtype=torch.float64)) and counts == (0, 1)
    # the others barely use the tensor: the coefficient stops at its clip instead of growing without bound
    summed, _ = projected([-100.0, 0.0], [1.0, 0.0])
    assert summed[0].item() == pytest.approx(1.0 + MAX_PROJECTION_COEFFICIENT - 100.0)
    # the others leave it unused: the largest's gradient alone, no NaN
    summed, counts = projected([-1.0, 2.0], [0.0, 0.0])
    assert torch.equal(summed, torch.tensor([-1.0, 2.0], dtype=torch.float64)) and counts == (0, 1)

    # a sandwich step on a supernet: the in-place slice gradients (elastic_ops) give autograd's result
    space = load_space("efficientformerv2-tiny")
    torch.manual_seed(0)
    net = build_supernet(space, img_size=32, num_classes=10).train()
    plain = copy.deepcopy(net)
    enable_slice_gradients(net, min_numel=1)
    archs = [space.largest(), space.smallest(), space.sample(random.Random(0))]
    x = torch.randn(4, 3, 32, 32)
    conflicts = []
    for model in (net, plain):
        model.zero_grad(set_to_none=True)
        for i, arch in enumerate(archs):
            if i == 1:
                largest = set_aside_gradients(model.parameters())
            torch.manual_seed(i)
            (model(x, arch).logsumexp(dim=1).mean() * (1 if i == 0 else -1)).backward()
        conflicts.append(project_conflicting_gradients(largest))
    assert conflicts[0] == conflicts[1] and 0 < conflicts[0][0] < conflicts[0][1]
    for (name, p), q in zip(net.named_parameters(), plain.parameters()):
        # up to float rounding, as in test_in_place_slice_gradients_equal_autograds: contiguous and strided
        # slices take different matmul kernels, a few ulps apart on some CPUs
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-8, msg=lambda m, name=name: f"{name}: {m}")

    run = tmp_path / "run"
    argv = ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny", "--recipe", "demo"]
    argv += ["--data", str(real_images), "--run", str(run), *QUICK, "--sandwich-gradient-projection", "true"]
    assert main(argv) == 0
    assert "sandwich_gradient_projection: true" in (run / "config.yaml").read_text()
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    fractions = [line["gradient_conflicts"] for line in lines if "loss" in line]
    assert fractions and all(0 <= f <= 1 for f in fractions) and any(f > 0 for f in fractions)


def test_an_earlier_runs_band_in_millions_loads_as_parameter_counts():
    """Issue 60: one unit per cost; the band's keys of earlier runs (millions) still load, as counts."""
    from nas.config.recipe import recipe_from_saved
    from nas.core.typed_yaml import read_yaml

    saved = read_yaml(
        Path(__file__).resolve().parents[1] / "docs/results/supernet-cifar10-v2-tiny-2ep-band800/config.yaml", "run"
    )["recipe"]
    assert (saved["sandwich_params_min"], saved["sandwich_params_max"]) == (0.11, 0.16)
    recipe = recipe_from_saved(saved)
    assert (recipe.sandwich_params_low, recipe.sandwich_params_high) == (110_000, 160_000)
    from nas.runs.config import read_run_config

    config = read_run_config(
        Path(__file__).resolve().parents[1] / "docs/results/supernet-cifar10-v2-tiny-2ep-band800/config.yaml"
    )
    assert config.recipe == recipe


def test_a_recipe_file_of_an_earlier_version_loads_its_band_as_parameter_counts(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("img_size: 32\nsandwich_params_min: 0.11\nsandwich_params_max: 0.16\n")
    recipe = load_recipe(path)
    assert (recipe.sandwich_params_low, recipe.sandwich_params_high) == (110_000, 160_000)
    path.write_text("sandwich_params_min: wide\n")
    with pytest.raises(NasError, match="sandwich_params_low"):
        load_recipe(path)
