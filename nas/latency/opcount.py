"""Operator-level cost accounting of a module, on PyTorch's meta device (no memory, no compute).

Every ATen operator a forward dispatches is classified (dense conv, depthwise conv, linear layer,
attention matmul, element-wise, layout change, reduction) with its multiply-accumulates and the
elements it touches (inputs, outputs, weights). BatchNorm is left out: deployment runtimes fold it
into the preceding convolution. Views are free.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

OP_KINDS = ("conv", "dw", "fc", "bmm", "elem", "layout", "reduce")

_FREE = {
    "view",
    "_unsafe_view",
    "reshape",
    "alias",
    "detach",
    "expand",
    "unsqueeze",
    "squeeze",
    "t",
    "slice",
    "select",
    "split",
    "split_with_sizes",
    "unbind",
    "_native_batch_norm_legit_no_training",
    "native_batch_norm",
    "batch_norm",
    "lift_fresh",
    "empty",
    "zeros",
    "ones",
    "arange",
    "_to_copy",
    "new_empty",
    "new_zeros",
    "zeros_like",
    "empty_like",
    "full",
    "scalar_tensor",
}
_LAYOUT = {
    "permute",
    "transpose",
    "clone",
    "contiguous",
    "cat",
    "index",
    "flatten",
    "upsample_bilinear2d",
    "upsample_nearest2d",
    "pixel_shuffle",
    "copy_",
    "roll",
    "constant_pad_nd",
    "stack",
    "im2col",
    "col2im",
}
_REDUCE = {
    "_softmax",
    "native_layer_norm",
    "native_group_norm",
    "linalg_vector_norm",
    "mean",
    "sum",
    "avg_pool2d",
    "max_pool2d_with_indices",
    "_adaptive_avg_pool2d",
    "adaptive_avg_pool2d",
    "sigmoid",
    "amax",
    "var_mean",
}


@dataclass(frozen=True)
class OpCost:
    """One dispatched operator: its kind (one of ``OP_KINDS``), multiply-accumulates and elements touched."""

    kind: str
    macs: int
    elems: int
    op: str = ""  # the ATen operator (e.g. ``gelu``, ``_softmax``)
    out_elems: int = 0  # elements of its output (the activation it writes)
    rank: int = 4  # dimensions of its output: 4 for image-layout tensors, 3 or 2 for token-layout ones


def _numel(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (list, tuple)):
        return sum(_numel(v) for v in value)
    return 0


def _rank(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.dim()
    if isinstance(value, (list, tuple)) and value:
        return _rank(value[0])
    return 0


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[OpCost] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in _FREE:
            return out
        macs, weights = 0, 0
        if name == "convolution":
            x, w, groups = args[0], args[1], args[8]
            macs = out.numel() * w.shape[1] * w.shape[2] * w.shape[3]
            kind = "dw" if groups > 1 and groups == x.shape[1] else "conv"
            inputs, weights = x.numel(), w.numel()
        elif name in ("addmm", "mm", "bmm"):
            a, b = (args[1], args[2]) if name == "addmm" else (args[0], args[1])
            if name == "bmm":
                kind, macs, inputs = "bmm", a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2], a.numel() + b.numel()
            else:
                kind, macs, inputs, weights = "fc", a.shape[0] * a.shape[1] * b.shape[1], a.numel(), b.numel()
        else:
            kind = "layout" if name in _LAYOUT else "reduce" if name in _REDUCE else "elem"
            inputs = sum(_numel(a) for a in args if isinstance(a, torch.Tensor))
        self.ops.append(OpCost(kind, int(macs), int(inputs + _numel(out) + weights), name, _numel(out), _rank(out)))
        return out


def record_ops(module: nn.Module, input_shape: tuple[int, ...]) -> list[OpCost]:
    """The operators of one forward of ``module`` (moved to the meta device) on an input of ``input_shape``."""
    module = module.to("meta").eval()
    recorder = _Recorder()
    with torch.no_grad(), recorder:
        module(torch.empty(*input_shape, device="meta"))
    return recorder.ops
