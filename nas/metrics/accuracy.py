"""Accuracy of sub-networks from supernet weights: extract, recalibrate BatchNorm, score.

Sub-networks share BatchNorm statistics in the supernet, which fit none of them; every evaluation
therefore re-estimates them on a fixed, seeded set of training images (cumulative averages, as in
slimmable networks) before scoring the held-out split.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch
import torch.nn as nn
from torch.optim.swa_utils import update_bn

from nas.core.arch import ArchConfig
from nas.core.families import extract
from nas.quantize import quantize_int8


def autocast_for(amp: str, device: torch.device | str):
    """Autocast to ``amp`` (``bf16``/``fp16``) on ``device``; a no-op context for ``none``."""
    if amp == "none":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)


@torch.no_grad()
def top1(model: nn.Module, loader: Iterable, device="cpu", amp: str = "none") -> float:
    """Top-1 accuracy of ``model`` on ``loader`` (under ``amp`` autocast: bf16 or fp16)."""
    model.eval()
    correct = total = 0
    for images, labels in loader:
        with autocast_for(amp, device):
            logits = model(images.to(device, non_blocking=True))
        correct += (logits.argmax(dim=1).cpu() == labels).sum().item()
        total += labels.numel()
    return correct / max(total, 1)


def subnet_accuracy(
    supernet: nn.Module,
    arch: ArchConfig,
    calib_loader: Iterable,
    eval_loader: Iterable,
    device="cpu",
    amp: str = "none",
    quantize: str | None = None,
) -> float:
    """Top-1 of ``arch``: extracted (the supernet is not touched), BN recalibrated, scored; with
    ``quantize`` (``int8``) quantized after the recalibration, on the same calibration images, then scored
    (:func:`nas.quantize.quantize_int8`: int8 arithmetic simulated in PyTorch, on the CPU)."""
    model = extract(supernet, arch)
    model.distilled_training = False
    # BatchNorm statistics of this sub-network: a cumulative average over the calibration batches.
    update_bn(calib_loader, model, device=torch.device(device))
    model.eval()
    if quantize == "int8":
        model = quantize_int8(model.cpu(), [images.cpu() for images, _ in calib_loader])
        device = "cpu"
    return top1(model, eval_loader, device, amp)
