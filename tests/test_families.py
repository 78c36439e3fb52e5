"""What every registered family must do, one test per property parametrised over the registry (and
over every space and named member it ships), so a new family is held to the same tests as the
built-in ones. What only one family does stays in its own file (test_efficientformer.py, ...)."""

import functools
import random

import pytest
import timm
import torch
from helpers import assert_member_matches_timm, randomize_

from nas.config.folder import available_spaces
from nas.config.spaces import load_space
from nas.metrics import count_params
from supernets import build_static, build_supernet, extract, family_names


def _spaces_of(family: str) -> list:
    return [s for s in map(load_space, available_spaces()) if s.family == family]


def _smallest_space(family: str):
    """The family's space whose largest network is smallest: what a quick test builds."""
    return min(_spaces_of(family), key=lambda s: count_params(s.largest(), 64, 10))


def _timm_members() -> list[tuple[str, str]]:
    """(space, member) for every named member that timm has a model of, each member once (in the
    family's main space, named after the family, where it is there)."""
    known, pairs = set(timm.list_models()), {}
    for name in sorted(available_spaces(), key=lambda n: (n != load_space(n).family, n)):
        for member in load_space(name).members:
            if member in known:
                pairs.setdefault(member, name)
    return sorted((space, member) for member, space in pairs.items())


@functools.cache
def _supernet_224(space_name: str):
    torch.manual_seed(0)
    return randomize_(build_supernet(load_space(space_name), img_size=224)).eval()


@pytest.mark.parametrize("family", family_names())
def test_every_family_builds_samples_runs_and_trains_its_subnetworks(family):
    space = _smallest_space(family)
    net = randomize_(build_supernet(space, img_size=64, num_classes=10), seed=1).eval()
    rng = random.Random(0)
    x, labels = torch.randn(2, 3, 64, 64), torch.tensor([1, 7])
    for arch in [space.smallest(), space.largest(), *(space.sample(rng) for _ in range(2))]:
        assert space.contains(arch)
        static = extract(net, arch).eval()
        with torch.no_grad():
            assert (net(x, arch) - static(x)).abs().max() <= 1e-5  # the supernet runs the sub-network
        assert count_params(arch, 64, 10) == sum(p.numel() for p in static.parameters())
        fresh = build_static(arch, img_size=64, num_classes=10).train()
        out = fresh(x)
        logits = (out[0] + out[1]) / 2 if isinstance(out, tuple) else out
        torch.nn.functional.cross_entropy(logits, labels).backward()
        missing = [n for n, p in fresh.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
        assert not missing, f"{family} {arch.digest}: no gradient for {missing[:5]}"


@pytest.mark.parametrize("space_name, member", _timm_members())
def test_named_member_extracts_into_timm_with_identical_logits(space_name, member):
    space = load_space(space_name)
    reference = assert_member_matches_timm(_supernet_224(space_name), space, member)
    assert count_params(space.named(member)) == sum(p.numel() for p in reference.parameters())
