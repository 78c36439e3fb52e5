"""The registry of model families, and the helpers that reach a network through its family.

The engine names no family: it asks this registry. Families are declared in the ``nas.families``
entry-point group and loaded the first time they are asked for, so listing them (``nas --help``)
loads neither torch nor a family module. The built-in families declare themselves in
``pyproject.toml`` exactly as a third-party package would::

    [project.entry-points."nas.families"]
    efficientformerv2 = "supernets.efficientformerv2:EfficientFormerV2Family"

An entry point names a :class:`~nas.core.family.Family` subclass (instantiated once), an instance,
or a module that registers its family when imported. A family defined in a script or a test
registers itself with :func:`register_family`. Like timm's model registry, the registry is filled
once and then only read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nas.core.family import Family
from nas.core.registry import LazyRegistry
from nas.core.space import SpaceRules

if TYPE_CHECKING:  # for annotations only: the core never imports torch
    import torch.nn as nn

    from nas.core.arch import ArchConfig
    from nas.core.space import SearchSpace

#: The entry-point group a package declares its families in.
ENTRY_POINT_GROUP = "nas.families"

_FAMILIES: LazyRegistry[Family] = LazyRegistry(
    "family",
    ENTRY_POINT_GROUP,
    accepts=lambda obj: isinstance(obj, Family),
    refuse=lambda obj: f"register_family needs a nas.core.family.Family, got {type(obj).__name__}",
    unknown="unknown family {name}; known families: {names}",
)


def register_family(family: Family) -> Family:
    """Make ``family`` known by its name (a family registered again under its name replaces the
    old one, so a module may be re-imported)."""
    return _FAMILIES.register(family)


def family_names() -> list[str]:
    """The known families' names, sorted: those registered and those declared (not loaded to list them)."""
    return _FAMILIES.names()


def get_family(name: str) -> Family:
    """The family ``name``, loaded on first use; an unknown one is a :class:`NasError` that lists the known."""
    return _FAMILIES.get(name)


def family_rules(name: str) -> SpaceRules:
    """The space rules of family ``name`` (what a space file is checked against)."""
    return get_family(name).rules


def build_supernet(space: SearchSpace, img_size: Any = 224, num_classes: int = 1000, **kwargs: Any) -> nn.Module:
    """The weight-sharing supernet of ``space`` for inputs of ``img_size`` (the attention bias
    tables are built for that resolution); ``net(x, arch)`` runs a sub-network."""
    return get_family(space.family).build_supernet(space, img_size=img_size, num_classes=num_classes, **kwargs)


def extract(net: nn.Module, arch: ArchConfig) -> nn.Module:
    """The static model of ``arch`` carrying the supernet's weights; ``net`` is not changed."""
    return get_family(net.space.family).extract(net, arch)


def build_static(arch: ArchConfig, img_size: Any = 224, num_classes: int = 1000, **kwargs: Any) -> nn.Module:
    """A freshly initialised static model of ``arch`` (for training from scratch)."""
    return get_family(arch.family).build_static(arch, img_size=img_size, num_classes=num_classes, **kwargs)
