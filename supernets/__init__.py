"""Elastic supernets, one module per model family, and the registry of families.

    from nas import load_space
    from supernets import build_supernet, extract
    net = build_supernet(load_space("efficientformerv2"), img_size=224, num_classes=1000)
    logits = net(x, arch)          # the sub-network's forward
    static = extract(net, arch)    # a timm model where timm can express the architecture

Every module of this package that defines a family registers it when imported (at the end of its
file: ``register_family(MyFamily())``); this package imports them all, so a new family is one new
file here. A family defined elsewhere (a test, a user's package) registers itself the same way;
packages may also name theirs in the ``nas.families`` entry-point group, loaded here. This
package imports only :mod:`nas.core` from the engine.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from importlib.metadata import entry_points

import torch.nn as nn

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.family import Family, SpaceRules
from nas.core.space import SearchSpace
from supernets.elastic_ops import enable_slice_gradients

__all__ = [
    "Family",
    "build_static",
    "build_supernet",
    "extract",
    "family_names",
    "family_rules",
    "get_family",
    "register_family",
]

log = logging.getLogger(__name__)

# The registry, like timm's model registry: filled once at import by the family modules.
_FAMILIES: dict[str, Family] = {}
_NOT_FAMILIES = {"base", "elastic_ops"}  # this package's shared modules


def register_family(family: Family) -> Family:
    """Make ``family`` known by its name (a family registered again under its name replaces the
    old one, so a module may be re-imported)."""
    if not isinstance(family, Family):
        raise TypeError(f"register_family needs a nas.core.family.Family, got {type(family).__name__}")
    _FAMILIES[family.name] = family
    return family


def family_names() -> list[str]:
    """The registered families' names, sorted."""
    return sorted(_FAMILIES)


def get_family(name: str) -> Family:
    """The registered family ``name``; an unknown one is a :class:`NasError` that lists the known."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise NasError(f"unknown family {name!r}; known families: {', '.join(family_names())}") from None


def family_rules(name: str) -> SpaceRules:
    """The space rules of family ``name`` (what :meth:`SearchSpace.from_file` checks against)."""
    return get_family(name).rules


def build_supernet(space: SearchSpace, img_size=224, num_classes: int = 1000, **kwargs) -> nn.Module:
    """The weight-sharing supernet of ``space`` for inputs of ``img_size`` (the attention bias
    tables are built for that resolution). Its parameters get in-place slice gradients
    (:func:`supernets.elastic_ops.enable_slice_gradients`)."""
    net = get_family(space.family).build_supernet(space, img_size=img_size, num_classes=num_classes, **kwargs)
    enable_slice_gradients(net)
    return net


def extract(net: nn.Module, arch: ArchConfig) -> nn.Module:
    """The static model of ``arch`` carrying the supernet's weights; ``net`` is not changed."""
    return get_family(net.space.family).extract(net, arch)


def build_static(arch: ArchConfig, img_size=224, num_classes: int = 1000, **kwargs) -> nn.Module:
    """A freshly initialised static model of ``arch`` (for training from scratch)."""
    return get_family(arch.family).build_static(arch, img_size=img_size, num_classes=num_classes, **kwargs)


def _import_families() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name not in _NOT_FAMILIES:
            importlib.import_module(f"{__name__}.{module.name}")
    for entry in entry_points(group="nas.families"):
        try:
            entry.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the engine
            log.warning("family plugin %s could not be loaded: %s", entry.value, exc)


_import_families()
