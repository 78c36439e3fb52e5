"""Plumbing shared by the family supernets: classifier heads, distillation mode, extraction."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable

import torch
import torch.nn as nn
from timm.layers import to_2tuple

from nas.core.arch import ArchConfig
from nas.core.signature import stage_resolutions
from nas.core.space import SearchSpace
from supernets.elastic_ops import (
    SLICE_GRADIENTS_FLAG,
    ElasticLinear,
    SharedWeightStatic,
    copy_sliced_state,
    enable_slice_gradients,
    slice_gradients_enabled,
    zero_slice_gradients,
)


class SupernetBase(nn.Module):
    """What every supernet has besides its body: ``space``, ``img_size``, ``num_classes``, the
    class and distillation heads (averaged at inference, as the released code does) and
    ``net(x, arch)``'s default of the largest sub-network.

    A family implements ``forward_elastic(x, arch=None)`` (the elastic ops' forward) and
    ``static_layout(arch)`` (how its static model's tensors map onto the supernet's). ``net(x, arch)``
    runs a sub-network that it has run before, in training with gradients, as that sub-network's
    static model on the supernet's tensors (:class:`supernets.elastic_ops.SharedWeightStatic`):
    the same outputs and gradients without the elastic bookkeeping, whose fixed cost per step is
    several percent of a small network's (issue 16). The sandwich rule's smallest sub-network,
    or one sub-network fine-tuned in the supernet, takes that path from its second step.
    """

    #: Dimensions averaged by global pooling: (2, 3) for NCHW maps, 1 for (B, N, C) tokens.
    pool_dims: tuple[int, ...] | int = (2, 3)
    family: str = ""
    #: How many repeated sub-networks keep a static model to run on the supernet's tensors (0: none).
    static_cache_size: int = 4

    def __init__(
        self,
        space: SearchSpace,
        img_size=224,
        num_classes: int = 1000,
        in_chans: int = 3,
        drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        layer_scale_init_value: float = 1e-5,
    ):
        super().__init__()
        if space.family != self.family:
            raise ValueError(f"space {space.name!r} is a {space.family} space, not {self.family}")
        if num_classes < 1:
            raise ValueError("num_classes must be at least 1")
        self.space = space
        self.img_size = to_2tuple(img_size)
        self.num_classes = num_classes
        self.in_chans = in_chans
        self.drop_rate = drop_rate
        self.drop_path_rate = drop_path_rate
        self.layer_scale_init_value = layer_scale_init_value
        self.distilled_training = False
        self._statics = _StaticCache()

    def forward(self, x: torch.Tensor, arch: ArchConfig | None = None):
        """The sub-network ``arch`` (default: the largest; EfficientFormer in training: a Gumbel draw)."""
        if (
            arch is not None
            and self.training
            and torch.is_grad_enabled()
            # The static models' drop-path rates follow their own depths, not the supernet's slots.
            and self.drop_path_rate == 0
            and slice_gradients_enabled(self)
        ):
            runner = self._statics.runner(self, arch)
            if runner is not None and runner.lock.acquire(blocking=False):
                try:
                    return runner(x, True, self.distilled_training)
                finally:
                    runner.lock.release()
        return self.forward_elastic(x, arch)

    def forward_elastic(self, x: torch.Tensor, arch: ArchConfig | None = None):
        raise NotImplementedError

    def static_layout(self, arch: ArchConfig) -> tuple[Callable[..., nn.Module], Callable[[str], str]]:
        """``(build_static, key_map)`` of a validated ``arch``: the family's static-model constructor and
        the map from a static tensor's name to the supernet tensor it is the leading slice of."""
        raise NotImplementedError

    def extract(self, arch: ArchConfig) -> nn.Module:
        """The static model of ``arch`` carrying this supernet's weights, each tensor the leading slice
        of the supernet tensor :meth:`static_layout` maps it to (pure: the supernet is not changed)."""
        arch = self.space.validate(arch)
        return extract_static(self, arch, *self.static_layout(arch))

    def _apply(self, fn, recurse=True):
        self._clear_statics()  # a static model's own buffers (e.g. attention bias indices) do not follow
        return super()._apply(fn, recurse)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        self._clear_statics()  # ``assign`` replaces the tensors the static models run on
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _clear_statics(self) -> None:
        statics = self.__dict__.get("_statics")  # absent while a subclass's __init__ has not reached ours
        if statics is not None:
            statics.clear()

    def __getstate__(self):
        # The static models are a cache, rebuilt empty. A copy's parameters come without their slice
        # gradient states (and hooks), so the copy has them off, as enable_slice_gradients(copy, False).
        state = {**super().__getstate__(), "_statics": None}
        state.pop(SLICE_GRADIENTS_FLAG, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._statics = _StaticCache()

    @property
    def largest(self) -> ArchConfig:
        return self.space.largest()

    @torch.jit.ignore
    def set_slice_gradients(self, enabled: bool) -> None:
        """Turn the in-place slice gradients every family supernet starts with on or off (off for DDP,
        which reduces only what autograd accumulates): :func:`supernets.elastic_ops.enable_slice_gradients`."""
        enable_slice_gradients(self, enabled)

    def no_weight_decay(self) -> set[str]:
        """Parameters AdamW should not decay: attention biases and architecture logits (timm's rule)."""
        return {k for k, _ in self.named_parameters() if "attention_biases" in k or k.startswith("arch_logits")}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """As ``nn.Module.zero_grad``; with ``set_to_none`` each gradient that only in-place slices
        wrote is kept for the next step's first write, which overwrites the region they wrote."""
        if set_to_none:
            zero_slice_gradients(self)
        else:
            super().zero_grad(set_to_none=False)

    def set_distilled_training(self, enable: bool = True) -> None:
        """Return (class logits, distillation logits) in training mode, for hard distillation."""
        self.distilled_training = enable

    def build_heads(self, width: int, distillation: bool, **dd) -> None:
        """timm's ``head_drop``, ``head`` and, with ``distillation``, ``head_dist`` on ``width`` features,
        as elastic linears (registered here, after the body, as timm orders them)."""
        self.head_drop = nn.Dropout(self.drop_rate)
        self.head = ElasticLinear.from_static(nn.Linear(width, self.num_classes, **dd))
        self.head_dist = ElasticLinear.from_static(nn.Linear(width, self.num_classes, **dd)) if distillation else None

    def forward_head(self, x: torch.Tensor):
        x = self.head_drop(x.mean(dim=self.pool_dims))
        if self.head_dist is None:
            return self.head(x)
        x, x_dist = self.head(x), self.head_dist(x)
        if self.distilled_training and self.training:
            return x, x_dist
        return (x + x_dist) / 2


_BLOCK_KEY = re.compile(r"^stages\.(\d+)\.blocks\.(\d+)\.")


def slot_key_map(slots: list[tuple[int, ...]]) -> Callable[[str], str]:
    """Static key -> supernet key, where block ``b`` of stage ``s`` sits in slot ``slots[s][b]``."""

    def key_map(key: str) -> str:
        m = _BLOCK_KEY.match(key)
        if m is None:
            return key
        s, b = int(m.group(1)), int(m.group(2))
        return f"stages.{s}.blocks.{slots[s][b]}." + key[m.end() :]

    return key_map


class _StaticCache:
    """The :class:`SharedWeightStatic` of the sub-networks a supernet runs more than once: built at a
    sub-network's second call among the last ``window`` it was given, at most the supernet's
    ``static_cache_size`` kept (the most recently used). A random draw is seen once and never built."""

    def __init__(self, window: int = 64):
        self.window = window
        self.built: OrderedDict[ArchConfig, SharedWeightStatic] = OrderedDict()
        self.seen: OrderedDict[ArchConfig, None] = OrderedDict()
        self.lock = threading.Lock()

    def clear(self) -> None:
        with self.lock:
            self.built.clear()
            self.seen.clear()

    def runner(self, net: SupernetBase, arch: ArchConfig) -> SharedWeightStatic | None:
        size = net.static_cache_size
        if size <= 0:
            return None
        with self.lock:
            runner = self.built.get(arch)
            if runner is not None:
                self.built.move_to_end(arch)
                return runner
            if arch not in self.seen:  # its first call: remember it, run it elastic
                self.seen[arch] = None
                if len(self.seen) > self.window:
                    self.seen.popitem(last=False)
                return None
            del self.seen[arch]
            valid = net.space.validate(arch)
            build_static, key_map = net.static_layout(valid)
            runner = self.built[arch] = SharedWeightStatic(_build_like(net, valid, build_static), net, key_map)
            while len(self.built) > size:
                self.built.popitem(last=False)
            return runner


def _build_like(net: SupernetBase, arch: ArchConfig, build_static: Callable[..., nn.Module]) -> nn.Module:
    """A freshly initialised static model of ``arch`` with the supernet's settings, device and dtype."""
    param = next(net.parameters())
    static = build_static(
        arch,
        img_size=net.img_size,
        num_classes=net.num_classes,
        in_chans=net.in_chans,
        distillation=net.head_dist is not None,
        drop_rate=net.drop_rate,
        layer_scale_init_value=net.layer_scale_init_value,
        device=param.device,
        dtype=param.dtype,
    )
    static.train(net.training)
    return static


def extract_static(
    net: SupernetBase, arch: ArchConfig, build_static: Callable[..., nn.Module], key_map: Callable[[str], str]
) -> nn.Module:
    """Build the static model of ``arch`` (already validated) on the supernet's device and dtype and
    fill it with the leading slices of the supernet tensors that ``key_map`` names. Pure."""
    static = _build_like(net, arch, build_static)
    with torch.no_grad():
        copy_sliced_state(static, net.state_dict(), key_map)
    static.train(net.training)
    static.distilled_training = net.distilled_training
    return static


class ClassifierHead(nn.Module):
    """The end of a timm model as one cost unit: final norm, global pooling, both heads averaged."""

    def __init__(self, norm: nn.Module, width: int, num_classes: int, pool_dims=(2, 3), device=None, dtype=None):
        super().__init__()
        self.norm = norm
        self.pool_dims = pool_dims
        self.head = nn.Linear(width, num_classes, device=device, dtype=dtype)
        self.head_dist = nn.Linear(width, num_classes, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x).mean(dim=self.pool_dims)
        return (self.head(x) + self.head_dist(x)) / 2


def stage_input_resolutions(img_size) -> list[tuple[int, int]]:
    """Feature-map size entering each stage (timm's ``resolution`` argument of a stage)."""
    res = stage_resolutions(img_size)
    return [res[0]] + res[:-1]
