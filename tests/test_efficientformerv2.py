import random

import pytest
import timm
import torch
from helpers import randomize_
from timm.models.efficientformer_v2 import EfficientFormerV2

from nas import load_space
from nas.metrics import count_params
from supernets import build_static, build_supernet, extract
from supernets.efficientformerv2 import EfficientFormerV2Static

NAMED = ["efficientformerv2_s0", "efficientformerv2_s1", "efficientformerv2_s2", "efficientformerv2_l"]
TIMM_PARAMS = {
    "efficientformerv2_s0": 3.60e6,
    "efficientformerv2_s1": 6.19e6,
    "efficientformerv2_s2": 12.71e6,
    "efficientformerv2_l": 26.32e6,
}


@pytest.fixture(scope="module")
def space():
    return load_space("efficientformerv2")


@pytest.mark.parametrize("name", NAMED)
def test_param_counts_equal_timm(space, name):
    arch = space.named(name)
    timm_count = sum(p.numel() for p in timm.create_model(name, device="meta").parameters())
    assert count_params(arch) == timm_count
    assert round(count_params(arch) / 1e4) == round(TIMM_PARAMS[name] / 1e4)


def test_timm_l_weights_load_into_largest_network_of_l_space():
    timm_l = randomize_(timm.create_model("efficientformerv2_l"), seed=3).eval()
    net = build_supernet(load_space("efficientformerv2-l"), img_size=224).eval()
    net.load_state_dict(timm_l.state_dict(), strict=True)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert (net(x) - timm_l(x)).abs().max() <= 1e-5


@pytest.mark.parametrize("img_size", [64, 97])
def test_random_subnetworks_extract_exactly_at_any_resolution(space, img_size):
    net = randomize_(build_supernet(space, img_size=img_size, num_classes=10), seed=img_size).eval()
    rng = random.Random(img_size)
    archs = [space.sample(rng) for _ in range(3)]
    # One architecture timm cannot express (different MHSA counts in stages 3 and 4).
    archs.append(archs[0].replace(attention=(0, 0, 0, min(2, archs[0].depths[3]))))
    x = torch.randn(2, 3, img_size, img_size)
    for arch in archs:
        static = extract(net, arch).eval()
        if arch.attention[2] != arch.attention[3]:
            assert isinstance(static, EfficientFormerV2Static)
        with torch.no_grad():
            assert (net(x, arch) - static(x)).abs().max() <= 1e-5
        assert sum(p.numel() for p in static.parameters()) == count_params(arch, img_size, 10)


def test_non_timm_static_model_shares_timm_parameter_names(space):
    s0 = space.named("efficientformerv2_s0")  # MHSA blocks (0, 0, 2, 2)
    static = build_static(s0.replace(attention=(0, 0, 1, 3)), img_size=64)
    reference = build_static(s0, img_size=64)
    assert isinstance(static, EfficientFormerV2) and type(reference) is EfficientFormerV2
    ours, theirs = set(static.state_dict()), set(reference.state_dict())
    # Stage 3 loses the MHSA of block 5; stage 4 gains one in block 2; all other names are shared.
    assert {k.split(".token_mixer")[0].split(".ls1")[0] for k in theirs - ours} == {"stages.2.blocks.4"}
    assert {k.split(".token_mixer")[0].split(".ls1")[0] for k in ours - theirs} == {"stages.3.blocks.1"}


def test_extract_is_pure(space):
    net = randomize_(build_supernet(space, img_size=64, num_classes=10)).train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    static = extract(net, space.named("efficientformerv2_s1"))
    assert static.training
    with torch.no_grad():
        for p in static.parameters():
            p.add_(1.0)
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_training_touches_only_the_active_slices():
    space = load_space("efficientformerv2-tiny")
    net = build_supernet(space, img_size=64, num_classes=10).train()
    arch = space.smallest()
    running_before = net.stages[0].blocks[0].mlp.fc1.bn.running_mean.clone()
    loss = net(torch.randn(4, 3, 64, 64), arch).logsumexp(dim=1).mean()
    loss.backward()
    fc1 = net.stages[0].blocks[0].mlp.fc1
    hidden, width = arch.hidden_widths[0][0], arch.widths[0]
    grad = fc1.conv.weight.grad
    assert grad[:hidden, :width].abs().sum() > 0
    assert grad[hidden:].abs().sum() == 0 and grad[:, width:].abs().sum() == 0
    running = fc1.bn.running_mean
    assert not torch.equal(running[:hidden], running_before[:hidden])
    assert torch.equal(running[hidden:], running_before[hidden:])
    # Slot 1 of stage 1 is not used by a depth-1 sub-network.
    assert net.stages[0].blocks[1].mlp.fc1.conv.weight.grad is None


@pytest.mark.parametrize("static_cache_size", [0, 4])
@pytest.mark.parametrize("space_name", ["efficientformerv2-tiny", "efficientformer-tiny", "swiftformer-tiny"])
def test_in_place_slice_gradients_equal_autograds(space_name, static_cache_size):
    """Slices add their gradients into ``.grad`` in place (issue 16): over sandwich steps, small-only
    steps and a step after ``optimizer.zero_grad()``, every gradient equals plain autograd slicing's,
    and a small sub-network's step reuses last step's gradient tensor instead of a new full-size one;
    with the elastic ops alone, or with the repeated sub-networks run as static models on the
    supernet's tensors (``SupernetBase.static_cache_size``)."""
    import copy
    import io

    from supernets.elastic_ops import enable_slice_gradients, leading

    space = load_space(space_name)
    torch.manual_seed(0)
    net = build_supernet(space, img_size=32, num_classes=10).train()
    plain = copy.deepcopy(net)  # a copy's parameters come without slice gradients
    enable_slice_gradients(net, min_numel=1)  # the tiny spaces' weights are all below the default size
    net.static_cache_size = static_cache_size
    rng = random.Random(0)
    archs = [space.largest(), space.smallest(), *(space.sample(rng) for _ in range(4))]
    x = torch.randn(4, 3, 32, 32)
    # the last two: a random sub-network's slices, then the smallest's, whose first write must clear what
    # the kept gradient holds beyond its own slice
    steps = [archs[:4], archs[1:3], [archs[4]], [archs[5], archs[0]], [archs[1]], [archs[1]], [archs[2]], [archs[1]]]
    for i, step in enumerate(steps):
        grads_before = {n: p.grad for n, p in net.named_parameters()}
        for model in (net, plain):
            if i == 4:  # an optimizer's zero_grad drops the gradients without zeroing them
                for p in model.parameters():
                    p.grad = None
            else:
                model.zero_grad(set_to_none=True)
            for arch in step:
                torch.manual_seed(i)
                model(x, arch).logsumexp(dim=1).mean().backward()
        for (name, p), q in zip(net.named_parameters(), plain.parameters()):
            assert (p.grad is None) == (q.grad is None), name
            if p.grad is not None:
                # Equal up to float rounding: a slice handed on contiguous and one handed on strided take
                # different matmul kernels for the same gradient, bit for bit equal on some CPUs and a few
                # ulps apart on others (seen: 3e-9 on a head gradient of 0.02, AMD EPYC, AVX2). A lost,
                # doubled or stale gradient is off by its own size.
                torch.testing.assert_close(
                    p.grad, q.grad, rtol=1e-5, atol=1e-8, msg=lambda m, name=name: f"{name}: {m}"
                )
        if i == 5:  # the smallest again: its sliced weights' gradients are last step's tensors, overwritten and reused
            reused = [n for n, p in net.named_parameters() if p.grad is not None and p.grad is grads_before[n]]
            assert len(reused) > 10
    fc = next(m for m in net.modules() if isinstance(m, torch.nn.Linear) and m.weight.grad is not None)
    assert fc.weight.grad.shape == fc.weight.shape
    # a pickled supernet loses the parameters' hooks, so it comes back slicing the plain autograd way
    buffer = io.BytesIO()
    torch.save(net, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    weight = next(p for p in loaded.parameters() if p.ndim == 4)
    assert leading(weight, 1).grad_fn.name() == "SliceBackward0"
    enable_slice_gradients(loaded, min_numel=1)
    assert leading(weight, 1).grad_fn.name() != "SliceBackward0"


def test_attention_bias_follows_the_construction_resolution(space):
    net = build_supernet(space, img_size=96, num_classes=10)
    stage3_mhsa = net.stages[2].blocks[-1].token_mixer
    stage4_mhsa = net.stages[3].blocks[-1].token_mixer
    # 96 -> stage 3 grid 6x6, stride attention on 3x3; stage 4 grid 3x3.
    assert stage3_mhsa.attention_biases.shape == (8, 9)
    assert stage4_mhsa.attention_biases.shape == (8, 9)
    assert net.stages[3].downsample.attn.attention_biases.shape == (8, 36)
    with pytest.raises(ValueError, match="built for a 3x3 token grid"):
        net(torch.randn(1, 3, 128, 128))


def test_distilled_training_returns_both_heads():
    space = load_space("efficientformerv2-tiny")
    net = build_supernet(space, img_size=32, num_classes=5, drop_path_rate=0.1).train()
    net.set_distilled_training(True)
    out, out_dist = net(torch.randn(2, 3, 32, 32), space.sample(random.Random(0)))
    assert out.shape == out_dist.shape == (2, 5)
    net.eval()
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 5)
