"""Neural architecture search with latency-aware slimming for mobile vision transformers.

``from nas import ArchConfig, LatencyTable, NasError, SearchSpace, load_space``. The names are
loaded on first use (PEP 562), so importing a core module (``nas.core.*``, which the family modules
in ``supernets`` import) or the command line's parsers (``nas --help``) does not pull in the engine.
"""

from typing import TYPE_CHECKING

from nas.core.lazy import lazy_exports

if TYPE_CHECKING:
    from nas.config.spaces import load_space
    from nas.core.arch import ArchConfig
    from nas.core.errors import NasError
    from nas.core.space import SearchSpace
    from nas.latency.table import LatencyTable

__all__ = ["ArchConfig", "LatencyTable", "NasError", "SearchSpace", "load_space"]
__version__ = "0.1.0"

_WHERE = {
    "ArchConfig": "nas.core.arch",
    "NasError": "nas.core.errors",
    "SearchSpace": "nas.core.space",
    "LatencyTable": "nas.latency.table",
    "load_space": "nas.config.spaces",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
