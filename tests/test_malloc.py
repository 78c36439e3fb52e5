"""glibc malloc settings of the ``nas`` process and its Ray workers (nas.runs.malloc, issue 16)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nas.cli.main import main
from nas.core.errors import NasError
from nas.runs.malloc import MALLOC_ENV, RETAIN_SETTINGS, _glibc, retain_freed_memory

glibc_only = pytest.mark.skipif(_glibc() is None, reason="the settings are glibc's")

# Allocates and frees 200 MB as 40 MB tensors (above glibc's largest mmap threshold: under its
# defaults each is mapped and unmapped) five times, and returns the page faults of the last round:
# the pages a training step faults in again at every step (the heap takes a few rounds to settle).
# Source text, so that a subprocess and a Ray worker run the same code.
LAST_ROUND_FAULTS = """
def last_round_faults():
    import resource

    import torch

    def faults_of_a_round():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        tensors = [torch.ones(10_000_000) for _ in range(5)]
        del tensors
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    for _ in range(4):
        faults_of_a_round()
    return faults_of_a_round()
"""
REFAULT_SCRIPT = (
    "import json, sys\n"
    "from nas.runs.malloc import retain_freed_memory\n"
    "applied = retain_freed_memory(sys.argv[1])\n"
    + LAST_ROUND_FAULTS
    + 'print(json.dumps({"applied": applied, "faults": last_round_faults()}))\n'
)


def refaults(choice: str) -> dict:
    out = subprocess.run([sys.executable, "-c", REFAULT_SCRIPT, choice], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@glibc_only
def test_retained_memory_is_not_faulted_in_again():
    system, retained = refaults("system"), refaults("retain")
    assert system["applied"] == {}
    assert retained["applied"] == {name: value for name, (_, value) in RETAIN_SETTINGS.items()}
    # 200 MB is about 50,000 pages of 4 kB
    assert system["faults"] > 5_000, system
    assert retained["faults"] < 500, retained


def test_unknown_malloc_setting_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv(MALLOC_ENV, "jemalloc")
    assert main(["space", "show", "efficientformerv2-tiny"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NAS_MALLOC='jemalloc'" in err[0] and "retain, system" in err[0]
    with pytest.raises(NasError, match="allowed: retain, system"):
        retain_freed_memory("jemalloc")


@pytest.mark.xdist_group("ray")  # one local Ray cluster at a time under pytest -n
@pytest.mark.slow
@glibc_only
@pytest.mark.parametrize("choice", ["retain", "system"])
def test_ray_workers_that_nas_starts_use_its_malloc_setting(monkeypatch, choice):
    import ray

    from nas.runs.ray_cluster import start_ray

    monkeypatch.setenv(MALLOC_ENV, choice)

    # defined here so that Ray ships it by value rather than importing this test module
    def faults_in_worker() -> int:
        namespace = {}
        exec(LAST_ROUND_FAULTS, namespace)
        return namespace["last_round_faults"]()

    assert start_ray(None, 1)
    try:
        faults = ray.get(ray.remote(num_cpus=1)(faults_in_worker).remote())
    finally:
        ray.shutdown()
    assert faults < 500 if choice == "retain" else faults > 5_000, faults
