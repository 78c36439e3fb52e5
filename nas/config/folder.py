"""The ``search_configs`` folder and the spaces it ships, by name.

Light on purpose (no torch, no family code): the command line lists the shipped spaces and recipes
in its help before any of the engine is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path


def config_root() -> Path:
    """The ``search_configs`` folder: ``$NAS_CONFIG_DIR`` or the one beside the ``nas`` package."""
    env = os.environ.get("NAS_CONFIG_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "search_configs"


def available_spaces() -> list[str]:
    """The names of the shipped spaces (files in ``search_configs/spaces/``)."""
    return sorted(p.stem for p in (config_root() / "spaces").glob("*.yaml"))
