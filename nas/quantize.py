"""Int8 post-training quantization, the way mobile networks ship.

Two schemes, one per runtime:

- **ExecuTorch / XNNPACK (Android)**: static int8 activations and weights (per output channel),
  through torchao's PT2E flow with ExecuTorch's ``XNNPACKQuantizer``: the network is exported, observers
  are inserted, a few hundred calibration images set the activation ranges, and the result is a graph of
  float operators between quantize/dequantize pairs that XNNPACK's partitioner lowers to int8 kernels.
  :func:`quantize_int8` returns that graph (it runs in PyTorch on any batch size, so a search can score it).
- **Core ML (iOS)**: 8-bit weights (coremltools' ``linear_quantize_weights``: symmetric, per output
  channel, range -127..127, weights of more than 2,048 elements), activations in float16.
  :func:`coreml_int8_weights` applies the same rounding to a PyTorch copy of the network, so its accuracy
  can be measured here, where Core ML itself does not run.
"""

from __future__ import annotations

import copy
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn as nn

from nas.config.recipe import Recipe
from nas.core.errors import NasError
from nas.data import eval_loader
from nas.data.source import balanced_indices, load_splits
from nas.latency.xnnpack import require_executorch

QUANTIZATIONS = ("int8",)
#: PT2E's scheme, recorded in tables and export reports.
XNNPACK_INT8_SCHEME = (
    "PT2E post-training quantization, ExecuTorch XNNPACKQuantizer: symmetric int8 weights per output channel, "
    "static int8 activations calibrated on sample inputs"
)
#: coremltools' default for ``linear_quantize_weights``: smaller weights stay float16.
COREML_WEIGHT_THRESHOLD = 2048
COREML_INT8_SCHEME = (
    "coremltools linear_quantize_weights: 8-bit weights (linear symmetric, per output channel, -127..127) of "
    f"every weight with more than {COREML_WEIGHT_THRESHOLD} elements; activations float16"
)

#: Graph nodes that move or view data and compute nothing: never reported as "stayed float".
_LAYOUT_OPS = ("reshape", "view", "permute", "transpose", "dropout", "flatten", "expand", "clone", "contiguous")
_QDQ_OPS = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel")


def check_quantization(quantize: str | None) -> str | None:
    """``quantize`` if it is a known scheme (or None), else a :class:`NasError` naming the known ones."""
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise NasError(f"unknown quantization {quantize!r}; choose {', '.join(QUANTIZATIONS)}")
    return quantize


def _batched(batches: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    batches = [b for b in batches]
    if not batches:
        raise NasError("int8 quantization needs calibration inputs; none were given")
    return batches


def quantize_int8(model: nn.Module, calibration: Iterable[torch.Tensor]) -> torch.fx.GraphModule:
    """``model`` quantized for XNNPACK: exported with a dynamic batch, observed on every ``calibration``
    batch (activation ranges: min/max, as XNNPACKQuantizer's static config sets), converted. The result
    runs in PyTorch (quantize/dequantize around float operators: the int8 arithmetic simulated) on any
    batch size, and lowers to XNNPACK's int8 kernels with :func:`nas.latency.xnnpack.lower`."""
    require_executorch()
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e import allow_exported_model_train_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    batches = _batched(calibration)
    model.eval()
    # A batch of 2 at export: a dynamic dimension cannot be traced at size 1 (it would specialise).
    example = batches[0][:1].expand(2, *batches[0].shape[1:]).contiguous()
    batch = torch.export.Dim("batch", max=4096)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # timm's cached attention bias (see xnnpack.lower)
        exported = torch.export.export(model, (example,), dynamic_shapes=({0: batch},)).module()
        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(exported, quantizer)
        for images in batches:
            prepared(images)
        quantized = convert_pt2e(prepared)
    allow_exported_model_train_eval(quantized)  # .eval() works on it as on any module
    return quantized


TIMING_CALIBRATION = "each block and network on 4 inputs of its shape drawn from seed 0 (see timing_calibration)"


def timing_calibration(x: torch.Tensor, batches: int = 4) -> list[torch.Tensor]:
    """What a block is calibrated on before it is timed in int8: ``x`` and a few more inputs of its shape,
    drawn from a fixed seed. The ranges they set do not change which int8 kernels run, nor their time."""
    generator = torch.Generator().manual_seed(0)
    return [x] + [torch.randn(x.shape, generator=generator) for _ in range(batches - 1)]


def float_operators(quantized: torch.fx.GraphModule) -> dict[str, int]:
    """The computing operators of a :func:`quantize_int8` graph whose activation input is not int8 (it
    does not come from a dequantize node): they run in float, with a conversion before and after. Layout
    operators (reshape, permute, ...) are left out; they compute nothing."""
    counts: Counter[str] = Counter()
    for node in quantized.graph.nodes:
        target = str(node.target)
        if node.op != "call_function" or any(k in target for k in _QDQ_OPS + _LAYOUT_OPS + ("getitem", "sym_")):
            continue
        # The activation inputs: a convolution's or linear layer's weight and bias are dequantized or
        # float constants by design; elementwise and matrix products take two activations.
        arity = 1 if ("conv" in target or "linear" in target or "norm" in target) else 2
        inputs = [a for a in node.args[:arity] if isinstance(a, torch.fx.Node) and a.op != "get_attr"]
        if any("dequantize" not in str(a.target) for a in inputs):
            counts[target.removeprefix("aten.").removesuffix(".default")] += 1
    return dict(sorted(counts.items()))


def coreml_int8_weights(model: nn.Module) -> tuple[nn.Module, int]:
    """A copy of ``model`` whose convolution and linear weights are rounded as coremltools'
    ``linear_quantize_weights`` rounds them (symmetric, per output channel: ``scale = max|w| / 127``,
    ``w = round(w / scale) * scale``; weights of at most 2,048 elements untouched), and how many were.
    Core ML folds BatchNorm into the convolution before quantizing; a per-output-channel scale commutes
    with that fold, so rounding the unfolded weight gives the same network."""
    quantized = copy.deepcopy(model).eval()
    count = 0
    with torch.no_grad():
        for module in quantized.modules():
            if not isinstance(module, (nn.Conv2d, nn.Linear)) or module.weight.numel() <= COREML_WEIGHT_THRESHOLD:
                continue
            w = module.weight
            scale = w.abs().amax(dim=tuple(range(1, w.dim())), keepdim=True) / 127.0
            scale = torch.where(scale > 0, scale, torch.ones_like(scale))
            w.copy_(torch.clamp(torch.round(w / scale), -127, 127) * scale)
            count += 1
    return quantized, count


@dataclass(frozen=True)
class Int8Export:
    """What ``nas export --quantize int8`` calibrates on and scores: ``calibration_images`` of ``data``'s
    training split (balanced over the classes, drawn by ``seed``) set the activation ranges; the float and
    int8 networks' top-1 are measured on ``eval_images`` of its validation split (None: all of it). Without
    ``data`` (Core ML's weights need no calibration) nothing is scored."""

    data: str | None = None
    calibration_images: int = 256
    eval_images: int | None = None
    seed: int = 0


class QuantizationImages:
    """A data set's images as quantization reads them: at ``img_size`` through the evaluation transform
    (resize, center crop, normalise), calibration images from the training split and scoring images from
    the validation split (the val/ or test/ folder, else the held-out search split: never calibrated on)."""

    def __init__(self, plan: Int8Export, img_size: int, num_classes: int):
        self.plan = plan
        self.recipe = Recipe(img_size=img_size, cache_images=False, loader_workers=0)
        self.splits = load_splits(plan.data, self.recipe, plan.seed, decode_all=False)
        if self.splits.num_classes != num_classes:
            raise NasError(
                f"{plan.data}: {self.splits.num_classes} classes, but the network has {num_classes} outputs; "
                "give the data it was trained on (or --num-classes to match)"
            )

    def _loader(self, source, count: int | None):
        indices = None if count is None else balanced_indices(source, count, self.plan.seed)
        return eval_loader(source, self.recipe, indices)

    def calibration(self) -> list[torch.Tensor]:
        """The calibration batches (images only)."""
        return [images for images, _ in self._loader(self.splits.train, self.plan.calibration_images)]

    def validation(self):
        """A loader of the scoring images and their labels; ``name`` says which images they are."""
        return self._loader(self.splits.val, self.plan.eval_images)

    @property
    def validation_name(self) -> str:
        n = len(self.splits.val) if self.plan.eval_images is None else min(self.plan.eval_images, len(self.splits.val))
        return f"{n} images of {self.splits.val_name}"


@torch.no_grad()
def program_top1(program, loader) -> float:
    """Top-1 of an ExecuTorch program (:class:`nas.latency.xnnpack.Program`, batch 1) on ``loader``: each
    image through the runtime, as the phone will run it."""
    correct = total = 0
    for images, labels in loader:
        for image, label in zip(images, labels):
            correct += int(program(image[None]).argmax(dim=1).item() == int(label))
            total += 1
    return correct / max(total, 1)
