"""ExecuTorch with its XNNPACK backend: the CPU runtime Android apps ship, run here through its Python
bindings.

A module is exported (``torch.export``), lowered with the XNNPACK partitioner and serialised to a
``.pte`` program, the file ``executor_runner`` loads on a phone. The partitioner does not take every
operator: what it leaves (attention-bias lookups by index, some reductions, layout copies) runs on
ExecuTorch's portable kernels, generic C++ loops that are slow on any CPU. :class:`Lowered` records both
lists per program, so a table says which blocks ran partly outside XNNPACK.

The runtime is the optional extra ``android`` (``pip install -e ".[android]"``; ``dev`` pulls it in).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn

from nas.core.atomic_files import write_bytes_atomic
from nas.core.errors import NasError

log = logging.getLogger(__name__)

#: Graph nodes that are bookkeeping, not kernels: left out of the operator lists.
_STRUCTURAL = frozenset({"getitem"})
INSTALL_HINT = 'pip install -e ".[android]" (executorch 1.5, its XNNPACK backend)'


@contextlib.contextmanager
def _native_stderr_muted() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null: the runtime's C++ start-up (cpuinfo probing /sys files a
    virtual machine lacks) writes lines there that say nothing about the user's run."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@functools.cache
def require_executorch() -> None:
    """Raise a :class:`NasError` with the install command if ExecuTorch is not importable; on first
    success, start its thread pool quietly (see :func:`_native_stderr_muted`)."""
    pytree_log = logging.getLogger("torch.utils._pytree")
    level = pytree_log.level
    pytree_log.setLevel(logging.ERROR)  # torchao's enum registration warns on import; nothing to act on
    try:
        import executorch.runtime  # noqa: F401
        from executorch.extension.pybindings import portable_lib
    except ImportError as exc:
        raise NasError(f"ExecuTorch is not installed ({exc}); install it with {INSTALL_HINT}") from None
    finally:
        pytree_log.setLevel(level)
    with _native_stderr_muted():
        portable_lib._threadpool_get_thread_count()


def executorch_version() -> str:
    """The installed ExecuTorch's version (recorded in tables and manifests)."""
    from importlib.metadata import version

    return version("executorch")


@dataclass(frozen=True)
class Lowered:
    """A ``.pte`` program and the operators of its graph, counted by where they run: ``delegated`` to
    XNNPACK, or ``fallback`` to ExecuTorch's portable (generic) kernels."""

    program: bytes
    delegated: Mapping[str, int] = field(default_factory=dict)
    fallback: Mapping[str, int] = field(default_factory=dict)
    subgraphs: int = 0

    def operators(self) -> dict:
        """The operator counts as a JSON-ready dict (a manifest item's ``operators``)."""
        return {"xnnpack_subgraphs": self.subgraphs, "delegated": dict(self.delegated), "fallback": dict(self.fallback)}


#: Operators that keep a convolution's channels-last layout inside XNNPACK (elementwise): a softmax fed by a
#: convolution through them sees the layout the convolution left.
_LAYOUT_KEEPING = ("add", "sub", "mul", "div", "relu", "gelu", "hardtanh", "clamp", "sigmoid", "batch_norm")


def _fed_by_convolution(node: torch.fx.Node, depth: int = 4) -> bool:
    """Whether ``node``'s input comes from a convolution, directly or through elementwise operators."""
    for source in node.all_input_nodes:
        target = str(source.target)
        if "convolution" in target:
            return True
        if depth and any(op in target for op in _LAYOUT_KEEPING) and _fed_by_convolution(source, depth - 1):
            return True
    return False


@functools.cache
def partitioner_configs() -> list:
    """XNNPACK's partitioner configurations, less one case it gets wrong: a softmax fed by a convolution.

    ExecuTorch 1.5's XNNPACK delegate keeps a convolution's output channels-last (NHWC) and applies a
    following softmax over the last axis of that layout, the channels, instead of the last axis of the
    tensor: EfficientFormerV2's attention (talking-head 1x1 convolution, then softmax over the keys) came
    out of its program 0.4 from PyTorch on a trained network. Such a softmax is left to the portable
    kernels, which compute it on the tensor as PyTorch does; every other softmax stays in XNNPACK."""
    from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
    from executorch.backends.xnnpack.partition.config.generic_node_configs import SoftmaxConfig

    class SoftmaxNotAfterConvolution(SoftmaxConfig):
        def check_constraints(self, node: torch.fx.Node, ep) -> bool:
            return not _fed_by_convolution(node) and super().check_constraints(node, ep)

    return [SoftmaxNotAfterConvolution if c is SoftmaxConfig else c for c in ALL_PARTITIONER_CONFIGS]


def lower(module: nn.Module, example: torch.Tensor) -> Lowered:
    """Export ``module`` on ``example`` (batch 1, float32), lower it to XNNPACK and serialise it."""
    require_executorch()
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools.backend_debug import get_delegation_info
    from executorch.exir import to_edge_transform_and_lower

    module.eval()  # not reassigned: an exported (quantized) module's eval returns None
    with torch.no_grad(), warnings.catch_warnings():
        # timm's attention blocks cache their bias table on first eval call; export warns that the
        # cache is an attribute, not a buffer. The cached value is what the program bakes in.
        warnings.simplefilter("ignore", UserWarning)
        exported = torch.export.export(module, (example,))
        edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner(configs=partitioner_configs())])
        info = get_delegation_info(edge.exported_program().graph_module)
        program = edge.to_executorch().buffer
    ops = {k: v for k, v in info.delegation_by_operator.items() if k not in _STRUCTURAL}
    return Lowered(
        program=bytes(program),
        delegated={k: v.delegated for k, v in sorted(ops.items()) if v.delegated},
        fallback={k: v.non_delegated for k, v in sorted(ops.items()) if v.non_delegated},
        subgraphs=int(info.num_delegated_subgraphs),
    )


def set_threads(threads: int) -> None:
    """Size ExecuTorch's thread pool (XNNPACK's workers) to ``threads``; it is process-wide."""
    require_executorch()
    from executorch.extension.pybindings import portable_lib

    if portable_lib._threadpool_get_thread_count() != threads:
        with _native_stderr_muted():  # the runtime announces the reset on stderr
            portable_lib._unsafe_reset_threadpool(threads)


class Program:
    """A loaded ``.pte`` program's ``forward``, called with one tensor, returning its first output."""

    def __init__(self, program: bytes | str | Path):
        require_executorch()
        from executorch.runtime import Runtime

        data = Path(program).read_bytes() if isinstance(program, (str, Path)) else program
        try:
            # The method runs on the program's memory: both live as long as this object.
            self._data = data
            self._program = Runtime.get().load_program(data)
            self._method = self._program.load_method("forward")
        except (RuntimeError, ValueError) as exc:
            raise NasError(f"ExecuTorch cannot load the program ({exc})") from None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self._method.execute([x.contiguous()])[0]


def _check_pte(out: Path) -> None:
    if out.suffix != ".pte":
        raise NasError(f"{out}: an ExecuTorch program is a .pte file; name the output NAME.pte")


def export_executorch(model: nn.Module, img_size: int, out: Path, tolerance: float = 1e-4) -> dict:
    """Write ``model`` as an XNNPACK ``.pte`` at ``out`` (atomically) after checking, in the runtime
    here, that its logits match PyTorch's within ``tolerance``; return the difference and the operators."""
    _check_pte(out)
    model = model.eval()
    x = torch.randn(1, 3, img_size, img_size, generator=torch.Generator().manual_seed(0))
    lowered = lower(model, x)
    with torch.no_grad():
        expected = model(x)
    diff = float((Program(lowered.program)(x) - expected).abs().max())
    if diff > tolerance:
        raise NasError(f"ExecuTorch output differs from PyTorch by {diff:.2e} (> {tolerance:g}); not written")
    write_bytes_atomic(out, lowered.program)
    return {"max_abs_diff": diff, "operators": lowered.operators(), "executorch": executorch_version()}


#: How far an int8 program's logits may stray from the quantized graph's in PyTorch, as a share of the
#: largest logit: XNNPACK's int8 kernels requantize with fixed-point multipliers, PyTorch's reference
#: quantize/dequantize pairs in float, so single values differ by a quantization step here and there.
INT8_TOLERANCE = 0.05


def export_executorch_int8(
    quantized: nn.Module, check_images: torch.Tensor, out: Path, tolerance: float = INT8_TOLERANCE
) -> tuple[dict, Program]:
    """Write a quantized graph (:func:`nas.quantize.quantize_int8`) as an XNNPACK ``.pte`` at ``out``
    (atomically) after checking, in the runtime here, that on each of ``check_images`` (real images, one
    at a time) its logits match the graph's in PyTorch within ``tolerance`` of the largest logit; return
    the differences and operators, and the loaded program (to score it)."""
    _check_pte(out)
    lowered = lower(quantized, check_images[:1])
    program = Program(lowered.program)
    worst_abs = worst_relative = 0.0
    with torch.no_grad():
        for image in check_images:
            expected = quantized(image[None])
            diff = float((program(image[None]) - expected).abs().max())
            worst_abs = max(worst_abs, diff)
            worst_relative = max(worst_relative, diff / max(float(expected.abs().max()), 1e-6))
    if worst_relative > tolerance:
        raise NasError(
            f"the int8 program's logits differ from the quantized network's in PyTorch by {100 * worst_relative:.1f}% "
            f"of the largest logit (> {100 * tolerance:g}%); not written"
        )
    write_bytes_atomic(out, lowered.program)
    report = {
        "max_abs_diff": worst_abs,
        "max_relative_diff": worst_relative,
        "checked_on_images": len(check_images),
        "operators": lowered.operators(),
        "executorch": executorch_version(),
    }
    return report, program
