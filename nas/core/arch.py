"""ArchConfig: one concrete sub-network of a search space.

Frozen and hashable, with integer channel counts (ratios do not round-trip through YAML), a
canonical form (one entry per stage, one hidden width per existing block, nothing padded), a YAML
round-trip and a short content digest that names it in caches and run folders.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.typed_yaml import dump_yaml, from_mapping, read_yaml

#: EfficientFormer's per-position choices (§4.2, eq. 7): 4D pooling block, 3D attention block, identity.
BLOCK_TYPES = ("mb4d", "mb3d", "skip")


@dataclass(frozen=True)
class ArchConfig:
    """A sub-network, as plain integers.

    Attributes:
        family: model family, e.g. ``"efficientformerv2"``.
        depths: blocks per stage.
        widths: output channels per stage.
        attention: per stage, how many of the stage's last blocks carry attention
            (EfficientFormerV2's MHSA blocks).
        hidden_widths: per stage, the FFN hidden width of every block, in block order.
        block_types: families with per-position block choice only (EfficientFormer): per stage,
            the choice at every supernet position
            (``mb4d``, ``mb3d`` or ``skip``); ``depths`` and ``attention`` count its kept and
            ``mb3d`` entries.
    """

    family: str
    depths: tuple[int, ...]
    widths: tuple[int, ...]
    attention: tuple[int, ...] = ()
    hidden_widths: tuple[tuple[int, ...], ...] = ()
    block_types: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        # Whether the family exists is the registry's to say (nas.core.families.get_family): the core
        # knows no family by name.
        if not isinstance(self.family, str) or not self.family.isidentifier():
            raise NasError(f"family: give a family name (a word such as efficientformerv2), got {self.family!r}")
        # Accept lists from Python callers; store tuples so the config stays hashable.
        object.__setattr__(self, "depths", tuple(int(d) for d in self.depths))
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))
        object.__setattr__(self, "attention", tuple(int(a) for a in self.attention))
        object.__setattr__(self, "hidden_widths", tuple(tuple(int(h) for h in s) for s in self.hidden_widths))
        object.__setattr__(self, "block_types", tuple(tuple(str(b) for b in s) for s in self.block_types))
        n = len(self.depths)
        if len(self.widths) != n:
            raise NasError(f"widths: {len(self.widths)} entries for {n} stages (depths has {n})")
        if self.attention and len(self.attention) != n:
            raise NasError(f"attention: {len(self.attention)} entries for {n} stages")
        if self.hidden_widths:
            if len(self.hidden_widths) != n:
                raise NasError(f"hidden_widths: {len(self.hidden_widths)} stages, expected {n}")
            for s, (depth, hidden) in enumerate(zip(self.depths, self.hidden_widths)):
                if len(hidden) != depth:
                    raise NasError(
                        f"hidden_widths[{s}] (stage {s + 1}): {len(hidden)} entries for depth {depth}; "
                        "give one hidden width per block"
                    )
        if self.block_types:
            if len(self.block_types) != n:
                raise NasError(f"block_types: {len(self.block_types)} stages, expected {n}")
            for s, types in enumerate(self.block_types):
                bad = [b for b in types if b not in BLOCK_TYPES]
                if bad:
                    raise NasError(
                        f"block_types[{s}] (stage {s + 1}): unknown block type {bad[0]!r}; "
                        f"allowed: {', '.join(BLOCK_TYPES)}"
                    )
                kept = sum(b != "skip" for b in types)
                if kept != self.depths[s]:
                    raise NasError(
                        f"block_types[{s}] (stage {s + 1}) keeps {kept} blocks but depths[{s}] is {self.depths[s]}"
                    )
                if self.attention and types.count("mb3d") != self.attention[s]:
                    raise NasError(
                        f"block_types[{s}] (stage {s + 1}) has {types.count('mb3d')} mb3d blocks but "
                        f"attention[{s}] is {self.attention[s]}"
                    )

    # --- serialisation -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain, canonical dict (lists, no empty optional fields), in a fixed key order."""
        out: dict[str, Any] = {"family": self.family, "depths": list(self.depths), "widths": list(self.widths)}
        if self.attention:
            out["attention"] = list(self.attention)
        if self.hidden_widths:
            out["hidden_widths"] = [list(h) for h in self.hidden_widths]
        if self.block_types:
            out["block_types"] = [list(b) for b in self.block_types]
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "arch") -> "ArchConfig":
        """Build from a parsed mapping; unknown keys and wrong types are one-line errors."""
        try:
            return from_mapping(cls, data, where)
        except NasError as exc:
            msg = str(exc)
            raise NasError(msg if msg.startswith(where) else f"{where}: {msg}") from None

    def to_yaml(self) -> str:
        return f"# ArchConfig {self.digest}; used by nas profile / nas train / nas export\n" + dump_yaml(self.to_dict())

    def save(self, path: str | os.PathLike) -> Path:
        """Write the YAML atomically (temporary file, then rename)."""
        path = Path(path)
        write_text_atomic(path, self.to_yaml())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ArchConfig":
        """Read an arch YAML; errors name the file and the field."""
        return cls.from_dict(read_yaml(path, "arch YAML"), where=str(path))

    # --- identity ------------------------------------------------------------------------------

    @property
    def digest(self) -> str:
        """12 hex characters of the SHA-256 of the canonical JSON: stable across runs and machines."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def num_stages(self) -> int:
        return len(self.depths)

    def replace(self, **changes: Any) -> "ArchConfig":
        return dataclasses.replace(self, **changes)

    def short(self) -> str:
        """A compact one-line description for logs and tables."""
        att = f" a{'-'.join(map(str, self.attention))}" if self.attention else ""
        return f"d{'-'.join(map(str, self.depths))} w{'-'.join(map(str, self.widths))}{att}"
