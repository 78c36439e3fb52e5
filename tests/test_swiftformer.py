import random

import pytest
import timm
import torch
from helpers import randomize_

from nas import load_space
from nas.metrics import count_params
from supernets import build_supernet, extract
from supernets.swiftformer import SwiftFormerStatic


@pytest.fixture(scope="module")
def space():
    return load_space("swiftformer")


def test_timm_l3_weights_load_into_the_largest_network(space):
    assert space.largest() == space.named("swiftformer_l3")
    timm_l3 = randomize_(timm.create_model("swiftformer_l3"), seed=5).eval()
    net = build_supernet(space, img_size=224).eval()
    net.load_state_dict(timm_l3.state_dict(), strict=True)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert (net(x) - timm_l3(x)).abs().max() <= 1e-5


@pytest.mark.parametrize("img_size", [64, 97])
def test_random_subnetworks_extract_exactly(space, img_size):
    net = randomize_(build_supernet(space, img_size=img_size, num_classes=10), seed=img_size).eval()
    rng = random.Random(img_size)
    x = torch.randn(2, 3, img_size, img_size)
    for arch in [space.sample(rng) for _ in range(3)]:
        static = extract(net, arch).eval()
        assert isinstance(static, SwiftFormerStatic)  # per-block hidden widths
        with torch.no_grad():
            assert (net(x, arch) - static(x)).abs().max() <= 1e-5
        assert count_params(arch, img_size, 10) == sum(p.numel() for p in static.parameters())


def test_every_stage_keeps_its_swiftformer_encoder(space):
    rng = random.Random(0)
    assert all(s.attention == (1, 1, 1, 1) for s in (space.sample(rng) for _ in range(50)))
    arch = space.named("swiftformer_xs")
    for action, new in space.shrink_actions(arch):
        assert action.kind in ("remove_block", "narrow_stage", "lower_hidden")
        assert new.attention == (1, 1, 1, 1)
    smallest = space.smallest()
    assert smallest.depths == (1, 1, 1, 1)  # the encoder alone
