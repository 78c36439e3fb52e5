"""A sub-network the supernet runs again runs as its static model on the supernet's tensors
(``supernets.elastic_ops.SharedWeightStatic``, issue 16): same outputs, gradients and BatchNorm
statistics as the elastic forward, and only where that holds."""

import copy
import io
import random

import pytest
import torch

from nas import load_space
from supernets import build_supernet
from supernets.elastic_ops import enable_slice_gradients, slice_gradients_enabled

SPACES = ["efficientformerv2-tiny", "efficientformer-tiny", "swiftformer-tiny"]


def _pair(space_name: str, **kwargs):
    """A supernet and an exact copy that always takes the elastic forward."""
    space = load_space(space_name)
    torch.manual_seed(0)
    net = build_supernet(space, img_size=32, num_classes=10, **kwargs).train()
    elastic = copy.deepcopy(net)
    enable_slice_gradients(elastic)  # a copy comes with slice gradients off
    elastic.static_cache_size = 0
    return space, net, elastic


def _step(model, x, archs, seed: int) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # EfficientFormer's Gumbel draws (arch None) and dropout
    loss = 0
    for arch in archs:
        out = model(x, arch) if arch is not None else model(x)
        if isinstance(out, tuple):
            out = out[0] + out[1]
        loss = loss + out.logsumexp(dim=1).mean()
    loss.backward()
    return loss.detach()


@pytest.mark.parametrize("min_numel", [None, 1])
@pytest.mark.parametrize("space_name", SPACES)
def test_repeated_subnetwork_matches_the_elastic_forward(space_name, min_numel):
    """Sandwich steps (largest, smallest, a random one that repeats every other step), with slice
    gradient states on the large weights only (the default) or on all: every loss, gradient and
    BatchNorm statistic matches the elastic forward's over steps with updates in between, and the
    repeated sub-networks did run as static models."""
    space, net, elastic = _pair(space_name)
    if min_numel is not None:
        enable_slice_gradients(net, min_numel=min_numel)
        enable_slice_gradients(elastic, min_numel=min_numel)
    x = torch.randn(4, 3, 32, 32)
    smallest, other = space.smallest(), space.sample(random.Random(1))
    for step in range(4):
        archs = [None, smallest, other if step % 2 else space.sample(random.Random(10 + step))]
        losses = [_step(model, x, archs, step) for model in (net, elastic)]
        assert torch.allclose(losses[0], losses[1], atol=1e-6), step
        for (name, p), q in zip(net.named_parameters(), elastic.parameters()):
            assert (p.grad is None) == (q.grad is None), name
            if p.grad is not None:
                assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-5), name
        for (name, a), b in zip(net.named_buffers(), elastic.buffers()):
            assert torch.allclose(a.float(), b.float(), atol=1e-6), name
        with torch.no_grad():
            for p, q in zip(net.parameters(), elastic.parameters()):
                if p.grad is not None:
                    p.sub_(0.1 * p.grad)
                    q.sub_(0.1 * q.grad)
    assert set(net._statics.built) == {smallest, other}
    assert not elastic._statics.built


def test_distillation_output_and_cache_rules():
    """The static model returns both heads in distilled training; it is not used in eval mode, without
    gradients, with drop path (the static model's rates follow its own depth) or with slice gradients
    off (DDP); ``static_cache_size`` bounds it; moving the supernet or loading weights empties it."""
    space, net, elastic = _pair("efficientformerv2-tiny")
    for model in (net, elastic):
        model.set_distilled_training(True)
    x = torch.randn(2, 3, 32, 32)
    arch = space.smallest()
    for _ in range(2):
        outs = [model(x, arch) for model in (net, elastic)]
    assert isinstance(outs[0], tuple) and all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*outs))
    assert list(net._statics.built) == [arch]

    net._statics.clear()
    net.eval()
    net(x, arch), net(x, arch)
    net.train()
    with torch.no_grad():
        net(x, arch), net(x, arch)
    enable_slice_gradients(net, False)
    assert not slice_gradients_enabled(net)
    net(x, arch), net(x, arch)
    assert not net._statics.built
    enable_slice_gradients(net)

    _, dropped, _ = _pair("efficientformerv2-tiny", drop_path_rate=0.1)
    dropped(x, arch), dropped(x, arch)
    assert not dropped._statics.built

    net.static_cache_size = 2
    archs = [space.sample(random.Random(i)) for i in range(3)]
    for a in archs + archs:
        net(x, a)
    assert list(net._statics.built) == archs[1:]  # the least recently used went
    net.to(torch.float64)
    assert not net._statics.built
    net.to(torch.float32)
    for _ in range(2):
        net(x, arch)
    net.load_state_dict(elastic.state_dict())
    assert not net._statics.built


def test_busy_static_model_falls_back_and_copies_start_empty():
    """A second caller while a static model runs (another thread) takes the elastic forward; a copy
    or a pickled supernet starts without static models and with slice gradients off."""
    space, net, elastic = _pair("swiftformer-tiny")
    x = torch.randn(2, 3, 32, 32)
    arch = space.smallest()
    net(x, arch), net(x, arch)
    runner = net._statics.built[arch]
    with runner.lock:
        busy = net(x, arch)
    assert torch.allclose(busy, elastic(x, arch), atol=1e-6)

    for clone in (copy.deepcopy(net), _pickled(net)):
        assert not clone._statics.built and not slice_gradients_enabled(clone)
        assert torch.allclose(clone(x, arch), busy, atol=1e-6)


def _pickled(net):
    buffer = io.BytesIO()
    torch.save(net, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)
