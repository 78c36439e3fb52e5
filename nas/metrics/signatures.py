"""The priced blocks of a network, through its family (:func:`nas.core.families.get_family`): the unit of
parameter, MAC and latency accounting, of latency tables and of per-block export."""

from __future__ import annotations

import torch
import torch.nn as nn

from nas.core.arch import ArchConfig
from nas.core.families import get_family
from nas.core.signature import BlockSignature
from nas.core.space import SearchSpace


def block_signatures(arch: ArchConfig, img_size=224, num_classes: int = 1000) -> list[BlockSignature]:
    """The blocks of ``arch``, in order; their costs add up to the network's."""
    return get_family(arch.family).block_signatures(arch, img_size=img_size, num_classes=num_classes)


def reachable_signatures(space: SearchSpace, img_size, num_classes: int = 1000) -> list[BlockSignature]:
    """Every block some sub-network of ``space`` contains, sorted (a latency table's rows)."""
    return sorted(get_family(space.family).reachable_signatures(space, img_size=img_size, num_classes=num_classes))


def build_block(family: str, sig: BlockSignature, device=None) -> nn.Module:
    """Block ``sig`` of ``family`` as a module of its own (``device="meta"`` to count it for free)."""
    return get_family(family).build_block(sig, device=device)


def block_input_shape(family: str, sig: BlockSignature) -> tuple[int, ...]:
    """The shape of one input of block ``sig`` (batch 1)."""
    return get_family(family).input_shape(sig)


def block_input(family: str, sig: BlockSignature, device="cpu") -> torch.Tensor:
    """A random input for block ``sig`` (to time or trace it)."""
    return torch.randn(*block_input_shape(family, sig), device=device)
