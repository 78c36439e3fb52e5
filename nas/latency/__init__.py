"""Latency tables: measured on local devices, predicted for phones, imported from real phones.

``from nas.latency import DEVICES, LatencyTable, get_device``. The names are loaded on first use
(PEP 562), so the command line reads :data:`DEVICES` (``nas.latency.devices``) without loading the
tables' engine.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nas.latency.devices import DEVICES, Device, get_device
    from nas.latency.table import LatencyTable, TableHeader, table_path, tables_root

__all__ = ["DEVICES", "Device", "LatencyTable", "TableHeader", "get_device", "table_path", "tables_root"]

_WHERE = {
    "DEVICES": "nas.latency.devices",
    "Device": "nas.latency.devices",
    "get_device": "nas.latency.devices",
    "LatencyTable": "nas.latency.table",
    "TableHeader": "nas.latency.table",
    "table_path": "nas.latency.table",
    "tables_root": "nas.latency.table",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'nas.latency' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
