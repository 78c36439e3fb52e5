"""Shared test helpers."""

import shutil
from pathlib import Path

import torch
import torch.nn as nn


def in_a_ray_task_without_fork(fn, *args):
    """``fn(*args)`` in a task of a one-CPU local Ray cluster whose worker refuses ``os.fork``: a fork of a
    Ray worker copies the locks its gRPC threads held, and a child that needs one waits forever
    (ray-project/ray#28328). Define ``fn`` inside the test, so that Ray ships it by value rather than
    importing the test module, which its workers cannot."""
    import ray

    from nas.runs.ray_cluster import start_ray

    def call_without_fork(*args):
        import os

        def refuse_fork():
            raise AssertionError(f"{fn.__name__} forked a Ray worker")

        os.fork = refuse_fork
        return fn(*args)

    assert start_ray(None, 1)
    try:
        return ray.get(ray.remote(num_cpus=1)(call_without_fork).remote(*args))
    finally:
        ray.shutdown()


def argv(template: str, *values) -> list[str]:
    """A command line: ``template``'s words, each ``{}`` word replaced by the next of ``values`` as one
    argument (a path with a space in it stays one): ``argv("train {} --run {}", arch, tmp_path / "run")``."""
    values = list(values)
    words = template.split()
    if words.count("{}") != len(values):
        raise ValueError(f"{words.count('{}')} placeholders in {template!r}, {len(values)} values")
    return [str(values.pop(0)) if word == "{}" else word for word in words]


def copy_run(run: Path, dest: Path) -> Path:
    """A copy of a run folder (without its lock), for a test that damages or continues a shared run."""
    shutil.copytree(run, dest)
    (dest / ".lock").unlink(missing_ok=True)
    return dest


def search_argv(supernet: Path, run: Path, *extra: str) -> list[str]:
    """The ``nas search`` of the ``tiny_search`` fixture: greedy, to MES 420 on iphone12."""
    argv = ["search", "--supernet", str(supernet), "--objective", "mes", "--target", "420", "--device", "iphone12"]
    return [*argv, "--strategy", "greedy", "--bn-calib-batches", "1", "--run", str(run), *extra]


def compare_argv(search: Path, out: Path, *extra: str) -> list[str]:
    """The ``nas compare`` of the ``tiny_comparison`` fixture: the search's result and 2 random networks."""
    argv = ["compare", "--searched", str(search / "arch.yaml"), "--random", "2", "--out", str(out), "--img-size", "32"]
    quick = ["--max-steps", "2", "--epochs", "1", "--batch-size", "32", "--eval-batch-size", "128", "--log-every", "2"]
    return [*argv, *quick, *extra]


@torch.no_grad()
def randomize_(module: nn.Module, seed: int = 0) -> nn.Module:
    """Give every parameter and BatchNorm statistic a non-trivial random value.

    Fresh models have BN statistics 0/1 and layer scales of 1e-5, which would hide slicing bugs
    in a residual branch below any tolerance.
    """
    gen = torch.Generator().manual_seed(seed)
    for name, p in module.named_parameters():
        if name.endswith("gamma"):
            p.copy_(torch.rand(p.shape, generator=gen) * 0.5 + 0.5)
        else:
            p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    for name, b in module.named_buffers():
        if name.endswith("running_mean"):
            b.copy_(torch.randn(b.shape, generator=gen) * 0.1)
        elif name.endswith("running_var"):
            b.copy_(torch.rand(b.shape, generator=gen) + 0.5)
    return module


def assert_member_matches_timm(supernet, space, name: str, img_size: int = 224, seed: int = 0) -> nn.Module:
    """The member ``name`` extracted from ``supernet`` is timm's own class, loads into
    ``timm.create_model(name)`` with strict=True, and all three give the same logits (<= 1e-5)."""
    import timm

    arch = space.named(name)
    from supernets import extract

    static = extract(supernet, arch).eval()
    reference = timm.create_model(name)
    assert type(static) is type(reference)
    reference.load_state_dict(static.state_dict(), strict=True)
    reference.eval()
    x = torch.randn(1, 3, img_size, img_size, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ours = supernet(x, arch)
        assert ours.abs().mean() > 1e-2  # a real signal, not all zeros
        assert (ours - static(x)).abs().max() <= 1e-5
        assert (ours - reference(x)).abs().max() <= 1e-5
    return reference
