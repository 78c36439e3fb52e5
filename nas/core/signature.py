"""Block signatures: the unit of cost accounting (parameters, MACs, latency-table entries)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class BlockSignature:
    """One block of a network, as its cost depends on it.

    Attributes:
        kind: block kind within its family (e.g. ``stem``, ``ffn``, ``mhsa_ffn``, ``downsample``,
            ``attn_downsample``, ``head``).
        c_in: input channels.
        c_out: output channels (for ``head``: the number of classes).
        hidden: FFN hidden width, 0 where the block has none.
        resolution: input feature-map size (height, width).
        stride: spatial stride of the block (for attention blocks: the stride of the attention).
    """

    kind: str
    c_in: int
    c_out: int
    hidden: int
    resolution: tuple[int, int]
    stride: int = 1

    def key(self) -> str:
        """A compact text key, e.g. ``mhsa_ffn:c96-96:h384:r14x14:s2``."""
        return (
            f"{self.kind}:c{self.c_in}-{self.c_out}:h{self.hidden}:"
            f"r{self.resolution[0]}x{self.resolution[1]}:s{self.stride}"
        )

    @classmethod
    def from_key(cls, key: str) -> "BlockSignature":
        kind, chans, hidden, res, stride = key.split(":")
        c_in, c_out = chans[1:].split("-")
        h, w = res[1:].split("x")
        return cls(kind, int(c_in), int(c_out), int(hidden[1:]), (int(h), int(w)), int(stride[1:]))


#: Stages of every family's network: a stride-4 stem, then stages at strides 4, 8, 16 and 32.
NUM_STAGES = 4


def image_size_pair(img_size: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    """``(height, width)`` of an input size given as one side or as a pair (timm's ``to_2tuple``)."""
    return tuple(img_size) if isinstance(img_size, (tuple, list)) else (img_size, img_size)


def stage_resolutions(img_size: int | tuple[int, int] | list[int]) -> list[tuple[int, int]]:
    """Feature-map size of each stage: the stem's two and every downsampling's one 3x3 stride-2
    conv with padding 1 give ceil(size / 2) each (timm computes the same)."""
    res = tuple(math.ceil(s / 4) for s in image_size_pair(img_size))
    out = [res]
    for _ in range(NUM_STAGES - 1):
        res = tuple(math.ceil(r / 2) for r in res)
        out.append(res)
    return out
