"""The graphs that are priced: timm models as they run on a phone (fused where timm can) and blocks.

Published latencies are those of the fused model, so timm models are re-parameterised first where timm
can fuse them (MobileOne, FastViT, RepViT, LeViT...). Operators are recorded on the meta device.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cache

from nas.core.errors import NasError
from nas.core.signature import BlockSignature
from nas.latency.opcount import OpCost, record_ops
from nas.metrics.signatures import block_input_shape, build_block

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PricedNetwork:
    """The graph a latency is predicted for: its operators, parameters and whether it was fused."""

    ops: tuple[OpCost, ...] = field(repr=False)
    params: int
    fusion: str  # "fused", "nothing to fuse" or "not fused: <why>"

    @property
    def fused_ok(self) -> bool:
        return not self.fusion.startswith("not fused")


def create_timm_model(model_name: str, img_size: int = 224, **kwargs):
    """``timm.create_model`` for ``img_size`` inputs: models with a fixed grid (attention biases)
    are built for that size; models without an ``img_size`` argument are built as they are."""
    import timm

    try:
        try:
            return timm.create_model(model_name, pretrained=False, img_size=img_size, **kwargs)
        except TypeError:
            return timm.create_model(model_name, pretrained=False, **kwargs)
    except Exception as exc:  # noqa: BLE001 - timm raises RuntimeError / KeyError for unknown names
        raise NasError(f"timm cannot build {model_name!r}: {str(exc).splitlines()[0]}") from None


def _fusable(model) -> bool:
    # What timm.models.reparameterize_model acts on.
    return any(
        hasattr(m, "fuse") or hasattr(m, "reparameterize") or hasattr(m, "switch_to_deploy")
        for m in model.modules()
        if m is not model
    )


def fused_timm_model(model_name: str, img_size: int = 224, num_classes: int = 1000, device: str = "cpu"):
    """A timm model as it runs at inference: ``(model, fusion)``, re-parameterised where timm can fuse
    it (``fusion`` is ``"fused"``, ``"nothing to fuse"`` or ``"not fused: <why>"``).

    Fusion needs real tensors (it fails on the meta device for MobileOne and FastViT), so a fusable
    model is built on the CPU and fused there (seconds); ``device="meta"`` then only moves it.
    """
    from timm.models import reparameterize_model

    model = create_timm_model(model_name, img_size, device="meta", num_classes=num_classes)
    if not _fusable(model):
        if device != "meta":
            model = create_timm_model(model_name, img_size, num_classes=num_classes).eval().to(device)
        return model, "nothing to fuse"
    model = create_timm_model(model_name, img_size, num_classes=num_classes).eval()
    try:
        model = reparameterize_model(model, inplace=True)
        fusion = "fused"
    except Exception as exc:  # noqa: BLE001 - any failure leaves the unfused graph, said so
        fusion = f"not fused: {type(exc).__name__}" + (f": {str(exc).splitlines()[0]}" if str(exc) else "")
        log.warning("%s: timm cannot re-parameterise it (%s); pricing the unfused graph", model_name, fusion)
        model = create_timm_model(model_name, img_size, num_classes=num_classes).eval()
    return model.to(device), fusion


@cache
def timm_network(model_name: str, img_size: int = 224, num_classes: int = 1000) -> PricedNetwork:
    """The graph of a timm model that runs on a phone (:func:`fused_timm_model`): its operators
    (recorded on the meta device), parameters and fusion status."""
    model, fusion = fused_timm_model(model_name, img_size, num_classes, device="meta")
    params = sum(p.numel() for p in model.parameters())
    return PricedNetwork(tuple(record_ops(model, (1, 3, img_size, img_size))), params, fusion)


def timm_ops(model_name: str, img_size: int = 224) -> tuple[OpCost, ...]:
    """Operators of a timm model at ``img_size``, re-parameterised first where timm can fuse it."""
    return timm_network(model_name, img_size).ops


def block_ops(family: str, sig: BlockSignature) -> list[OpCost]:
    """The operators of block ``sig`` (recorded on the meta device), as the cost model prices them."""
    return record_ops(build_block(family, sig, device="meta"), block_input_shape(family, sig))
