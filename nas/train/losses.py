"""What a training step optimises: parameter groups, the classification loss, a teacher."""

from __future__ import annotations

import logging

import torch.nn as nn

from nas.checkpoint import load_checkpoint
from nas.core.errors import NasError
from nas.recipe import Recipe

log = logging.getLogger(__name__)


def param_groups(params: list[tuple[str, nn.Parameter]], weight_decay: float, no_decay: set[str]):
    """AdamW groups: no weight decay for biases, norms, layer scales and attention biases (timm's rule)."""
    decay, no = [], []
    for name, p in params:
        if not p.requires_grad:
            continue
        (no if p.ndim <= 1 or name.endswith(".bias") or name in no_decay else decay).append(p)
    return [{"params": no, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def classification_loss(recipe: Recipe, num_classes: int):
    """(mixup_fn or None, loss(logits, targets)) as the recipe says, from timm."""
    from timm.data import Mixup
    from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy

    if recipe.mixup > 0 or recipe.cutmix > 0:
        mixup = Mixup(
            mixup_alpha=recipe.mixup,
            cutmix_alpha=recipe.cutmix,
            label_smoothing=recipe.label_smoothing,
            num_classes=num_classes,
        )
        return mixup, SoftTargetCrossEntropy()
    if recipe.label_smoothing > 0:
        return None, LabelSmoothingCrossEntropy(recipe.label_smoothing)
    return None, nn.CrossEntropyLoss()


def load_teacher(recipe: Recipe, num_classes: int, device) -> nn.Module | None:
    """A timm teacher for hard distillation (``recipe.teacher``), with its checkpoint if given."""
    if not recipe.teacher:
        return None
    import timm

    try:
        teacher = timm.create_model(recipe.teacher, num_classes=num_classes)
    except Exception as exc:  # noqa: BLE001
        raise NasError(f"teacher: timm cannot build {recipe.teacher!r}: {exc}") from None
    if recipe.teacher_checkpoint:
        state = load_checkpoint(recipe.teacher_checkpoint, "teacher checkpoint")
        state = state.get("model", state.get("state_dict", state))
        try:
            teacher.load_state_dict(state)
        except RuntimeError as exc:
            raise NasError(
                f"{recipe.teacher_checkpoint}: does not fit {recipe.teacher}: {str(exc).splitlines()[0]}"
            ) from None
    else:
        log.warning("teacher %s has no checkpoint: distilling from random weights", recipe.teacher)
    return teacher.to(device).eval()
