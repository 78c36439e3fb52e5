"""A shard folder's layout on disk (``nas data pack`` writes it, :mod:`nas.data.pack`): its index
``shards.json`` (:class:`ShardIndex`) and its member table ``members.npz`` (:class:`MemberTable`).

``shards.json`` lists the class names, each shard's name, sample count and size, the member table's
size and the source folder's fingerprint. Each sample of a shard is the original encoded image (member
``<key>.<ext>``, not re-encoded) and its class index (``<key>.cls``). ``members.npz`` holds, per split
and per position of its stream (the shards in order, their samples in order), the image's index in
the packed folder's listing, its class, its shard and the byte offset and size of its encoded bytes in
that tar, so a shard folder is also read by index, each image by one seek into a tar. How the shards
are streamed to the trainers is :mod:`nas.data.shards`.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from nas.core.errors import NasError

#: The file that makes a folder a shard folder.
INDEX = "shards.json"
#: Where every member of every split is (module docstring).
MEMBERS = "members.npz"
#: What ``shards.json`` says it is, and the version of its layout this code reads (2: with members.npz).
FORMAT, VERSION = "nas-shards", 2
#: The class member of every sample.
CLASS_MEMBER = "cls"


def is_shard_folder(data: str | None) -> bool:
    """Whether ``data`` is a shard folder (it holds ``shards.json``) rather than an image folder."""
    return data is not None and (Path(data) / INDEX).is_file()


@dataclass(frozen=True)
class Shard:
    """One tar file of a shard folder, as ``shards.json`` lists it."""

    path: str
    samples: int
    size: int  # bytes


@dataclass(frozen=True)
class ShardIndex:
    """A shard folder's ``shards.json``, its shards and member table checked to exist with the listed sizes."""

    root: str
    classes: tuple[str, ...]
    train: tuple[Shard, ...]
    val: tuple[Shard, ...]
    val_folder: str | None  # "val" or "test": which folder the val shards were packed from
    source: str  # the folder packed
    source_fingerprint: str
    seed: int  # the pack's shuffle

    @classmethod
    def load(cls, data: str | Path) -> ShardIndex:
        """Read ``data/shards.json``; a missing or changed shard is one line naming it."""
        root = Path(data)
        path = root / INDEX
        try:
            raw = json.loads(path.read_text())
            if raw.get("format") != FORMAT or raw.get("version") != VERSION:
                raise NasError(
                    f"{path}: format {raw.get('format')!r} version {raw.get('version')!r}; this nas reads "
                    f"{FORMAT!r} version {VERSION}: pack the folder again with `nas data pack`"
                )
            splits = {
                split: tuple(
                    Shard(str(root / s["name"]), int(s["samples"]), int(s["bytes"]))
                    for s in raw["splits"].get(split, [])
                )
                for split in ("train", "val")
            }
            index = cls(
                str(root),
                tuple(raw["classes"]),
                splits["train"],
                splits["val"],
                raw.get("val_folder"),
                raw.get("source", ""),
                raw.get("source_fingerprint", ""),
                int(raw.get("seed", 0)),
            )
            members_bytes = int(raw["members"]["bytes"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise NasError(f"{path}: not a readable shard index ({exc}); pack the folder again") from None
        if not index.train:
            raise NasError(f"{path}: lists no training shards; pack a folder with train/<class>/<image>")
        listed = [(Path(s.path), s.samples, s.size) for s in (*index.train, *index.val)]
        for file, _, size in [*listed, (root / MEMBERS, 0, members_bytes)]:
            if not file.is_file():
                raise NasError(f"{file}: missing (listed in {path}); copy it again or pack again")
            if file.stat().st_size != size:
                raise NasError(f"{file}: {file.stat().st_size} bytes, {path} says {size}; copy it again or pack again")
        return index

    def fingerprint(self) -> str:
        """What identifies these shards in resume checks: the classes, the source's fingerprint, the
        pack seed and every shard's name, count and size, hashed (16 hex digits)."""
        h = hashlib.sha256()
        h.update(f"{FORMAT}/{VERSION}\n{json.dumps(self.classes)}\n{self.source_fingerprint}\n{self.seed}\n".encode())
        for shard in (*self.train, *self.val):
            h.update(f"{Path(shard.path).name}:{shard.samples}:{shard.size}\n".encode())
        return h.hexdigest()[:16]

    def shards(self, split: str) -> tuple[Shard, ...]:
        return self.train if split == "train" else self.val

    def members(self, split: str) -> MemberTable:
        """Where each image of ``split`` is, in stream order (:data:`MEMBERS`); one line if unreadable."""
        path = Path(self.root) / MEMBERS
        shards = self.shards(split)
        try:
            with np.load(path) as arrays:
                columns = [arrays[f"{split}_{name}"] for name in ("shard", "offset", "size", "label", "index")]
                table = MemberTable(tuple(s.path for s in shards), *columns, np.arange(len(columns[0])))
        except (OSError, ValueError, KeyError) as exc:
            raise NasError(f"{path}: not a readable member table ({exc}); pack the folder again") from None
        if len(table) != sum(s.samples for s in shards) or (len(table) and table.shard.max() >= len(shards)):
            raise NasError(f"{path}: its {split} members do not match {INDEX}; pack the folder again")
        return table


@dataclass(frozen=True, eq=False)
class MemberTable:
    """Images inside tar shards: per image its shard (an index into ``paths``), the offset and size of
    its encoded bytes, its class and its index in the packed folder's listing. Read by one seek."""

    paths: tuple[str, ...]
    shard: np.ndarray  # int32
    offset: np.ndarray  # int64
    size: np.ndarray  # int64
    label: np.ndarray  # int32
    index: np.ndarray  # int64: the image's position in the folder's listing of its split
    position: np.ndarray  # int64: its position in the split's stream (the shards in order)

    def __len__(self) -> int:
        return len(self.shard)

    def take(self, rows: np.ndarray) -> MemberTable:
        """The images at ``rows`` (an index array), in that order."""
        pick = (self.shard, self.offset, self.size, self.label, self.index, self.position)
        return MemberTable(self.paths, *(array[rows] for array in pick))

    def in_folder_order(self) -> MemberTable:
        """The same images in the packed folder's listing order (the order an image folder is read in)."""
        return self.take(np.argsort(self.index, kind="stable"))

    def read(self, row: int) -> bytes:
        """The encoded bytes of image ``row`` (opened per read: safe in forked loader workers)."""
        path = self.paths[int(self.shard[row])]
        try:
            with open(path, "rb") as tar:
                tar.seek(int(self.offset[row]))
                data = tar.read(int(self.size[row]))
        except OSError as exc:
            raise NasError(f"{path}: cannot read ({exc.strerror or exc}); copy it again or pack again") from None
        if len(data) != int(self.size[row]):
            raise NasError(f"{path}: shorter than {INDEX} says; copy it again or pack again")
        return data

    def member_name(self, row: int) -> str:
        """The tar member name of image ``row``, read from its header (the 512 bytes before its data)."""
        try:
            with open(self.paths[int(self.shard[row])], "rb") as tar:
                tar.seek(int(self.offset[row]) - 512)
                return tar.read(100).split(b"\0", 1)[0].decode(errors="replace")
        except (OSError, ValueError):
            return f"at byte {int(self.offset[row])}"

    def image(self, row: int) -> Image.Image:
        """Image ``row`` decoded to RGB; bytes that do not decode are one line naming shard and member."""
        try:
            with Image.open(io.BytesIO(self.read(row))) as img:
                return img.convert("RGB")
        except (OSError, SyntaxError, ValueError) as exc:  # PIL: truncated, corrupt or not an image
            raise NasError(self.undecodable(row, exc)) from None

    def undecodable(self, row: int, exc: BaseException) -> str:
        reason = "not an image PIL recognises" if isinstance(exc, UnidentifiedImageError) else exc
        return (
            f"{self.paths[int(self.shard[row])]}: member {self.member_name(row)}: cannot decode ({reason}); "
            "pack the shards again from an intact folder"
        )
