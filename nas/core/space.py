"""SearchSpace: the choices per stage, the named members, and moves inside the space.

A space is a YAML file under ``search_configs/spaces/`` (or any path). Per stage it lists the
allowed depths, widths, FFN expansion ratios and attention-block counts; an ArchConfig stores the
resulting integer hidden widths (``ratio * width``), so ratios never need to round-trip.

Block placement (EfficientFormerV2 §4.1, timm ``num_vit``): the attention blocks of a stage are its
last blocks. In the supernet a stage has ``max(depths)`` block slots, the last ``max(attention)``
of which carry attention; a sub-network's FFN-only blocks use the first slots and its attention
blocks the last ones (:func:`block_slots`), so a timm model with the largest configuration is
exactly the largest sub-network.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from nas.core.arch import BLOCK_TYPES, ArchConfig
from nas.core.errors import NasError
from nas.core.stage import Action, StageSpace, block_slots, slots_of_types
from nas.core.typed_yaml import from_mapping, names_a_file, read_yaml


def _fmt(values) -> str:
    return ", ".join(str(v) for v in values)


@dataclass(frozen=True)
class _SpaceFile:
    family: str
    stages: tuple[StageSpace, ...]
    description: str = ""
    members: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SpaceRules:
    """What a family's spaces may contain (checked when a space file is read)."""

    attention_stages: tuple[int, ...]  # 0-based stages that may hold attention blocks
    fixed_attention: int | None = None  # every stage has exactly this many (SwiftFormer: its one encoder)
    block_choice: bool = False  # per-position block choice with identity (EfficientFormer)
    num_stages: int = 4


@dataclass(frozen=True, eq=False)
class SearchSpace:
    """A family's search space, loaded from YAML with :func:`load_space`."""

    name: str
    family: str
    stages: tuple[StageSpace, ...]
    description: str = ""
    members: dict[str, ArchConfig] = field(default_factory=dict)
    source: str = ""
    rules: SpaceRules = SpaceRules(attention_stages=())

    # --- construction --------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | os.PathLike, rules_of: Callable[[str], SpaceRules]) -> "SearchSpace":
        """Read and check a space file; ``rules_of(family)`` gives the family's rules (and
        raises :class:`NasError` for an unknown family)."""
        path = Path(path)
        raw = from_mapping(_SpaceFile, read_yaml(path, "search space"), str(path))
        try:
            rules = rules_of(raw.family)
        except NasError as exc:
            raise NasError(f"{path}: family: {exc}") from None
        space = cls(
            name=path.stem,
            family=raw.family,
            stages=raw.stages,
            description=raw.description.strip(),
            source=str(path),
            rules=rules,
        )
        space._check_definition(str(path))
        members = {}
        for member, data in raw.members.items():
            if isinstance(data, dict):  # a member's family is the space's
                data = {"family": raw.family, **data}
            arch = ArchConfig.from_dict(data, where=f"{path}: members.{member}")
            space.validate(arch, where=f"{path}: members.{member}")
            members[member] = arch
        object.__setattr__(space, "members", members)
        return space

    def _check_definition(self, where: str) -> None:
        if len(self.stages) != self.rules.num_stages:
            raise NasError(f"{where}: stages: {self.family} has {self.rules.num_stages} stages, got {len(self.stages)}")
        for s, st in enumerate(self.stages):
            at = f"{where}: stages[{s}]"
            for name in ("depths", "widths", "attention"):
                values = getattr(st, name)
                if not values or any(v < 0 for v in values) or list(values) != sorted(set(values)):
                    raise NasError(
                        f"{at}.{name}: give distinct non-negative values in increasing order, got {list(values)}"
                    )
            if min(st.depths) < 1 or min(st.widths) < 1:
                raise NasError(f"{at}: depths and widths must be at least 1")
            if (
                not st.expansion_ratios
                or min(st.expansion_ratios) < 1
                or list(st.expansion_ratios) != sorted(set(st.expansion_ratios))
            ):
                raise NasError(f"{at}.expansion_ratios: give distinct positive integers in increasing order")
            if st.max_attention > st.max_depth:
                raise NasError(
                    f"{at}.attention: {st.max_attention} attention blocks exceed the largest depth {st.max_depth}"
                )
            rules = self.rules
            if s not in rules.attention_stages and st.attention != (0,):
                raise NasError(
                    f"{at}.attention: {self.family} has attention only in stages "
                    f"{_fmt(i + 1 for i in rules.attention_stages)}; use [0]"
                )
            if rules.fixed_attention is not None and st.attention != (rules.fixed_attention,):
                raise NasError(
                    f"{at}.attention: every {self.family} stage ends in exactly "
                    f"{rules.fixed_attention} attention block; use [{rules.fixed_attention}]"
                )
            if min(st.widths) < 2 and s == 0:
                raise NasError(f"{at}.widths: the stem halves the first width; use at least 2")
            if st.max_expansion_ratios is not None:
                if len(st.max_expansion_ratios) != st.max_depth:
                    raise NasError(f"{at}.max_expansion_ratios: give one ratio per block slot ({st.max_depth})")
                bad = [r for r in st.max_expansion_ratios if r not in st.expansion_ratios]
                if bad:
                    raise NasError(
                        f"{at}.max_expansion_ratios: {bad[0]} is not one of expansion_ratios "
                        f"({_fmt(st.expansion_ratios)})"
                    )

    # --- membership ----------------------------------------------------------------------------

    def validate(self, arch: ArchConfig, where: str = "arch") -> ArchConfig:
        """Check that ``arch`` is in this space; the error names the stage, field and allowed values."""
        if arch.family != self.family:
            raise NasError(f"{where}: family {arch.family!r} does not match space {self.name!r} ({self.family})")
        n = len(self.stages)
        if arch.num_stages != n:
            raise NasError(f"{where}: depths: {arch.num_stages} stages, space {self.name!r} has {n}")
        if len(arch.attention) != n:
            raise NasError(f"{where}: attention: give one count per stage ({n} stages)")
        if len(arch.hidden_widths) != n:
            raise NasError(f"{where}: hidden_widths: give one list per stage ({n} stages)")
        for s, st in enumerate(self.stages):
            at = f"{where}: stage {s + 1}"
            depth, width, att = arch.depths[s], arch.widths[s], arch.attention[s]
            if depth not in st.depths:
                raise NasError(f"{at}: depths[{s}] = {depth} is not allowed; allowed: {_fmt(st.depths)}")
            if width not in st.widths:
                raise NasError(f"{at}: widths[{s}] = {width} is not allowed; allowed: {_fmt(st.widths)}")
            if att not in st.attention_choices(depth):
                raise NasError(
                    f"{at}: attention[{s}] = {att} is not allowed at depth {depth}; "
                    f"allowed: {_fmt(st.attention_choices(depth))}"
                )
            slots = self._check_placement(arch, s, at)
            for b, hidden in enumerate(arch.hidden_widths[s]):
                allowed = [r * width for r in st.ratios_at(slots[b])]
                if hidden not in allowed:
                    raise NasError(
                        f"{at}: hidden_widths[{s}][{b}] = {hidden} is not allowed for width {width}; "
                        f"allowed: {_fmt(allowed)} (expansion ratios {_fmt(st.ratios_at(slots[b]))})"
                    )
        return arch

    def _check_placement(self, arch: ArchConfig, s: int, at: str) -> tuple[int, ...]:
        """Validate where the blocks of stage ``s`` sit; returns their supernet slots."""
        st = self.stages[s]
        if not self.rules.block_choice:
            if arch.block_types:
                raise NasError(f"{at}: block_types is only used by EfficientFormer spaces; remove it")
            return block_slots(arch.depths[s], arch.attention[s], st.max_depth)
        if len(arch.block_types) != len(self.stages):
            raise NasError(
                f"{at}: block_types: give the choice at every position of every stage ({', '.join(BLOCK_TYPES)})"
            )
        types = arch.block_types[s]
        if len(types) != st.max_depth:
            raise NasError(f"{at}: block_types[{s}] has {len(types)} positions; the stage has {st.max_depth}")
        kept = [b for b in types if b != "skip"]
        if "mb3d" in kept and "mb4d" in kept[kept.index("mb3d") :]:
            raise NasError(
                f"{at}: block_types[{s}]: mb4d after mb3d; the 3D blocks of a stage come last "
                "(one reshape to tokens, EfficientFormer §4.1)"
            )
        return slots_of_types(types)

    def slots(self, arch: ArchConfig, s: int) -> tuple[int, ...]:
        """Supernet slot of each block of stage ``s``."""
        if arch.block_types:
            return slots_of_types(arch.block_types[s])
        return block_slots(arch.depths[s], arch.attention[s], self.stages[s].max_depth)

    def contains(self, arch: ArchConfig) -> bool:
        try:
            self.validate(arch)
        except NasError:
            return False
        return True

    def named(self, name: str) -> ArchConfig:
        try:
            return self.members[name]
        except KeyError:
            raise NasError(
                f"space {self.name!r} has no member {name!r}; members: {_fmt(self.members) or 'none'}"
            ) from None

    def resolve(self, spec: str) -> tuple[str, ArchConfig]:
        """A named member or the path of an arch YAML, validated; returns (label, arch)."""
        if spec in self.members:
            return spec, self.members[spec]
        path = Path(spec)
        if names_a_file(spec):
            arch = ArchConfig.load(path)
            return str(path), self.validate(arch, where=str(path))
        raise NasError(
            f"{spec!r} is neither a member of space {self.name!r} ({_fmt(self.members)}) nor an arch YAML file"
        )

    # --- special points ------------------------------------------------------------------------

    def _arch(self, depths, widths, attention, ratio_of, kept=None) -> ArchConfig:
        """Build an arch; ``kept[s]`` (EfficientFormer) are the positions of the kept blocks."""
        hidden, types = [], []
        for s, st in enumerate(self.stages):
            if self.rules.block_choice:
                positions = kept[s] if kept is not None else tuple(range(depths[s]))
                stage_types = ["skip"] * st.max_depth
                for i, pos in enumerate(positions):
                    stage_types[pos] = "mb3d" if i >= depths[s] - attention[s] else "mb4d"
                types.append(tuple(stage_types))
                slots = tuple(positions)
            else:
                slots = block_slots(depths[s], attention[s], st.max_depth)
            hidden.append(tuple(ratio_of(st, slot) * widths[s] for slot in slots))
        return ArchConfig(self.family, tuple(depths), tuple(widths), tuple(attention), tuple(hidden), tuple(types))

    def largest(self) -> ArchConfig:
        return self._arch(
            [st.max_depth for st in self.stages],
            [st.max_width for st in self.stages],
            [st.max_attention for st in self.stages],
            lambda st, slot: st.slot_max_ratio(slot),
        )

    def smallest(self) -> ArchConfig:
        depths = [min(st.depths) for st in self.stages]
        return self._arch(
            depths,
            [min(st.widths) for st in self.stages],
            [min(st.attention_choices(d)) for st, d in zip(self.stages, depths)],
            lambda st, slot: min(st.ratios_at(slot)),
        )

    def sample(self, rng: random.Random) -> ArchConfig:
        """A sub-network with every choice drawn uniformly and independently: depth, width,
        attention count (among those that fit the depth), which positions are kept
        (EfficientFormer) and each block's expansion ratio."""
        depths, widths, attention, kept = [], [], [], []
        for st in self.stages:
            depth = rng.choice(st.depths)
            depths.append(depth)
            widths.append(rng.choice(st.widths))
            attention.append(rng.choice(st.attention_choices(depth)))
            kept.append(tuple(sorted(rng.sample(range(st.max_depth), depth))))
        return self._arch(depths, widths, attention, lambda st, slot: rng.choice(st.ratios_at(slot)), kept)

    @cached_property
    def size(self) -> int:
        """The number of distinct sub-networks in the space."""
        total = 1
        for st in self.stages:
            per_stage = 0
            if self.rules.block_choice:
                # Sum over kept-position subsets of size d of the product of their ratio counts:
                # the coefficients of prod_slot (1 + n_slot x).
                coeffs = [1]
                for slot in range(st.max_depth):
                    n = len(st.ratios_at(slot))
                    coeffs = [a + n * b for a, b in zip(coeffs + [0], [0] + coeffs)]
                for depth in st.depths:
                    per_stage += coeffs[depth] * len(st.attention_choices(depth))
            else:
                for depth in st.depths:
                    for att in st.attention_choices(depth):
                        slots = block_slots(depth, att, st.max_depth)
                        per_stage += math.prod(len(st.ratios_at(slot)) for slot in slots)
            total *= per_stage * len(st.widths)
        return total

    # --- moves ---------------------------------------------------------------------------------

    def shrink_actions(self, arch: ArchConfig) -> Iterator[tuple[Action, ArchConfig]]:
        """Every one-step shrink of ``arch`` that stays in the space (the search frontier).

        remove_block drops a block: in EfficientFormer any kept block (its position becomes the
        identity); elsewhere the stage's last FFN-only block (or, with none left, its first
        attention block). remove_attention turns the stage's first attention block into an
        FFN-only (MB4D) block. narrow_stage takes the next smaller width, keeping every block's
        expansion ratio. lower_hidden takes one block's next smaller ratio.
        """
        block_choice = self.rules.block_choice
        for s, st in enumerate(self.stages):
            depth, width, att = arch.depths[s], arch.widths[s], arch.attention[s]
            hidden = arch.hidden_widths[s]
            slots = self.slots(arch, s)
            candidates: list[tuple[Action, ArchConfig]] = []
            if block_choice:
                types = arch.block_types[s]
                for b, pos in enumerate(slots):
                    new_types = types[:pos] + ("skip",) + types[pos + 1 :]
                    candidates.append(
                        (
                            Action("remove_block", s, b),
                            self._with_stage(
                                arch,
                                s,
                                depth=depth - 1,
                                attention=att - (types[pos] == "mb3d"),
                                hidden=hidden[:b] + hidden[b + 1 :],
                                types=new_types,
                            ),
                        )
                    )
                if att > 0:
                    pos = types.index("mb3d")
                    candidates.append(
                        (
                            Action("remove_attention", s, slots.index(pos)),
                            self._with_stage(
                                arch, s, attention=att - 1, types=types[:pos] + ("mb4d",) + types[pos + 1 :]
                            ),
                        )
                    )
            else:
                if depth - att > 0:  # drop the last FFN-only block
                    drop = depth - att - 1
                    candidates.append(
                        (
                            Action("remove_block", s, drop),
                            self._with_stage(arch, s, depth=depth - 1, hidden=hidden[:drop] + hidden[drop + 1 :]),
                        )
                    )
                elif att > 0:  # only attention blocks left: drop the first one whole
                    candidates.append(
                        (
                            Action("remove_block", s, 0),
                            self._with_stage(arch, s, depth=depth - 1, attention=att - 1, hidden=hidden[1:]),
                        )
                    )
                if att > 0:
                    candidates.append(
                        (Action("remove_attention", s, depth - att), self._with_stage(arch, s, attention=att - 1))
                    )
            smaller = [w for w in st.widths if w < width]
            if smaller:
                new_w = smaller[-1]
                candidates.append(
                    (
                        Action("narrow_stage", s),
                        self._with_stage(arch, s, width=new_w, hidden=tuple(h // width * new_w for h in hidden)),
                    )
                )
            for b, h in enumerate(hidden):
                lower = [r for r in st.ratios_at(slots[b]) if r * width < h]
                if lower:
                    new_hidden = hidden[:b] + (lower[-1] * width,) + hidden[b + 1 :]
                    candidates.append((Action("lower_hidden", s, b), self._with_stage(arch, s, hidden=new_hidden)))
            for action, new in candidates:
                if self.contains(new):
                    yield action, new

    # --- choices: what evolution mutates and crosses, optuna suggests ---------------------------

    def choice_options(self) -> dict[str, tuple]:
        """Every independent choice of the space and its allowed values, by name: per stage its width,
        its depth and attention count (EfficientFormer: the block type at every position, ``skip``
        included) and the expansion ratio of every supernet slot. Names are stable (optuna's
        parameter names), and every combination is repaired into the space by :meth:`repair`."""
        options: dict[str, tuple] = {}
        for s, st in enumerate(self.stages):
            options[f"s{s}_width"] = tuple(st.widths)
            if self.rules.block_choice:
                kinds = ("mb4d", "skip") + (("mb3d",) if st.max_attention > 0 else ())
                for j in range(st.max_depth):
                    options[f"s{s}_p{j}"] = kinds
            else:
                options[f"s{s}_depth"] = tuple(st.depths)
                options[f"s{s}_attention"] = tuple(st.attention)
            for k in range(st.max_depth):
                options[f"s{s}_slot{k}_ratio"] = st.ratios_at(k)
        return options

    def choices(self, arch: ArchConfig) -> dict[str, Any]:
        """``arch`` as one value per choice of :meth:`choice_options` (``repair(choices(a)) == a``). A
        slot no block of ``arch`` uses gets its smallest ratio."""
        self.validate(arch)
        values: dict[str, Any] = {}
        for s, st in enumerate(self.stages):
            width = arch.widths[s]
            values[f"s{s}_width"] = width
            if self.rules.block_choice:
                for j, kind in enumerate(arch.block_types[s]):
                    values[f"s{s}_p{j}"] = kind
            else:
                values[f"s{s}_depth"] = arch.depths[s]
                values[f"s{s}_attention"] = arch.attention[s]
            used = dict(zip(self.slots(arch, s), arch.hidden_widths[s]))
            for k in range(st.max_depth):
                values[f"s{s}_slot{k}_ratio"] = used[k] // width if k in used else min(st.ratios_at(k))
        return values

    def repair(self, choices: dict[str, Any]) -> ArchConfig:
        """The sub-network ``choices`` describe (one value per :meth:`choice_options` name), repaired
        where the values do not fit together: the attention count capped by the depth, and
        EfficientFormer's kept blocks brought to an allowed depth with the 3D blocks last (§4.1)."""
        depths, widths, attention, hidden, types = [], [], [], [], []
        for s, st in enumerate(self.stages):
            width = choices[f"s{s}_width"]
            if self.rules.block_choice:
                chosen = [choices[f"s{s}_p{j}"] for j in range(st.max_depth)]
                kept = [j for j, kind in enumerate(chosen) if kind != "skip"] or [0]
                while len(kept) not in st.depths:  # to an allowed depth: drop the last, or keep the first skipped
                    kept = (
                        kept[:-1]
                        if len(kept) > max(st.depths)
                        else kept + [j for j in range(st.max_depth) if j not in kept][:1]
                    )
                kept = sorted(kept)
                n3d = min(sum(chosen[j] == "mb3d" for j in kept), st.max_attention)
                n3d = max(a for a in st.attention_choices(len(kept)) if a <= n3d)
                stage_types = ["skip"] * st.max_depth
                for i, j in enumerate(kept):
                    stage_types[j] = "mb3d" if i >= len(kept) - n3d else "mb4d"
                types.append(tuple(stage_types))
                depth, att, slots = len(kept), n3d, kept
            else:
                depth = choices[f"s{s}_depth"]
                att = max(a for a in st.attention_choices(depth) if a <= min(choices[f"s{s}_attention"], depth))
                slots = block_slots(depth, att, st.max_depth)
            depths.append(depth)
            widths.append(width)
            attention.append(att)
            hidden.append(tuple(choices[f"s{s}_slot{k}_ratio"] * width for k in slots))
        arch = ArchConfig(self.family, tuple(depths), tuple(widths), tuple(attention), tuple(hidden), tuple(types))
        return self.validate(arch)

    def mutate(self, arch: ArchConfig, rng: random.Random, probability: float) -> ArchConfig:
        """``arch`` with every choice drawn again, uniformly, with ``probability`` (OFA §3.3's
        mutation), then repaired. May return ``arch`` itself when nothing was drawn anew."""
        values = self.choices(arch)
        for name, allowed in self.choice_options().items():
            if rng.random() < probability:
                values[name] = rng.choice(allowed)
        return self.repair(values)

    def crossover(self, first: ArchConfig, second: ArchConfig, rng: random.Random) -> ArchConfig:
        """A child taking every choice from ``first`` or ``second`` with even odds (OFA §3.3's
        crossover), repaired."""
        a, b = self.choices(first), self.choices(second)
        return self.repair({name: a[name] if rng.random() < 0.5 else b[name] for name in a})

    def _with_stage(
        self, arch: ArchConfig, s: int, depth=None, width=None, attention=None, hidden=None, types=None
    ) -> ArchConfig:
        def put(values, value):
            return tuple(value if i == s else v for i, v in enumerate(values))

        return arch.replace(
            depths=put(arch.depths, arch.depths[s] if depth is None else depth),
            widths=put(arch.widths, arch.widths[s] if width is None else width),
            attention=put(arch.attention, arch.attention[s] if attention is None else attention),
            hidden_widths=put(arch.hidden_widths, arch.hidden_widths[s] if hidden is None else tuple(hidden)),
            block_types=put(arch.block_types, arch.block_types[s] if types is None else tuple(types))
            if arch.block_types
            else (),
        )
