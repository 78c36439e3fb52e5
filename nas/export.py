"""Export a fixed architecture to ONNX (checked against PyTorch with ONNX Runtime), Core ML, or an
ExecuTorch program for Android's XNNPACK backend (checked against PyTorch in the runtime here)."""

from __future__ import annotations

import io
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_bytes_atomic
from nas.core.errors import NasError
from nas.latency.xnnpack import export_executorch
from nas.runs.checkpoint import load_checkpoint
from supernets import build_static

FORMATS = ("onnx", "coreml", "executorch")


def load_weights(model: nn.Module, checkpoint: str | Path) -> None:
    """Weights from a ``nas train`` checkpoint (``model`` key) or a plain state dict."""
    state = load_checkpoint(checkpoint)
    state = state.get("model", state) if isinstance(state, dict) else state
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise NasError(f"{checkpoint}: does not fit the architecture: {str(exc).splitlines()[0]}") from None


def onnx_bytes(module: nn.Module, x: torch.Tensor, input_name: str = "image") -> bytes:
    """ONNX (opset 17) of ``module`` traced on ``x``, in memory. The TorchScript exporter is used:
    it needs no onnxscript, which the dynamo exporter does."""
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module, (x,), buffer, dynamo=False, opset_version=17, input_names=[input_name], output_names=["output"]
        )
    return buffer.getvalue()


def export_onnx(model: nn.Module, img_size: int, out: Path, tolerance: float = 1e-4) -> float:
    """Write ONNX (opset 17) atomically and return the max abs difference to PyTorch (ONNX Runtime)."""
    import onnxruntime as ort

    model = model.eval()
    x = torch.randn(1, 3, img_size, img_size, generator=torch.Generator().manual_seed(0))
    data = onnx_bytes(model, x, "image")
    with torch.no_grad():
        expected = model(x).numpy()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    got = session.run(None, {"image": x.numpy()})[0]
    diff = float(np.abs(got - expected).max())
    if diff > tolerance:
        raise NasError(f"ONNX output differs from PyTorch by {diff:.2e} (> {tolerance:g}); not written")
    write_bytes_atomic(out, data)
    return diff


def to_coreml(module: torch.nn.Module, x: torch.Tensor, path: Path, precision: str = "float16") -> Path:
    """Trace ``module`` on ``x`` and save it as a Core ML ML program (iOS 16) at ``path`` (atomically:
    converted into a temporary folder, then renamed)."""
    import coremltools as ct

    module = module.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(module, x)
        mlmodel = ct.convert(
            traced,
            inputs=[ct.TensorType(name="x", shape=tuple(x.shape))],
            convert_to="mlprogram",
            minimum_deployment_target=ct.target.iOS16,
            compute_precision=ct.precision.FLOAT16 if precision == "float16" else ct.precision.FLOAT32,
        )
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        mlmodel.save(str(tmp / path.name))
        if path.exists():
            shutil.rmtree(path)
        (tmp / path.name).rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def export_coreml(model: nn.Module, img_size: int, out: Path) -> None:
    """Write a Core ML ML program for iOS 16 (float16 compute) at ``out`` (``.mlpackage``)."""
    if out.suffix != ".mlpackage":
        raise NasError(f"{out}: a Core ML ML program is a .mlpackage folder; name the output NAME.mlpackage")
    out.parent.mkdir(parents=True, exist_ok=True)
    to_coreml(model, torch.randn(1, 3, img_size, img_size), out)


def export(
    arch: ArchConfig,
    fmt: str,
    out: str | Path,
    img_size: int = 224,
    num_classes: int = 1000,
    checkpoint: str | Path | None = None,
    seed: int = 0,
) -> dict:
    """Export ``arch`` (weights from ``checkpoint``, else freshly initialised from ``seed``) as ``fmt``
    (``onnx``, ``coreml`` or ``executorch``) to ``out``; returns the format, the path and, for ONNX and
    ExecuTorch, the max abs difference to PyTorch's logits (for Core ML, the target)."""
    if fmt not in FORMATS:
        raise NasError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    with torch.random.fork_rng(devices=[]):  # the same seed, the same file; the caller's generator untouched
        torch.manual_seed(seed)
        model = build_static(arch, img_size=img_size, num_classes=num_classes)
    if checkpoint:
        load_weights(model, checkpoint)
    out = Path(out)
    if fmt == "onnx":
        return {"format": "onnx", "path": str(out), "max_abs_diff": export_onnx(model, img_size, out)}
    if fmt == "executorch":
        return {"format": "executorch", "path": str(out), **export_executorch(model, img_size, out)}
    export_coreml(model, img_size, out)
    return {"format": "coreml", "path": str(out), "target": "iOS16 mlprogram"}
