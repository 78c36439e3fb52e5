"""Export a fixed architecture to ONNX (checked against PyTorch with ONNX Runtime) or Core ML."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from nas.arch import ArchConfig
from nas.errors import NasError

FORMATS = ("onnx", "coreml")


def load_weights(model: nn.Module, checkpoint: str | Path) -> None:
    """Weights from a ``nas train`` checkpoint (``model`` key) or a plain state dict."""
    from nas.checkpoint import load_checkpoint

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
        torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=17, input_names=[input_name],
                          output_names=["output"])
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
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return diff


def export_coreml(model: nn.Module, img_size: int, out: Path) -> None:
    """Write a Core ML ML program for iOS 16 (float16 compute) at ``out`` (``.mlpackage``)."""
    from nas.latency.onphone import to_coreml

    if out.suffix != ".mlpackage":
        raise NasError(f"{out}: a Core ML ML program is a .mlpackage folder; name the output NAME.mlpackage")
    out.parent.mkdir(parents=True, exist_ok=True)
    to_coreml(model, torch.randn(1, 3, img_size, img_size), out)


def export(arch: ArchConfig, fmt: str, out: str | Path, img_size: int = 224, num_classes: int = 1000,
           checkpoint: str | Path | None = None) -> dict:
    from supernets import build_static

    if fmt not in FORMATS:
        raise NasError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    model = build_static(arch, img_size=img_size, num_classes=num_classes)
    if checkpoint:
        load_weights(model, checkpoint)
    out = Path(out)
    if fmt == "onnx":
        return {"format": "onnx", "path": str(out), "max_abs_diff": export_onnx(model, img_size, out)}
    export_coreml(model, img_size, out)
    return {"format": "coreml", "path": str(out), "target": "iOS16 mlprogram"}
