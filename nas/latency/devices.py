"""The devices a latency table can describe, and how their numbers are obtained."""

from __future__ import annotations

from dataclasses import dataclass

from nas.core.errors import NasError


@dataclass(frozen=True)
class Device:
    """A latency target.

    ``kind`` is ``local`` (measured on this machine by ``nas build-table``) or ``phone`` (predicted
    from published measurements by a fitted cost model, or imported from timings on a real phone).
    """

    name: str
    kind: str
    runtime: str
    dtype: str
    description: str
    published: str | None = None  # the device's name in latency_tables/published/published_latency.csv
    #: The campaign whose setup (OS, runtime) the device's predicted table describes (factor 1).
    reference_campaign: str | None = None
    #: What ``nas export-blocks`` writes for a phone to time: ``coreml`` (Xcode) or ``executorch``
    #: (``executor_runner`` over adb).
    export_runtime: str = "coreml"
    #: ``int8``: every block and network is quantized before it is timed (:mod:`nas.quantize`).
    quantization: str | None = None
    #: The same device's int8 twin (what ``--quantize int8`` selects).
    int8: str | None = None

    @property
    def executorch(self) -> bool:
        """Measured here through ExecuTorch's XNNPACK backend (``xnnpack``, ``xnnpack-int8``)."""
        return self.runtime.startswith("executorch")


DEVICES: dict[str, Device] = {
    d.name: d
    for d in (
        Device("cpu", "local", "pytorch-eager", "float32", "this machine's CPU, PyTorch eager, batch 1"),
        Device(
            "onnxruntime-cpu",
            "local",
            "onnxruntime (CPUExecutionProvider)",
            "float32",
            "this machine's CPU, ONNX Runtime, batch 1",
        ),
        Device("cuda", "local", "pytorch-eager-cuda", "float32", "this machine's CUDA GPU, PyTorch eager, batch 1"),
        Device(
            "xnnpack",
            "local",
            "executorch (XNNPACK delegate, CPU)",
            "float32",
            "this machine's CPU through ExecuTorch's XNNPACK backend, the kernels Android apps ship, batch 1",
            int8="xnnpack-int8",
        ),
        Device(
            "xnnpack-int8",
            "local",
            "executorch (XNNPACK delegate, CPU)",
            "int8",
            "this machine's CPU through ExecuTorch's XNNPACK backend, every block quantized to int8 (PT2E, "
            "static activations), batch 1",
            quantization="int8",
        ),
        Device(
            "iphone12",
            "phone",
            "coreml (neural engine, iOS 16)",
            "float16",
            "Apple iPhone 12, Core ML, batch 1 (EfficientFormerV2 tab. 2)",
            published="iphone12",
            reference_campaign="2212.08059-tab2",
        ),
        Device(
            "iphone14",
            "phone",
            "coreml (neural engine)",
            "float16",
            "Apple iPhone 14, Core ML, batch 1 (SwiftFormer tab. 2)",
            published="iphone14",
            reference_campaign="2303.15446-tab2",
        ),
        Device(
            "pixel6",
            "phone",
            "xnnpack (CPU)",
            "float32",
            "Google Pixel 6 CPU, batch 1, ReLU in every model (EfficientFormerV2 tab. 2)",
            published="pixel6-cpu",
            export_runtime="executorch",
            reference_campaign="2212.08059-tab2",
            int8="pixel6-int8",
        ),
        Device(
            "pixel6-int8",
            "phone",
            "xnnpack (CPU)",
            "int8",
            "Google Pixel 6 CPU, batch 1, every block quantized to int8 (no published timings: "
            "timed on the phone through nas export-blocks --device pixel6 --quantize int8)",
            export_runtime="executorch",
            quantization="int8",
        ),
    )
}


def local_devices() -> list[str]:
    """The devices ``nas build-table`` measures on this machine."""
    return [name for name, d in DEVICES.items() if d.kind == "local"]


def get_device(name: str) -> Device:
    """The :class:`Device` named ``name`` (a :class:`NasError` listing the known ones otherwise)."""
    try:
        return DEVICES[name]
    except KeyError:
        raise NasError(f"unknown device {name!r}; known devices: {', '.join(DEVICES)}") from None


def quantized_device(name: str, quantize: str | None) -> str:
    """``name``, or with ``quantize`` (``int8``) its int8 twin (``xnnpack`` -> ``xnnpack-int8``); a device
    without one is a :class:`NasError` naming those that have one."""
    spec = get_device(name)
    if quantize is None or spec.quantization == quantize:
        return name
    if spec.int8 is None:
        twins = ", ".join(f"{d.name} ({d.int8})" for d in DEVICES.values() if d.int8)
        raise NasError(f"device {name} has no int8 twin; int8 is timed on {twins}")
    return spec.int8
