"""Exact parameter counts and MACs of any ArchConfig, and the Mobile Efficiency Score.

Counts are sums over the architecture's blocks (:mod:`nas.core.signature`). Each block is built once
as the static timm module on PyTorch's ``meta`` device (no memory, no compute) and measured there:
parameters by counting, MACs with ``torch.utils.flop_counter`` (multiply-accumulates of
convolutions and matrix products; element-wise ops are not counted, as in the papers' GMACs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
from torch.utils.flop_counter import FlopCounterMode

from nas.core.arch import ArchConfig
from nas.core.signature import BlockSignature
from nas.metrics.signatures import block_input_shape, block_signatures, build_block

#: MES reference units (EfficientFormerV2 §4.2.1): MobileNetV2 is about 3M parameters and 1 ms.
MES_SCORE = 100.0
MES_UNIT_PARAMS = 3e6
MES_UNIT_LATENCY_MS = 1.0
MES_ALPHA_SIZE = 0.5
MES_ALPHA_LATENCY = 1.0


def mes(params: float, latency_ms: float) -> float:
    """Mobile Efficiency Score = 100 * (params / 3M)^-0.5 * (latency / 1 ms)^-1 (§4.2.1)."""
    if params <= 0 or latency_ms <= 0:
        raise ValueError("MES needs a positive parameter count and latency")
    return (
        MES_SCORE
        * (params / MES_UNIT_PARAMS) ** -MES_ALPHA_SIZE
        * (latency_ms / MES_UNIT_LATENCY_MS) ** -MES_ALPHA_LATENCY
    )


@dataclass(frozen=True)
class BlockCost:
    """Parameters and MACs of one block."""

    params: int
    macs: int


@lru_cache(maxsize=65536)
def block_cost(family: str, sig: BlockSignature) -> BlockCost:
    """Parameters and MACs of one block (cached per signature)."""
    module = build_block(family, sig, device="meta").eval()
    params = sum(p.numel() for p in module.parameters())
    x = torch.empty(*block_input_shape(family, sig), device="meta")
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(x)
    return BlockCost(params=params, macs=counter.get_total_flops() // 2)


def count_params(arch: ArchConfig, img_size=224, num_classes: int = 1000) -> int:
    """Exact number of parameters, both classifier heads included (as timm counts them)."""
    return sum(block_cost(arch.family, s).params for s in block_signatures(arch, img_size, num_classes))


def count_macs(arch: ArchConfig, img_size=224, num_classes: int = 1000) -> int:
    """Multiply-accumulates of one image of ``img_size``."""
    return sum(block_cost(arch.family, s).macs for s in block_signatures(arch, img_size, num_classes))
