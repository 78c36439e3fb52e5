"""Neural architecture search with latency-aware slimming for mobile vision transformers.

``from nas import ArchConfig, LatencyTable, NasError, SearchSpace, load_space``. The names are
loaded on first use (PEP 562), so importing a core module (``nas.core.*``, which the family modules
in ``supernets`` import) does not pull in the engine.
"""

from importlib import import_module
from typing import Any

__all__ = ["ArchConfig", "LatencyTable", "NasError", "SearchSpace", "load_space"]
__version__ = "0.1.0"

_WHERE = {
    "ArchConfig": "nas.core.arch",
    "NasError": "nas.core.errors",
    "SearchSpace": "nas.core.space",
    "LatencyTable": "nas.latency.table",
    "load_space": "nas.space_files",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'nas' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
