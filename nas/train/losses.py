"""What a training step optimises: parameter groups, the classification loss, a teacher."""

from __future__ import annotations

import logging

import torch
import torch.nn as nn

from nas.config.recipe import Recipe
from nas.core.errors import NasError
from nas.runs.checkpoint import load_checkpoint

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


class AdaptiveAlphaDivergence(nn.Module):
    """AlphaNet's in-place distillation loss (Wang et al. 2021, §3 and eq. 6): of the two
    alpha-divergences D_alpha(p || q) between the teacher's probabilities ``p`` and the student's ``q``,
    at ``alpha_min < 0`` (large when the student over-estimates the teacher's uncertainty: not sure
    enough where the teacher is) and ``alpha_max > 0`` (large when it under-estimates it: too sure
    where the teacher is not), each example takes the larger.

    The value returned is the divergence, and its gradient is that of the released code's surrogate
    (``AdaptiveLossSoft``): ``-sum_i q_i rho(w_i) log q_i`` with the importance weights
    ``w = p / q`` raised to ``alpha`` and clipped at ``iw_clip`` so that a few classes the student
    rules out cannot dominate the gradient. At ``alpha = 1`` it is cross-entropy against ``p``: the
    gradient of KL(p || q), the default in-place distillation.
    """

    def __init__(self, alpha_min: float = -1.0, alpha_max: float = 1.0, iw_clip: float = 5.0):
        super().__init__()
        if not alpha_min < 0 < alpha_max:
            raise ValueError(f"alpha_min must be below 0 and alpha_max above it, got {alpha_min} and {alpha_max}")
        self.alpha_min, self.alpha_max, self.iw_clip = alpha_min, alpha_max, iw_clip

    def divergence(self, student_logits: torch.Tensor, teacher_probs: torch.Tensor, alpha: float):
        """(D_alpha(p || q) per example, the surrogate whose gradient is D_alpha's); the importance
        weights are clipped except in the KL limit, as in the released code."""
        log_q = student_logits.log_softmax(dim=-1)
        q = log_q.detach().exp()
        ratio = teacher_probs / q
        if abs(alpha - 1.0) < 1e-3:  # the limit alpha -> 1: KL(p || q)
            value = ratio * ratio.clamp_min(1e-12).log()  # unclipped, as in the released code
            rho = ratio
            base = 0.0
        else:
            weighted = ratio.pow(alpha).clamp(0, self.iw_clip)
            value = weighted / (alpha * (alpha - 1.0))
            base = 1.0 / (alpha * (alpha - 1.0))
            rho = weighted / alpha + base
        divergence = (q * (value - base)).sum(dim=-1)
        surrogate = -(q * rho * log_q).sum(dim=-1)
        return divergence, surrogate

    def forward(self, student_logits: torch.Tensor, teacher_probs: torch.Tensor) -> torch.Tensor:
        teacher_probs = teacher_probs.detach()
        low, low_grad = self.divergence(student_logits, teacher_probs, self.alpha_min)
        high, high_grad = self.divergence(student_logits, teacher_probs, self.alpha_max)
        surrogate = torch.where(low > high, low_grad, high_grad).mean()
        # the value logged is the divergence; the gradient is the surrogate's
        return torch.maximum(low, high).mean().detach() + surrogate - surrogate.detach()


def inplace_distill_loss(recipe: Recipe) -> nn.Module:
    """The loss a sandwich's smaller sub-networks learn the largest one's soft outputs with:
    ``loss(student_logits, teacher_probs)``."""
    if recipe.inplace_distill_divergence == "alpha":
        return AdaptiveAlphaDivergence(
            recipe.inplace_distill_alpha_min, recipe.inplace_distill_alpha_max, recipe.inplace_distill_iw_clip
        )
    from timm.loss import SoftTargetCrossEntropy

    return SoftTargetCrossEntropy()


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
