"""The interface every model family implements (one module of ``supernets`` per family).

A family is an object, declared in the ``nas.families`` entry points or registered by name with
:func:`nas.core.families.register_family`, that knows its search-space rules, its elastic supernet
and static networks, how a network splits into priced blocks, and how its supernet is trained.
Nothing outside ``supernets/`` names a family; the engine (``nas``) only calls these methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from nas.core.signature import BlockSignature, image_size_pair, stage_resolutions
from nas.core.space import SpaceRules

if TYPE_CHECKING:  # for annotations only: the core never imports torch
    import torch.nn as nn

    from nas.core.arch import ArchConfig
    from nas.core.space import SearchSpace
    from nas.core.stage import Action, StageSpace

ActionsFn = Callable[["ArchConfig"], Iterable[tuple["Action", "ArchConfig"]]]


class Family(ABC):
    """A model family: space rules, supernet, static networks, priced blocks, training rule.

    Subclasses set the class attributes and implement the abstract methods; the defaults of the
    others fit a plain four-stage convolutional network.
    """

    #: The name in space files, architectures and ``nas train-supernet FAMILY``.
    name: ClassVar[str]
    #: What its spaces may contain.
    rules: ClassVar[SpaceRules]
    #: How its supernet is trained: ``"sandwich"`` (EfficientFormerV2 §4.2.2) or ``"gumbel"``
    #: (EfficientFormer §4.2); see :mod:`nas.train.supernet`.
    training: ClassVar[str] = "sandwich"
    #: What its attention blocks are called in listings (``nas space``, ``nas profile``).
    attention_label: ClassVar[str] = "attention blocks"

    #: The supernet class, built as ``supernet_class(space, img_size=, num_classes=, **kwargs)`` by
    #: the default :meth:`build_supernet`.
    supernet_class: ClassVar[type | None] = None

    def build_supernet(
        self, space: SearchSpace, img_size: Any = 224, num_classes: int = 1000, **kwargs: Any
    ) -> nn.Module:
        """The weight-sharing supernet of ``space``; ``net(x, arch)`` runs a sub-network."""
        if self.supernet_class is None:
            raise NotImplementedError(f"family {self.name}: set supernet_class or override build_supernet")
        return self.supernet_class(space, img_size=img_size, num_classes=num_classes, **kwargs)

    @abstractmethod
    def build_static(
        self, arch: ArchConfig, img_size: Any = 224, num_classes: int = 1000, in_chans: int = 3, **kwargs: Any
    ) -> nn.Module:
        """A freshly initialised static network of ``arch`` (a timm model where timm can express it)."""

    def extract(self, net: nn.Module, arch: ArchConfig) -> nn.Module:
        """The static network of ``arch`` carrying ``net``'s weights; ``net`` is not changed. By default
        the supernet's own (``supernets.base.SupernetBase.extract``: leading slices, one rule for every family)."""
        return net.extract(arch)

    def block_signatures(
        self, arch: ArchConfig, img_size: Any = 224, num_classes: int = 1000, in_chans: int = 3
    ) -> list[BlockSignature]:
        """The priced blocks of ``arch``, in order; their costs add up to the network's: the stem, per
        stage its downsampling (stages 2-4) and :meth:`stage_signatures`, then the head."""
        size = image_size_pair(img_size)
        res = stage_resolutions(size)
        sigs = [BlockSignature("stem", in_chans, arch.widths[0], 0, size, 4)]
        for s, width in enumerate(arch.widths):
            if s > 0:
                sigs.append(BlockSignature(self.downsample_kind(s), arch.widths[s - 1], width, 0, res[s - 1], 2))
            sigs.extend(self.stage_signatures(arch, s, res[s]))
        sigs.append(BlockSignature("head", arch.widths[-1], num_classes, 0, res[-1], 1))
        return sigs

    def downsample_kind(self, stage: int) -> str:
        """The kind of the block that enters ``stage`` (1 to 3) from the stage before."""
        return "downsample"

    @abstractmethod
    def stage_signatures(self, arch: ArchConfig, stage: int, resolution: tuple[int, int]) -> Iterable[BlockSignature]:
        """The priced blocks of ``stage`` of ``arch`` after its downsampling, in forward order, at
        ``resolution`` (layout changes included)."""

    @abstractmethod
    def width_signatures(
        self, stage: int, stage_space: StageSpace, width: int, resolution: tuple[int, int]
    ) -> Iterable[BlockSignature]:
        """Every block that ``stage`` can hold at ``width`` in a space whose stage is ``stage_space``."""

    @abstractmethod
    def build_block(self, sig: BlockSignature, device: Any = None, dtype: Any = None) -> nn.Module:
        """One block as a module, to count, time or export on its own."""

    def reachable_signatures(
        self, space: SearchSpace, img_size: Any = 224, num_classes: int = 1000, in_chans: int = 3
    ) -> set[BlockSignature]:
        """Every block signature some sub-network of ``space`` contains (a latency table's rows): the
        stem at every stage-1 width, every downsampling between every pair of widths, the blocks
        :meth:`width_signatures` lists for every stage width, and the head at every last-stage width."""
        size = image_size_pair(img_size)
        res = stage_resolutions(size)
        sigs = {BlockSignature("stem", in_chans, w, 0, size, 4) for w in space.stages[0].widths}
        for s, st in enumerate(space.stages):
            if s > 0:
                sigs |= {
                    BlockSignature(self.downsample_kind(s), w_in, w, 0, res[s - 1], 2)
                    for w_in in space.stages[s - 1].widths
                    for w in st.widths
                }
            for w in st.widths:
                sigs |= set(self.width_signatures(s, st, w, res[s]))
        sigs |= {BlockSignature("head", w, num_classes, 0, res[-1], 1) for w in space.stages[-1].widths}
        return sigs

    def input_shape(self, sig: BlockSignature) -> tuple[int, ...]:
        """The input tensor shape of block ``sig`` (batch 1): a feature map by default."""
        return (1, sig.c_in, *sig.resolution)

    def greedy_actions(
        self, space: SearchSpace, checkpoint: dict[str, Any], objective: str
    ) -> tuple[ActionsFn, str] | None:
        """The moves of greedy slimming when they are not every shrink of the space (None), with a
        one-line note for the run's config; ``checkpoint`` is the supernet's (metadata only)."""
        return None
