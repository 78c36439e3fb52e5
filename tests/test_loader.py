"""The training loader: ``loader_workers: auto``, persistent workers that keep the per-sample seeding and
exact mid-epoch resume, and ``data_wait`` in metrics.jsonl and TensorBoard."""

import dataclasses
import json

import pytest
import torch
import yaml
from helpers import in_a_ray_task_without_fork

from nas import NasError
from nas.cli import main
from nas.config.recipe import Recipe, load_recipe
from nas.core.typed_yaml import from_mapping
from nas.data import load_splits, train_loader
from nas.data.workers import resolve_workers


def test_loader_workers_is_auto_by_default_and_takes_a_count(tmp_path, capsys):
    assert Recipe().loader_workers == "auto" and load_recipe("imagenet").loader_workers == "auto"
    assert from_mapping(Recipe, {"loader_workers": 3}, "r").loader_workers == 3
    assert from_mapping(Recipe, {"loader_workers": "auto"}, "r").loader_workers == "auto"
    for bad in (-1, 1.5, "many", True, [2]):
        with pytest.raises(NasError, match=r"r.loader_workers must be auto or an integer of at least 0, got"):
            from_mapping(Recipe, {"loader_workers": bad}, "r")
    for bad in ("many", "-1", "2.5"):
        assert main(["train", "swiftformer_xs", "--loader-workers", bad, "--run", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--loader-workers must be auto or an integer of at least 0" in err[0], err
    assert not (tmp_path / "r").exists()


def test_auto_resolves_to_no_workers_for_images_in_memory_else_a_share_of_the_cores(real_images, monkeypatch):
    recipe = load_recipe("demo")
    digits = load_splits(None, recipe, 0).train
    on_disk = load_splits(str(real_images), dataclasses.replace(recipe, cache_images=False), 0).train
    assert digits.pixels is not None and on_disk.pixels is None
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert resolve_workers("auto", digits) == 0
    assert resolve_workers("auto", on_disk) == 8  # 15 cores left, at most 8
    assert resolve_workers(3, digits) == 3 and resolve_workers(0, on_disk) == 0  # a count is taken as given
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # torchrun: 4 ranks on this node share its 16 cores
    assert resolve_workers("auto", on_disk) == 3
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert resolve_workers("auto", on_disk) == 1  # never below one


def _epochs(loader, sampler, epochs, start_batch=0):
    out = []
    for epoch in epochs:
        sampler.set_epoch(epoch, start_batch if epoch == epochs[0] else 0)
        out.append([(images.clone(), labels.clone()) for images, labels in loader])
    return out


def _same(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b))


def test_persistent_workers_give_the_batches_of_no_workers_epoch_by_epoch_and_on_resume(real_images):
    # Every augmentation on, RandAugment included (it draws from numpy): each sample is seeded by (seed, epoch, index).
    recipe = dataclasses.replace(
        load_recipe("demo"),
        batch_size=16,
        cache_images=False,
        randaugment="rand-m9-mstd0.5",
        color_jitter=0.4,
        reprob=0.25,
    )
    splits = load_splits(str(real_images), recipe, 0)
    serial = _epochs(*train_loader(splits, dataclasses.replace(recipe, loader_workers=0), seed=5)[:2], [0, 1])
    loader, sampler, dataset = train_loader(splits, dataclasses.replace(recipe, loader_workers=2), seed=5)
    assert loader.num_workers == 2 and loader.persistent_workers and loader.prefetch_factor == 4
    parallel = _epochs(loader, sampler, [0, 1])
    assert len(serial[0]) == sampler.batches_per_epoch >= 4
    assert _same(serial[0], parallel[0]) and _same(serial[1], parallel[1])
    # Each batch is its samples seeded by (seed, epoch, index): epoch 1's, not epoch 0's again.
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        pairs = list(sampler)
        assert pairs[0][0] == epoch
        first = [dataset[pair] for pair in pairs[:16]]
        assert torch.equal(torch.stack([image for image, _ in first]), parallel[epoch][0][0])
        assert torch.equal(torch.tensor([label for _, label in first]), parallel[epoch][0][1])
    assert not torch.equal(dataset[(0, 3)][0], dataset[(1, 3)][0])  # one image, another augmentation each epoch
    assert torch.equal(dataset[(0, 3)][0], dataset[3][0])  # a plain index: epoch 0
    # the same workers, now asked to resume epoch 1 at its third batch (as a run resumed mid-epoch)
    assert _same(_epochs(loader, sampler, [1], start_batch=2)[0], serial[1][2:])
    resumed = _epochs(*train_loader(splits, dataclasses.replace(recipe, loader_workers=2), seed=5)[:2], [1], 2)
    assert _same(resumed[0], serial[1][2:])


def _final_weights(run):
    return torch.load(run / "checkpoint.pt", weights_only=True)["model"]


def test_train_logs_data_wait_and_resumes_exactly_with_other_worker_counts(real_images, tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    base = ["train", "swiftformer_xs", "--data", str(real_images), "--img-size", "32", "--batch-size", "16"]
    base += ["--epochs", "2", "--log-every", "2", "--eval-batch-size", "64", "--cache-images", "false", "--json"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert main([*base, "--run", str(whole), "--max-steps", "10"]) == 0  # auto: worker processes (files not cached)
    capsys.readouterr()
    records = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if not r.get("final")]
    assert [r["step"] for r in steps] == [2, 4, 6, 8, 10]
    assert all(0 <= r["data_wait"] <= 1 and r["data_ms"] >= 0 for r in steps)
    assert any(r["data_wait"] > 0 for r in steps)
    events = EventAccumulator(str(whole))
    events.Reload()
    waits = events.Scalars("train/data_wait")
    assert [w.step for w in waits] == [2, 4, 6, 8, 10] and all(0 <= w.value <= 1 for w in waits)
    # the recorded recipe keeps what was asked for, not what it resolved to on this machine
    assert yaml.safe_load((whole / "config.yaml").read_text())["recipe"]["loader_workers"] == "auto"
    # Stopped at step 3 (mid-epoch: 7 steps an epoch) with workers, resumed without: the same weights.
    assert main([*base, "--run", str(parts), "--max-steps", "3", "--loader-workers", "2"]) == 0
    assert main([*base, "--run", str(parts), "--max-steps", "10", "--loader-workers", "0", "--resume"]) == 0
    capsys.readouterr()
    a, b = _final_weights(whole), _final_weights(parts)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.xdist_group("ray")  # one local Ray cluster at a time under pytest -n
@pytest.mark.slow
def test_loader_workers_inside_a_ray_task_start_without_a_fork_and_give_the_same_batches(real_images):
    """A fork of a Ray worker copies the locks its gRPC threads held (ray-project/ray#28328): inside Ray
    the loader's workers start from a fresh interpreter, with the batches of a loader outside Ray."""
    recipe = dataclasses.replace(load_recipe("demo"), batch_size=16, cache_images=False, loader_workers=2)
    splits = load_splits(str(real_images), recipe, 0)
    outside = _epochs(*train_loader(splits, recipe, seed=5)[:2], [0, 1])

    def two_epochs(root, recipe):
        from nas.data import load_splits, train_loader

        loader, sampler, _ = train_loader(load_splits(str(root), recipe, 0), recipe, seed=5)
        assert loader.num_workers == 2
        epochs = []
        for epoch in (0, 1):
            sampler.set_epoch(epoch)
            epochs.append([(images.clone(), labels.clone()) for images, labels in loader])
        return epochs, loader.multiprocessing_context.get_start_method()

    inside, start_method = in_a_ray_task_without_fork(two_epochs, real_images, recipe)
    assert start_method in ("forkserver", "spawn")
    assert _same(inside[0], outside[0]) and _same(inside[1], outside[1])
