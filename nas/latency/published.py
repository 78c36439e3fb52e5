"""Published whole-model latencies (``latency_tables/published/``): the facts the cost models are fitted to."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from nas.core.errors import NasError
from nas.latency.devices import get_device
from nas.latency.graphs import timm_network
from nas.latency.opcount import OpCost
from nas.latency.table import tables_root


@dataclass(frozen=True)
class Fact:
    """One published whole-model latency."""

    label: str
    latency_ms: float
    source: str
    ops: tuple[OpCost, ...] = field(repr=False, compare=False)
    campaign: str = ""
    family: str = ""


def published_csv() -> Path:
    """The author-reported latencies the cost models are fitted to."""
    return tables_root() / "published" / "published_latency.csv"


def timm_family(model_name: str, families) -> str | None:
    """The family of a timm model among ``families``: the published CSV's, else the longest family
    name the model's name starts with (``efficientformerv2_s0`` -> ``efficientformerv2``)."""
    for row in _csv_rows():
        if row.get("timm_model") == model_name and row.get("family") in families:
            return row["family"]
    matches = [f for f in families if model_name.startswith(f)]
    return max(matches, key=len) if matches else None


def _csv_rows() -> list[dict]:
    path = published_csv()
    try:
        return list(csv.DictReader(path.open(encoding="utf-8")))
    except FileNotFoundError:
        raise NasError(f"{path}: published latencies not found") from None


def facts_of(label: str, use: str = "fit") -> list[Fact]:
    """The published latencies of a CSV device label (``iphone12``, ``pixel6-cpu``...) marked
    ``use`` (``fit`` or ``test``) whose models timm can build."""
    facts = []
    for row in _csv_rows():
        if row.get("device") != label or not row.get("timm_model") or row.get("use", "fit") != use:
            continue
        facts.append(
            Fact(
                row["timm_model"],
                float(row["latency_ms"]),
                f"{row['campaign']} ({row['paper_model']})",
                timm_network(row["timm_model"], int(row.get("img_size") or 224)).ops,
                campaign=f"{label}/{row['campaign']}",
                family=row.get("family") or row["timm_model"],
            )
        )
    return facts


def published_facts(device: str, use: str = "fit") -> list[Fact]:
    """The published latencies of ``device``'s chip (every campaign) whose models timm can build."""
    spec = get_device(device)
    if spec.published is None:
        how = (
            f"it is measured here (nas build-table --device {device})"
            if spec.kind == "local"
            else f"time it on the phone: nas export-blocks --device {device} ..., then nas import-table"
        )
        raise NasError(f"device {device} has no published measurements to predict from; {how}")
    facts = facts_of(spec.published, use)
    if use == "fit" and len(facts) < 4:
        raise NasError(f"{published_csv()}: only {len(facts)} usable published latencies for {device}; need at least 4")
    return facts
