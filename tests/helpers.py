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
