"""Latency tables: one file per (device, space, input size), entries keyed by block signature.

``LatencyTable.latency(arch)`` is the one code path that prices an architecture: the sum of its
blocks' entries. A table says where its numbers come from (``source``: measured, predicted or
imported), how (runtime, dtype, batch, threads, tool versions, date) and how wrong they are
(``error``), and never hides a predicted number as a measured one.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nas import __version__
from nas.config.spaces import config_root, load_space
from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.signature import BlockSignature
from nas.core.space import SearchSpace
from nas.core.typed_yaml import from_mapping
from nas.latency.devices import get_device
from nas.metrics.signatures import block_signatures

FORMAT = "nas-latency-table/1"
SOURCES = ("measured", "predicted", "imported")


def tables_root() -> Path:
    """``$NAS_LATENCY_DIR`` or the ``latency_tables`` folder beside ``search_configs``."""
    env = os.environ.get("NAS_LATENCY_DIR")
    return Path(env) if env else config_root().parent / "latency_tables"


def table_path(device: str, space_name: str, img_size: int) -> Path:
    """Default file of a table: ``tables_root()/DEVICE/SPACE-IMG_SIZE.json``."""
    return tables_root() / device / f"{space_name}-{img_size}.json"


def table_sizes(device: str, space_name: str) -> list[int]:
    """Input sizes at which ``device`` has a table of ``space_name`` in the default place, smallest first."""
    pattern = re.compile(rf"{re.escape(space_name)}-(\d+)\.json")
    folder = tables_root() / device
    found = (pattern.fullmatch(p.name) for p in folder.glob("*.json")) if folder.is_dir() else ()
    return sorted(int(m.group(1)) for m in found if m)


def sizes_words(device: str, space_name: str) -> str:
    """``tables of it exist at 224, 64 px`` (or ``no table of it exists at any size``), for error messages."""
    sizes = table_sizes(device, space_name)
    if not sizes:
        return f"{device} has no table of {space_name} at any size"
    return f"{device} has tables of {space_name} at {', '.join(map(str, sizes))} px"


def tool_versions() -> dict[str, str]:
    """Versions of nas, torch and timm, recorded in a table's header."""
    import timm
    import torch

    return {"nas": __version__, "torch": torch.__version__, "timm": timm.__version__}


def today() -> str:
    """Today's date as ``YYYY-MM-DD``."""
    return datetime.date.today().isoformat()


@dataclass(frozen=True)
class TableHeader:
    """What a latency table prices (device, space, input size) and how: source, runtime, dtype, batch,
    its error and the method its entries were derived by."""

    device: str
    space: str
    family: str
    img_size: int
    num_classes: int
    source: str  # measured | predicted | imported
    runtime: str
    dtype: str
    batch: int
    date: str
    tool_versions: dict[str, str] = field(default_factory=dict)
    threads: int | None = None
    #: How wrong the numbers are: metric name, value(s) and what they were measured on.
    error: dict[str, Any] = field(default_factory=dict)
    #: How entries were derived (calibration of measured tables, the fitted model of predicted ones).
    method: dict[str, Any] = field(default_factory=dict)
    complete: bool = True
    notes: str = ""

    @classmethod
    def new(
        cls, device: str, space: SearchSpace, img_size: int, num_classes: int, source: str, **fields: Any
    ) -> "TableHeader":
        """The header of a table of ``space`` on ``device`` made today, at batch 1 with the device's runtime
        and dtype, and this installation's tool versions unless ``fields`` give others; ``fields`` fill the
        rest (threads, error, method, complete, notes)."""
        spec = get_device(device)
        if "tool_versions" not in fields:
            fields["tool_versions"] = tool_versions()
        return cls(
            device=device,
            space=space.name,
            family=space.family,
            img_size=img_size,
            num_classes=num_classes,
            source=source,
            runtime=spec.runtime,
            dtype=spec.dtype,
            batch=1,
            date=today(),
            **fields,
        )


def _build_command(device: str, space: str, img_size: int) -> str:
    spec = get_device(device)
    if spec.kind == "phone" and spec.published is None:  # nothing to predict from: timed on the phone only
        return (
            f"nas export-blocks --device {device} --space {space} --img-size {img_size} --out DIR`, time DIR on "
            "the phone and `nas import-table"
        )
    return f"nas build-table --device {device} --space {space} --img-size {img_size}"


class LatencyTable:
    """Per-block latencies (ms) of one device, space and input size."""

    def __init__(self, header: TableHeader, entries: dict[str, float], path: Path | None = None):
        if header.source not in SOURCES:
            raise NasError(f"table source {header.source!r} is not one of {', '.join(SOURCES)}")
        self.header = header
        self.entries = dict(entries)
        self.path = path

    # --- lookup -------------------------------------------------------------------------------

    def block_ms(self, sig: BlockSignature) -> float:
        key = sig.key()
        try:
            return self.entries[key]
        except KeyError:
            where = f" ({self.path})" if self.path else ""
            raise NasError(
                f"latency table for {self.header.device}/{self.header.space} at {self.header.img_size}{where} has no "
                f"entry for block {key}; build it with "
                f"`{_build_command(self.header.device, self.header.space, self.header.img_size)}`"
            ) from None

    def latency(self, arch: ArchConfig) -> float:
        """Latency of ``arch`` in ms: the sum of its blocks' entries."""

        if arch.family != self.header.family:
            raise NasError(f"arch family {arch.family!r} does not match the table's {self.header.family!r}")
        sigs = block_signatures(arch, self.header.img_size, self.header.num_classes)
        return float(sum(self.block_ms(s) for s in sigs))

    @property
    def source(self) -> str:
        return self.header.source

    def describe_source(self) -> str:
        """One line a report prints next to a latency: where it comes from and how wrong it is."""
        h = self.header
        err = h.error
        text = f"{h.source} on {h.device} ({h.runtime}, {h.dtype}, batch {h.batch}"
        text += f", {h.threads} threads)" if h.threads else ")"
        if err.get("metric"):
            text += f"; {err['metric']}: {100 * err['value']:.1f}%"
            if "signed_mean" in err:
                text += f" (signed {100 * err['signed_mean']:+.1f}%)"
        model = err.get("leave_one_model_out")
        if isinstance(model, dict) and "mean" in model:
            text += f"; leave-one-model-out {100 * model['mean']:.1f}%"
        return text

    def interval(self, ms: float) -> tuple[float, float] | None:
        """The prediction interval of a latency ``ms`` priced by this table (``None`` where the table
        has none): its bounds are ``ms`` times the factors in the header's ``error.interval``."""
        spec = self.header.error.get("interval")
        if not isinstance(spec, dict) or "low_factor" not in spec:
            return None
        return ms * float(spec["low_factor"]), ms * float(spec["high_factor"])

    @property
    def interval_level(self) -> float | None:
        spec = self.header.error.get("interval")
        return float(spec["level"]) if isinstance(spec, dict) and "level" in spec else None

    def format_latency(self, ms: float, digits: int = 3, unit: bool = True) -> str:
        """``0.930 ms (0.812–1.061, 80%)``: a latency with its interval where the table has one."""
        bounds = self.interval(ms)
        text = f"{ms:.{digits}f}" + (" ms" if unit else "")
        if bounds is not None:
            text += f" ({bounds[0]:.{digits}f}–{bounds[1]:.{digits}f}, {100 * self.interval_level:.0f}%)"
        return text

    # --- files --------------------------------------------------------------------------------

    def to_json(self) -> str:
        entries = dict(sorted(self.entries.items()))
        return json.dumps({"format": FORMAT, "header": asdict(self.header), "entries": entries}, indent=1) + "\n"

    def save(self, path: str | os.PathLike | None = None) -> Path:
        path = Path(path) if path else table_path(self.header.device, self.header.space, self.header.img_size)
        write_text_atomic(path, self.to_json())
        self.path = path
        return path

    @classmethod
    def read(cls, path: str | os.PathLike) -> "LatencyTable":
        """Read a table file; a corrupt or foreign file is a one-line error naming it."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise NasError(f"{path}: latency table not found") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise NasError(f"{path}: corrupt latency table ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise NasError(f"{path}: not a latency table (expected format {FORMAT!r})")
        header = from_mapping(TableHeader, data.get("header"), f"{path}: header")
        entries = data.get("entries")
        if not isinstance(entries, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in entries.values()
        ):
            raise NasError(f"{path}: entries must map block keys to non-negative milliseconds")
        for key in entries:
            try:
                BlockSignature.from_key(key)
            except ValueError:
                raise NasError(f"{path}: malformed block key {key!r}") from None
        return cls(header, {k: float(v) for k, v in entries.items()}, path)

    @classmethod
    def load(
        cls, device: str, space: SearchSpace | str, img_size: int = 224, path: str | os.PathLike | None = None
    ) -> "LatencyTable":
        """The table of ``device`` for ``space`` at ``img_size`` (or the file at ``path``),
        checked against what was asked for."""
        get_device(device)
        space = load_space(space)
        if path is None:
            path = table_path(device, space.name, img_size)
            if not path.exists():
                raise NasError(
                    f"no latency table for device {device}, space {space.name} at {img_size}x{img_size} "
                    f"(looked for {path}; {sizes_words(device, space.name)}); "
                    f"build it with `{_build_command(device, space.name, img_size)}`"
                )
        table = cls.read(path)
        h = table.header
        mismatch = [
            f"{k} {got!r} (asked {want!r})"
            for k, got, want in (
                ("device", h.device, device),
                ("space", h.space, space.name),
                ("img_size", h.img_size, img_size),
            )
            if got != want
        ]
        if mismatch:
            raise NasError(f"{path}: table does not match: {', '.join(mismatch)}")
        if not h.complete:
            raise NasError(
                f"{path}: table is incomplete (an interrupted build); finish it with "
                f"`{_build_command(device, space.name, img_size)} --resume`"
            )
        return table
