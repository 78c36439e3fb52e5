"""Latency tables: measured on local devices, predicted for phones, imported from real phones."""

from nas.latency.devices import DEVICES, Device, get_device
from nas.latency.table import LatencyTable, TableHeader, table_path, tables_root

__all__ = ["DEVICES", "Device", "LatencyTable", "TableHeader", "get_device", "table_path", "tables_root"]
