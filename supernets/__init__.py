"""Elastic supernets, one module per model family, and extraction of static sub-networks.

    from nas import load_space
    from supernets import build_supernet, extract
    net = build_supernet(load_space("efficientformerv2"), img_size=224, num_classes=1000)
    logits = net(x, arch)          # the sub-network's forward
    static = extract(net, arch)    # a timm model where timm can express the architecture
"""

from __future__ import annotations

import importlib
from types import ModuleType

import torch.nn as nn

from nas.arch import ArchConfig
from nas.errors import NasError
from nas.space import FAMILIES, SearchSpace, load_space

__all__ = ["build_supernet", "extract", "build_static", "family_module"]


def family_module(family: str) -> ModuleType:
    """The module of ``supernets`` that implements ``family``."""
    if family not in FAMILIES:
        raise NasError(f"unknown family {family!r}; known families: {', '.join(FAMILIES)}")
    return importlib.import_module(f"supernets.{family}")


def build_supernet(space: SearchSpace | str, img_size=224, num_classes: int = 1000, **kwargs) -> nn.Module:
    """The weight-sharing supernet of ``space`` for inputs of ``img_size`` (the attention bias
    tables are built for that resolution)."""
    space = load_space(space) if not isinstance(space, SearchSpace) else space
    module = family_module(space.family)
    return module.Supernet(space, img_size=img_size, num_classes=num_classes, **kwargs)


def extract(net: nn.Module, arch: ArchConfig) -> nn.Module:
    """The static model of ``arch`` carrying the supernet's weights; ``net`` is not changed."""
    return family_module(net.space.family).extract(net, arch)


def build_static(arch: ArchConfig, img_size=224, num_classes: int = 1000, **kwargs) -> nn.Module:
    """A freshly initialised static model of ``arch`` (for training from scratch)."""
    return family_module(arch.family).build_static(arch, img_size=img_size, num_classes=num_classes, **kwargs)
