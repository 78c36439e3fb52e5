"""Shared test helpers."""

import torch
import torch.nn as nn


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
