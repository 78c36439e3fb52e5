"""Neural architecture search with latency-aware slimming for mobile vision transformers."""

from nas.arch import ArchConfig
from nas.errors import NasError
from nas.latency.table import LatencyTable
from nas.space import SearchSpace, load_space

__all__ = ["ArchConfig", "LatencyTable", "NasError", "SearchSpace", "load_space"]
__version__ = "0.1.0"
