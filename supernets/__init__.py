"""Elastic supernets, one module per model family.

    from nas import load_space
    from supernets import build_supernet, extract
    net = build_supernet(load_space("efficientformerv2"), img_size=224, num_classes=1000)
    logits = net(x, arch)          # the sub-network's forward
    static = extract(net, arch)    # a timm model where timm can express the architecture

Each family module defines a :class:`~nas.core.family.Family` subclass, declared in the
``nas.families`` entry-point group of ``pyproject.toml`` (exactly as a third-party package declares
its own); the registry (:mod:`nas.core.families`) loads a family the first time it is asked for.
Importing this package loads no family. The registry's functions are re-exported here for
convenience. This package imports only :mod:`nas.core` from the engine.
"""

from __future__ import annotations

from nas.core.families import (
    build_static,
    build_supernet,
    extract,
    family_names,
    family_rules,
    get_family,
    register_family,
)
from nas.core.family import Family

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
