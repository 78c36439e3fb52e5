"""Export a fixed architecture to ONNX (checked against PyTorch with ONNX Runtime), Core ML, or an
ExecuTorch program for Android's XNNPACK backend (checked against PyTorch in the runtime here); the
last two also in int8 (:mod:`nas.quantize`), with the float and int8 networks' top-1 on the user's data."""

from __future__ import annotations

import io
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_bytes_atomic
from nas.core.errors import NasError
from nas.core.families import build_static
from nas.latency.xnnpack import export_executorch, export_executorch_int8
from nas.metrics.accuracy import top1
from nas.quantize import (
    COREML_INT8_SCHEME,
    COREML_WEIGHT_THRESHOLD,
    XNNPACK_INT8_SCHEME,
    Int8Export,
    QuantizationImages,
    coreml_int8_weights,
    float_operators,
    program_top1,
    quantize_int8,
)
from nas.runs.checkpoint import load_checkpoint

FORMATS = ("onnx", "coreml", "executorch")
#: The formats each quantization ships in (ONNX is exported in float only).
QUANTIZED_FORMATS = {"int8": ("executorch", "coreml")}


@dataclass(frozen=True)
class TrainedWeights:
    """A trained network's weights and what it was trained as (``nas train`` records the architecture,
    input size and class count in its checkpoint; a plain state dict records none of them)."""

    path: Path
    state: dict
    arch: ArchConfig | None = None
    img_size: int | None = None
    num_classes: int | None = None


def _checkpoint_file(path: str | Path, runs: str) -> Path:
    """``path``, or the ``checkpoint.pt`` of the run folder ``path`` (``runs`` names what made it)."""
    path = Path(path)
    if not path.is_dir():
        return path
    if not (path / "checkpoint.pt").is_file():
        raise NasError(f"{path}: a run folder without checkpoint.pt; give a {runs} run folder or a checkpoint")
    return path / "checkpoint.pt"


def _recorded_sizes(saved: dict) -> dict[str, int | None]:
    """The input size and class count a checkpoint records (None where it records none)."""
    keys = ("img_size", "num_classes")
    return {k: saved[k] if isinstance(saved.get(k), int) and saved[k] > 0 else None for k in keys}


def read_trained(path: str | Path) -> TrainedWeights:
    """The weights in ``path``: a ``nas train`` checkpoint, a run folder holding one (``checkpoint.pt``),
    or a plain state dict. A supernet's checkpoint is refused: its weights rank sub-networks, and the
    network to ship is trained from scratch (``nas train ARCH``)."""
    path = _checkpoint_file(path, "nas train")
    saved = load_checkpoint(path)
    if "model" not in saved:  # a plain state dict
        return TrainedWeights(path, saved)
    if "space" in saved and "arch" not in saved:
        raise NasError(
            f"{path}: is a supernet's checkpoint (space {saved['space']}); export a trained network: "
            "nas train ARCH --run RUN, then nas export ARCH --checkpoint RUN"
        )
    arch = ArchConfig.from_dict(saved["arch"], f"{path}: arch") if isinstance(saved.get("arch"), dict) else None
    return TrainedWeights(path, saved["model"], arch, **_recorded_sizes(saved))


def recorded_shape(path: str | Path) -> TrainedWeights:
    """The input size and class count a run folder's checkpoint (``nas train`` or ``nas train-supernet``),
    or a checkpoint file, records; its tensors are mapped, not read."""
    path = _checkpoint_file(path, "nas train or train-supernet")
    return TrainedWeights(path, {}, **_recorded_sizes(load_checkpoint(path, mmap=True)))


def shape_from(weights: TrainedWeights | None, img_size: int | None, num_classes: int | None) -> tuple[int, int]:
    """The input size and class count to build: the flags', else the checkpoint's, else 224 and 1000. A
    flag that disagrees with what the checkpoint was trained with is refused (its weights would not fit)."""
    for flag, given, recorded in (
        ("--img-size", img_size, weights and weights.img_size),
        ("--num-classes", num_classes, weights and weights.num_classes),
    ):
        if given is not None and recorded and given != recorded:
            raise NasError(
                f"{flag} {given} disagrees with {weights.path}, trained with {flag} {recorded}; "
                f"leave {flag} out to take the checkpoint's"
            )
    img_size = img_size or (weights and weights.img_size) or 224
    return img_size, num_classes or (weights and weights.num_classes) or 1000


def mismatch_words(expected: dict, got: dict, limit: int = 3) -> str:
    """The first keys where a state dict ``got`` does not fit a network's ``expected``, and the flag
    that most likely fixes it: the classifier's rows are the class count, an attention bias table's
    size the input size; anything else is another architecture."""
    shapes = [k for k in expected if k in got and tuple(got[k].shape) != tuple(expected[k].shape)]
    missing = [k for k in expected if k not in got]
    unexpected = [k for k in got if k not in expected]
    parts = [f"{k} is {list(got[k].shape)} in the checkpoint, {list(expected[k].shape)} here" for k in shapes[:limit]]
    for word, keys in (("missing", missing), ("unexpected", unexpected)):
        if keys:
            more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
            parts.append(f"{word} {', '.join(keys[:limit])}{more}")
    if shapes and all(k.startswith("head") for k in shapes) and not missing and not unexpected:
        hint = f"give --num-classes {got[shapes[0]].shape[0]}"
    elif shapes and all("attention_bias" in k for k in shapes) and not missing and not unexpected:
        hint = "give the --img-size it was trained at"
    else:
        hint = "give the ARCH it was trained as"
    return f"{'; '.join(parts)} ({hint})"


def load_weights(model: nn.Module, checkpoint: str | Path | TrainedWeights) -> None:
    """Weights from a ``nas train`` checkpoint (``model`` key), its run folder, or a plain state dict; a
    mismatch is one line naming the first keys that do not fit and the flag to fix."""
    weights = checkpoint if isinstance(checkpoint, TrainedWeights) else read_trained(checkpoint)
    expected = model.state_dict()
    if set(expected) != set(weights.state) or any(
        tuple(weights.state[k].shape) != tuple(v.shape) for k, v in expected.items()
    ):
        raise NasError(f"{weights.path}: does not fit the architecture: {mismatch_words(expected, weights.state)}")
    model.load_state_dict(weights.state, strict=True)


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


def to_coreml(
    module: torch.nn.Module, x: torch.Tensor, path: Path, precision: str = "float16", int8_weights: bool = False
) -> int:
    """Trace ``module`` on ``x`` and save it as a Core ML ML program (iOS 16) at ``path`` (atomically:
    converted into a temporary folder, then renamed); with ``int8_weights`` its weights are 8-bit
    (:data:`nas.quantize.COREML_INT8_SCHEME`). Returns how many weights are 8-bit."""
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
        if int8_weights:
            from coremltools.optimize.coreml import OpLinearQuantizerConfig, OptimizationConfig, linear_quantize_weights

            config = OpLinearQuantizerConfig(mode="linear_symmetric", weight_threshold=COREML_WEIGHT_THRESHOLD)
            mlmodel = linear_quantize_weights(mlmodel, OptimizationConfig(global_config=config))
    program = mlmodel.get_spec().mlProgram.functions["main"]
    quantized = sum(
        op.type == "constexpr_affine_dequantize"
        for block in program.block_specializations.values()
        for op in block.operations
    )
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        mlmodel.save(str(tmp / path.name))
        if path.exists():
            shutil.rmtree(path)
        (tmp / path.name).rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return quantized


#: The file each format is written as (ONNX's name is free).
OUT_SUFFIX = {
    "executorch": (".pte", "an ExecuTorch program is a .pte file"),
    "coreml": (".mlpackage", "a Core ML ML program is a .mlpackage folder"),
}


def check_out(fmt: str, out: str | Path) -> None:
    """Refuse an output name the format cannot be written as."""
    if fmt in OUT_SUFFIX and Path(out).suffix != OUT_SUFFIX[fmt][0]:
        suffix, what = OUT_SUFFIX[fmt]
        raise NasError(f"{out}: {what}; name the output NAME{suffix}")


def export_coreml(model: nn.Module, img_size: int, out: Path, int8_weights: bool = False) -> int:
    """Write a Core ML ML program for iOS 16 (float16 compute; 8-bit weights with ``int8_weights``) at
    ``out`` (``.mlpackage``); return how many weights are 8-bit."""
    check_out("coreml", out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return to_coreml(model, torch.randn(1, 3, img_size, img_size), out, int8_weights=int8_weights)


def _export_int8(model: nn.Module, fmt: str, out: Path, img_size: int, num_classes: int, plan: Int8Export) -> dict:
    """The int8 export of ``model`` in ``fmt`` and its accuracy report: XNNPACK's static int8 program
    (calibrated on ``plan``'s images, checked in the runtime, scored through it image by image) or Core ML's
    8-bit weights (scored as the same rounding of the weights in PyTorch: Core ML does not run here)."""
    images = QuantizationImages(plan, img_size, num_classes) if plan.data else None
    if fmt == "executorch":
        if images is None:
            raise NasError(
                "--format executorch --quantize int8 needs --calibration DATA: its images set the activation ranges"
            )
        calibration = images.calibration()
        quantized = quantize_int8(model, calibration)
        report, program = export_executorch_int8(quantized, torch.cat(calibration)[:8], out)
        report.update(
            scheme=XNNPACK_INT8_SCHEME,
            calibration_images=sum(len(batch) for batch in calibration),
            stayed_float=float_operators(quantized),
        )

        def int8_top1(loader) -> float:
            return program_top1(program, loader)

        scored_by = "the ExecuTorch program, image by image"
    else:
        rounded, count = coreml_int8_weights(model)
        report = {"scheme": COREML_INT8_SCHEME, "int8_weights": export_coreml(model, img_size, out, True)}
        report["int8_weights_scored"] = count

        def int8_top1(loader) -> float:
            return top1(rounded, loader)

        scored_by = (
            "PyTorch, its weights rounded as Core ML's are (activations float32: Core ML runs on Apple OSes only)"
        )
    if images is not None:
        loader = images.validation()
        report["accuracy"] = {
            "images": images.validation_name,
            "float_top1": top1(model, loader),
            "int8_top1": int8_top1(loader),
            "int8_scored_by": scored_by,
        }
    return report


def export(
    arch: ArchConfig | None,
    fmt: str,
    out: str | Path,
    img_size: int | None = None,
    num_classes: int | None = None,
    checkpoint: str | Path | None = None,
    seed: int = 0,
    int8: Int8Export | None = None,
) -> dict:
    """Export ``arch`` (weights from ``checkpoint``, else freshly initialised from ``seed``) as ``fmt``
    (``onnx``, ``coreml`` or ``executorch``) to ``out``; returns the format, the path, the input size and
    class count and, for ONNX and ExecuTorch, the max abs difference to PyTorch's logits (for Core ML,
    the target). The checkpoint's recorded architecture, input size and class count are the defaults;
    ``arch`` may then be None, and a flag or ``arch`` that disagrees with them is refused. With ``int8``
    (ExecuTorch or Core ML) the network is quantized, and the result has its ``int8`` report."""
    if fmt not in FORMATS:
        raise NasError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if int8 is not None and fmt not in QUANTIZED_FORMATS["int8"]:
        raise NasError(f"--quantize int8 exports {' or '.join(QUANTIZED_FORMATS['int8'])}, not {fmt}")
    check_out(fmt, out)  # before any work: quantizing and lowering take minutes
    weights = read_trained(checkpoint) if checkpoint else None
    if weights is not None and weights.arch is not None:
        if arch is None:
            arch = weights.arch
        elif arch.digest != weights.arch.digest:
            raise NasError(
                f"{weights.path}: trained {weights.arch.family} {weights.arch.digest}, not the ARCH given "
                f"({arch.digest}); leave ARCH out to export the checkpoint's"
            )
    if arch is None:
        raise NasError("give ARCH (a named member or an arch YAML), or a --checkpoint from nas train, which records it")
    img_size, num_classes = shape_from(weights, img_size, num_classes)
    with torch.random.fork_rng(devices=[]):  # the same seed, the same file; the caller's generator untouched
        torch.manual_seed(seed)
        model = build_static(arch, img_size=img_size, num_classes=num_classes)
    if weights is not None:
        load_weights(model, weights)
    out = Path(out)
    shape = {"img_size": img_size, "num_classes": num_classes}
    if int8 is not None:
        report = _export_int8(model, fmt, out, img_size, num_classes, int8)
        return {"format": fmt, "path": str(out), **shape, "quantize": "int8", "int8": report}
    if fmt == "onnx":
        return {"format": "onnx", "path": str(out), **shape, "max_abs_diff": export_onnx(model, img_size, out)}
    if fmt == "executorch":
        return {"format": "executorch", "path": str(out), **shape, **export_executorch(model, img_size, out)}
    export_coreml(model, img_size, out)
    return {"format": "coreml", "path": str(out), **shape, "target": "iOS16 mlprogram"}
