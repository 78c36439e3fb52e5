"""Latency tables: measured on local devices, predicted for phones, imported from real phones.

``from nas.latency import DEVICES, LatencyTable, get_device``. The names are loaded on first use
(PEP 562), so the command line reads :data:`DEVICES` (``nas.latency.devices``) without loading the
tables' engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nas.core.lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
