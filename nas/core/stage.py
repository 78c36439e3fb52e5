"""One stage of a search space: its choices (:class:`StageSpace`), where its blocks sit in the
supernet's slots, and a shrinking step of it (:class:`Action`, greedy slimming's move).

Block placement (EfficientFormerV2 §4.1, timm ``num_vit``): the attention blocks of a stage are its
last blocks. In the supernet a stage has ``max(depths)`` block slots, the last ``max(attention)``
of which carry attention; a sub-network's FFN-only blocks use the first slots and its attention
blocks the last ones (:func:`block_slots`).
"""

from __future__ import annotations

from dataclasses import dataclass


def block_slots(depth: int, attention: int, max_depth: int) -> tuple[int, ...]:
    """Supernet slot of each block of a stage with ``depth`` blocks, the last ``attention`` of them
    with attention: FFN-only blocks take the first slots, attention blocks the last ones."""
    ffn = depth - attention
    return tuple(range(ffn)) + tuple(range(max_depth - attention, max_depth))


def slots_of_types(types: tuple[str, ...]) -> tuple[int, ...]:
    """Positions of the kept blocks in an EfficientFormer stage's choice list."""
    return tuple(i for i, b in enumerate(types) if b != "skip")


@dataclass(frozen=True)
class StageSpace:
    """The choices of one stage."""

    depths: tuple[int, ...]
    widths: tuple[int, ...]
    expansion_ratios: tuple[int, ...] = ()
    attention: tuple[int, ...] = (0,)
    #: Per supernet slot, the largest expansion ratio (defaults to max(expansion_ratios) everywhere).
    #: Lets a space's largest network be a given model, e.g. EfficientFormerV2-L.
    max_expansion_ratios: tuple[int, ...] | None = None

    @property
    def max_depth(self) -> int:
        return max(self.depths)

    @property
    def max_width(self) -> int:
        return max(self.widths)

    @property
    def max_attention(self) -> int:
        return max(self.attention)

    def slot_max_ratio(self, slot: int) -> int:
        if self.max_expansion_ratios is not None:
            return self.max_expansion_ratios[slot]
        return max(self.expansion_ratios) if self.expansion_ratios else 0

    def ratios_at(self, slot: int) -> tuple[int, ...]:
        top = self.slot_max_ratio(slot)
        return tuple(r for r in self.expansion_ratios if r <= top)

    def max_hidden(self, slot: int) -> int:
        """Hidden width of the supernet's block in ``slot``."""
        return self.slot_max_ratio(slot) * self.max_width

    def attention_choices(self, depth: int) -> tuple[int, ...]:
        return tuple(a for a in self.attention if a <= depth)


@dataclass(frozen=True)
class Action:
    """One shrinking step from an architecture (the frontier of greedy slimming)."""

    kind: str  # remove_block | remove_attention | narrow_stage | lower_hidden
    stage: int  # 0-based
    block: int | None = None

    def describe(self) -> str:
        where = f"stage {self.stage + 1}" + (f" block {self.block + 1}" if self.block is not None else "")
        return f"{self.kind.replace('_', ' ')} ({where})"
