"""Elastic ops shared by every supernet family (Once-for-All style weight sharing).

Each elastic op subclasses the static op it generalises, keeps its parameter names and holds the
one full weight tensor; a forward uses the leading slice that the sub-network needs (the first
``k`` output channels, the first ``c`` input channels). The input width is read from the input
tensor and the output width is passed in explicitly: nothing is stored on the module between
calls, so a supernet can run different sub-networks concurrently.

Elastic modules are made from freshly built static ones with :meth:`Elastic.from_static`, so their
initialisation, hyper-parameters and parameter names are exactly those of the static op.

Gradients: autograd's slice backward gives every use of a slice a zero-filled gradient the size of
the whole parameter, which for a small sub-network of a large supernet costs more than the
sub-network's own weight gradients. A supernet's parameters therefore add their slices' gradients
into ``.grad`` in place (:func:`enable_slice_gradients`, on from ``build_supernet``; off under DDP),
and the supernet's ``zero_grad`` keeps each such gradient for the next step, whose first write
overwrites the region written before. The gradients are the same tensors' values either way.
"""

from __future__ import annotations

import threading
from typing import ClassVar

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import BatchNormAct2d, LayerScale, LayerScale2d


def leading(t: torch.Tensor | None, *sizes: int) -> torch.Tensor | None:
    """``t[:sizes[0], :sizes[1], ...]``, without a slice (and its backward copy) when nothing is cut.

    A parameter prepared by :func:`enable_slice_gradients` has its slice's gradient added in place
    into its ``.grad`` (see :class:`_SliceWithInPlaceGradient`) instead of autograd's full-size
    zero-filled copy per use.
    """
    if t is None:
        return None
    if all(s == n for s, n in zip(sizes, t.shape)):
        return t
    index = _leading_index(sizes)
    state = t.__dict__.get(_SLICE_STATE)
    if state is not None and state.enabled and state.hooked and t.requires_grad and torch.is_grad_enabled():
        return _SliceWithInPlaceGradient.apply(t, index, state)
    return t[index]


def _leading_index(sizes) -> tuple[slice, ...]:
    return tuple(slice(0, s) for s in sizes)


#: Attribute of a parameter that holds its :class:`SliceGradientState`.
_SLICE_STATE = "_nas_slice_gradient"
#: Attribute of a module: whether :func:`enable_slice_gradients` last turned them on for it.
SLICE_GRADIENTS_FLAG = "_nas_slice_gradients"


class SliceGradientState:
    """What a parameter's in-place slice gradients need between steps.

    ``region``: the leading sizes the gradient has been written in since the step began, or
    ``None`` when all of it may be written (autograd accumulated into it, e.g. for the largest
    sub-network). ``spare``: the last step's gradient tensor, reused at the next first write so that
    a small sub-network's step neither allocates nor zero-fills a full-size gradient; it is zero
    outside its leading ``spare_dirty`` sizes (the region written before), and the next first write
    overwrites that region rather than zeroing it and adding (it zeroes it first only where its own
    slice does not cover it).
    """

    __slots__ = ("enabled", "hooked", "region", "spare", "spare_dirty")

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.hooked = False  # the parameter carries the _AutogradWrites hook that keeps ``region`` honest
        self.region: tuple[int, ...] | None = None  # unknown until the gradient is first set aside by zero_grad
        self.spare: torch.Tensor | None = None
        self.spare_dirty: tuple[int, ...] = ()

    def __reduce__(self):
        # A pickled parameter loses its hooks, so it comes back with its slice gradients off.
        return (SliceGradientState, (False,))

    def grow(self, sizes: tuple[int, ...]) -> None:
        """The written region now also covers the leading ``sizes``."""
        self.region = tuple(max(a, b) for a, b in zip(self.region, sizes)) if self.region else tuple(sizes)


class _SliceWithInPlaceGradient(torch.autograd.Function):
    """A leading slice of a parameter whose backward adds the slice's gradient into the parameter's
    ``.grad`` in place and passes no gradient on.

    Autograd's slice backward allocates a zero-filled gradient of the full parameter and copies the
    slice in, and the accumulation then adds that full tensor (or steals it); for a small
    sub-network of a large supernet that costs more than its own weight gradients (issue 16). Here
    each use costs one copy (a step's first write) or add the size of the slice. The result is the
    same ``.grad`` (the slice's gradient, zeros elsewhere); what does not happen is autograd's
    accumulation hook, so DDP, which needs it, switches this off (:func:`enable_slice_gradients`
    with ``enabled=False``).
    """

    @staticmethod
    def forward(ctx, weight: torch.Tensor, index: tuple[slice, ...], state: SliceGradientState) -> torch.Tensor:
        ctx.weight, ctx.index, ctx.state = weight, index, state
        return weight[index].contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        target, first = _gradient_target(ctx.weight, ctx.state, grad.shape)
        if first:
            target[ctx.index].copy_(grad)
        else:
            target[ctx.index].add_(grad)
        return None, None, None


def _gradient_target(
    weight: torch.Tensor, state: SliceGradientState | None, shape: torch.Size
) -> tuple[torch.Tensor, bool]:
    """``weight.grad``, made if need be, that a leading slice of ``shape`` writes its gradient into in
    place, and whether this is the step's first write (which copies rather than adds). A parameter
    without a :class:`SliceGradientState` gets a zero-filled gradient at its first write."""
    target = weight.grad
    if target is not None:
        first = False
    elif state is None:
        target = weight.grad = torch.zeros_like(weight, memory_format=torch.contiguous_format)
        first = True
    else:  # the step's first write: reuse last step's gradient, zeroing only what this slice leaves
        target, dirty, state.spare, state.spare_dirty = state.spare, state.spare_dirty, None, ()
        # none kept, or the module was moved or cast since (``.to`` does not move the spare)
        same = target is not None and target.dtype == weight.dtype and target.device == weight.device
        if not same or target.shape != weight.shape:
            target = torch.zeros_like(weight, memory_format=torch.contiguous_format)
        elif any(d > g for d, g in zip(dirty, shape)):  # last step wrote beyond this slice
            target[_leading_index(dirty)].zero_()
        weight.grad = target
        state.region = ()
        first = True
    if state is not None and state.region is not None:
        state.grow(shape)
    return target, first


class _LeadingSlicesWithInPlaceGradient(torch.autograd.Function):
    """Many parameters' leading slices as one autograd node, whose backward writes every slice's
    gradient into its parameter's ``.grad`` in place, batched (``torch._foreach_*``).

    What :class:`_SliceWithInPlaceGradient` does for one large parameter, for all the sliced
    parameters of a sub-network at once (:class:`SharedWeightStatic`): a small network's step would
    otherwise pay a slice backward, a zero-filled full-size gradient and an accumulation per
    parameter, a fixed cost that does not shrink with the network (issue 16)."""

    @staticmethod
    def forward(ctx, plan, *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.plan = plan
        # A leading slice is the tensor's own strides and offset with smaller sizes: one as_strided per
        # parameter instead of an indexing op per dimension (this loop is the path's fixed cost). Not made
        # contiguous: a matmul reads a strided weight as it is, and a convolution that needs it contiguous
        # copies it no slower than a copy here (SwiftFormer-XS at batch 4: 1.1-1.5 ms less per step).
        return tuple(w.as_strided(shape, w.stride(), w.storage_offset()) for w, (_, shape) in zip(weights, plan))

    @staticmethod
    def backward(ctx, *grads: torch.Tensor | None):
        copy_to, copy_from, add_to, add_from = [], [], [], []
        for (weight, shape), grad in zip(ctx.plan, grads):
            if grad is None:
                continue
            # The state is looked up now: enable_slice_gradients may have given it since the plan was made.
            target, first = _gradient_target(weight, weight.__dict__.get(_SLICE_STATE), shape)
            (copy_to if first else add_to).append(target.as_strided(shape, target.stride(), target.storage_offset()))
            (copy_from if first else add_from).append(grad)
        # Every first write (a copy) before any add: a parameter listed twice adds onto its copy.
        if copy_to:
            torch._foreach_copy_(copy_to, copy_from)
        if add_to:
            torch._foreach_add_(add_to, add_from)
        return (None,) * (1 + len(grads))


class SharedWeightStatic:
    """The static model of one sub-network, run on the supernet's own tensors.

    Its parameters are, at each call, the leading slices of the supernet's (made by one autograd
    node, :class:`_LeadingSlicesWithInPlaceGradient`) or the supernet's tensors themselves where
    nothing is cut; its BatchNorm statistics are views of the supernet's, updated in place. Between
    calls it holds no parameters. The forward is the static model's own (timm's code, no elastic
    bookkeeping), so a sub-network that a supernet runs again and again (the sandwich rule's smallest,
    a fixed sub-network fine-tuned in the supernet) costs about what the extracted network costs.
    Gradients land in the supernet's ``.grad`` as with in-place slice gradients, which it needs
    (not under DDP)."""

    def __init__(self, static: nn.Module, supernet: nn.Module, key_map) -> None:
        params, buffers = dict(supernet.named_parameters()), dict(supernet.named_buffers())
        plan, sliced, direct = [], [], []
        for prefix, module in static.named_modules():
            prefix = f"{prefix}." if prefix else ""
            for name, own in list(module._parameters.items()):
                if own is None:
                    continue
                source = _fitting(params, key_map(prefix + name), own, prefix + name)
                if source.shape == own.shape:
                    direct.append((module._parameters, name, source))
                else:
                    plan.append((source, tuple(own.shape)))
                    sliced.append((module._parameters, name))
                module._parameters[name] = None  # held only during a call
            for name, own in list(module._buffers.items()):
                if own is None or name in module._non_persistent_buffers_set:
                    continue
                source = _fitting(buffers, key_map(prefix + name), own, prefix + name)
                module._buffers[name] = leading(source, *own.shape)  # a view: updates land in the supernet
        self.static = static
        self._plan, self._sources, self._sliced, self._direct = tuple(plan), [p for p, _ in plan], sliced, direct
        self.lock = threading.Lock()

    def __call__(self, x: torch.Tensor, training: bool, distilled_training: bool):
        slices = _LeadingSlicesWithInPlaceGradient.apply(self._plan, *self._sources) if self._plan else ()
        if isinstance(slices, torch.Tensor):  # apply returns a lone output bare
            slices = (slices,)
        for (params, name), tensor in zip(self._sliced, slices):
            params[name] = tensor
        for params, name, tensor in self._direct:
            params[name] = tensor
        if self.static.training != training:
            self.static.train(training)
        self.static.distilled_training = distilled_training
        try:
            return self.static(x)
        finally:  # no reference to this step's graph outlives the call
            for params, name in self._sliced:
                params[name] = None
            for params, name, _ in self._direct:
                params[name] = None


def _fitting(tensors: dict[str, torch.Tensor], key: str, own: torch.Tensor, static_key: str) -> torch.Tensor:
    """``tensors[key]``, checked to have a leading slice of ``own``'s shape (``static_key``'s)."""
    source = tensors[key]
    if source.dim() != own.dim() or any(s < t for s, t in zip(source.shape, own.shape)):
        raise ValueError(f"cannot slice {key} {tuple(source.shape)} to {static_key} {tuple(own.shape)}")
    return source


class _AutogradWrites:
    """Gradient hook of a parameter: autograd is about to accumulate into its ``.grad`` (all of it,
    as far as the state can tell). It is called with ``None`` when only in-place slices wrote."""

    def __init__(self, state: SliceGradientState):
        self.state = state

    def __call__(self, grad: torch.Tensor | None) -> None:
        if grad is not None:
            self.state.region = None


#: Parameters smaller than this slice the plain autograd way: below it, a zero fill of the whole
#: gradient costs less than a Python autograd function's call (measured on 2 CPU cores, torch 2.14:
#: even at 64K elements, 50 us slower at 256x256, 40 us faster at 1024x256).
MIN_SLICE_GRADIENT_NUMEL = 1 << 17


def enable_slice_gradients(module: nn.Module, enabled: bool = True, min_numel: int = MIN_SLICE_GRADIENT_NUMEL) -> None:
    """Give every parameter of ``module`` of at least ``min_numel`` elements in-place slice gradients
    (or take them away from all: DDP needs autograd's own accumulation). Zero the gradients with
    :func:`zero_slice_gradients` to reuse them. :func:`slice_gradients_enabled` tells which was
    asked last (a :class:`SharedWeightStatic` writes every parameter's gradient in place)."""
    module.__dict__[SLICE_GRADIENTS_FLAG] = enabled
    for p in module.parameters():
        state = p.__dict__.get(_SLICE_STATE)
        if state is None:
            if not enabled or p.numel() < min_numel:
                continue
            state = p.__dict__[_SLICE_STATE] = SliceGradientState()
        if enabled and not state.hooked:
            p.register_hook(_AutogradWrites(state))
            state.hooked, state.region = True, None
        state.enabled = enabled
        if not enabled:
            state.spare = None


def slice_gradients_enabled(module: nn.Module) -> bool:
    """Whether :func:`enable_slice_gradients` last turned ``module``'s in-place slice gradients on."""
    return module.__dict__.get(SLICE_GRADIENTS_FLAG, False)


def zero_slice_gradients(module: nn.Module) -> None:
    """``module.zero_grad(set_to_none=True)``, keeping each gradient that only in-place slices wrote
    for the next step's first write, which overwrites (or zeroes) the region they wrote."""
    for p in module.parameters():
        state = p.__dict__.get(_SLICE_STATE)
        if state is not None and p.grad is not None:
            if state.enabled and state.region is not None and p.grad.is_contiguous():
                state.spare, state.spare_dirty = p.grad, state.region
            state.region = ()
        p.grad = None


class Elastic:
    """Mixin: build an elastic module from a static one, sharing its parameters and buffers.

    ``elastic_children`` maps child names to the elastic class that child becomes.
    """

    elastic_children: ClassVar[dict[str, type]] = {}

    @classmethod
    def from_static(cls, module: nn.Module) -> nn.Module:
        static_cls = next(b for b in cls.__mro__[1:] if issubclass(b, nn.Module) and not issubclass(b, Elastic))
        if not isinstance(module, static_cls):
            raise TypeError(f"{cls.__name__}.from_static expects a {static_cls.__name__}, got {type(module).__name__}")
        elastic = cls.__new__(cls)
        elastic.__dict__.update(module.__dict__)
        elastic._modules = dict(module._modules)
        for name, elastic_child_cls in cls.elastic_children.items():
            child = elastic._modules.get(name)
            if child is not None and not isinstance(child, nn.Identity):
                elastic._modules[name] = elastic_child_cls.from_static(child)
        return elastic


class ElasticConv2d(Elastic, nn.Conv2d):
    """Conv2d over the first input channels of ``x``; ``out_channels`` selects the first filters.

    A depthwise conv (groups equal to the channel count) follows its input width.
    """

    def forward(self, x: torch.Tensor, out_channels: int | None = None) -> torch.Tensor:
        in_ch = x.shape[1]
        if self.groups == 1:
            out = self.out_channels if out_channels is None else out_channels
            weight = leading(self.weight, out, in_ch)
            groups = 1
        elif self.groups == self.in_channels == self.out_channels:
            out, groups = in_ch, in_ch
            weight = leading(self.weight, in_ch)
        else:
            raise ValueError("elastic grouped convs must be dense or depthwise")
        return F.conv2d(x, weight, leading(self.bias, out), self.stride, self.padding, self.dilation, groups)


def _batch_norm(bn: nn.modules.batchnorm._BatchNorm, x: torch.Tensor) -> torch.Tensor:
    """BatchNorm over the first ``x.shape[1]`` channels; running statistics of those channels are
    updated in place (the slices are views), as in ``nn.BatchNorm2d.forward``."""
    c = x.shape[1]
    momentum = 0.0 if bn.momentum is None else bn.momentum
    if bn.training and bn.track_running_stats and bn.num_batches_tracked is not None:
        bn.num_batches_tracked.add_(1)
        momentum = 1.0 / float(bn.num_batches_tracked) if bn.momentum is None else bn.momentum
    use_batch_stats = bn.training or (bn.running_mean is None and bn.running_var is None)
    track = not bn.training or bn.track_running_stats
    return F.batch_norm(
        x,
        leading(bn.running_mean, c) if track else None,
        leading(bn.running_var, c) if track else None,
        leading(bn.weight, c),
        leading(bn.bias, c),
        use_batch_stats,
        momentum,
        bn.eps,
    )


class ElasticBatchNorm2d(Elastic, nn.BatchNorm2d):
    """BatchNorm2d over the first ``x.shape[1]`` channels."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _batch_norm(self, x)


class ElasticBatchNormAct2d(Elastic, BatchNormAct2d):
    """timm's ``BatchNormAct2d`` over the first ``x.shape[1]`` channels: BN, dropout, activation."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.drop(_batch_norm(self, x)))


class ElasticLinear(Elastic, nn.Linear):
    """Linear layer over the first input features; ``out_features`` selects the first outputs."""

    def forward(self, x: torch.Tensor, out_features: int | None = None) -> torch.Tensor:
        out = self.out_features if out_features is None else out_features
        return F.linear(x, leading(self.weight, out, x.shape[-1]), leading(self.bias, out))


class ElasticLayerNorm(Elastic, nn.LayerNorm):
    """LayerNorm over the first ``x.shape[-1]`` channels (channels-last tokens)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[-1]
        return F.layer_norm(x, (c,), leading(self.weight, c), leading(self.bias, c), self.eps)


class ElasticLayerScale(Elastic, LayerScale):
    """Per-channel residual scale for channels-last tokens."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gamma = leading(self.gamma, x.shape[-1])
        return x.mul_(gamma) if self.inplace else x * gamma


class ElasticLayerScale2d(Elastic, LayerScale2d):
    """Per-channel residual scale for NCHW maps, over the first ``x.shape[1]`` channels."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gamma = leading(self.gamma, x.shape[1]).view(1, -1, 1, 1)
        return x.mul_(gamma) if self.inplace else x * gamma


def copy_sliced_state(static: nn.Module, supernet_state: dict[str, torch.Tensor], key_map) -> None:
    """Fill ``static`` from a supernet state dict: every static tensor is the leading slice of the
    supernet tensor named ``key_map(static_key)``; loaded with ``strict=True``."""
    state = {}
    for key, target in static.state_dict().items():
        source = _fitting(supernet_state, key_map(key), target, key)
        state[key] = leading(source, *target.shape).detach().clone()
    static.load_state_dict(state, strict=True)
