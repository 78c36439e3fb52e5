"""Training a fixed architecture from scratch (``nas train``).

The searched network and its baselines are trained the way the papers train their final models
(EfficientFormerV2 §5.1): from random initialisation, with the recipe's optimizer, schedule,
augmentation, optional EMA and optional hard distillation from a teacher, on the loop supernet
training uses (:class:`nas.train.loop.Trainer`), so the two never disagree about data or schedule.

With a val/ (or test/) folder the network trains on every training image and is scored on that
folder; without one the search split stays held out and is the score.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch.nn as nn

from nas.core.arch import ArchConfig
from nas.core.families import build_static
from nas.data import eval_loader
from nas.metrics import count_macs, count_params
from nas.metrics.accuracy import top1
from nas.train.loop import Trainer, TrainingRequest


class FixedTrainer(Trainer):
    """Trains one fixed architecture from scratch (``nas train``) on the shared training loop."""

    command = "train"
    compilable = True

    def __init__(self, request: FixedTrainingRequest):
        self.arch, self.label = request.arch, request.label or request.arch.digest
        config = {
            "arch": self.arch.to_dict(),
            "arch_digest": self.arch.digest,
            "label": self.label,
            "family": self.arch.family,
            "space": request.space,
        }
        super().__init__(request, config, hold_out_search=False)

    @property
    def description(self) -> str:
        return f"train {Path(self.label).stem if self.label.endswith(('.yaml', '.yml')) else self.label}"

    def build_net(self, num_classes: int) -> nn.Module:
        return build_static(
            self.arch, img_size=self.recipe.img_size, num_classes=num_classes, drop_path_rate=self.recipe.drop_path
        )

    def extra_state(self) -> dict[str, Any]:
        return {"arch": self.arch.to_dict(), "family": self.arch.family}

    def train_step(self, images, targets, teacher_labels) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss, _ = self.supervised_loss(self.model(images), targets, teacher_labels)
        self.backward(loss)
        self.optimizer_step(self.net.parameters())
        return loss.item()

    def evaluate(self) -> dict[str, Any]:
        n = self.splits.num_classes
        result: dict[str, Any] = {
            "arch": self.label,
            "digest": self.arch.digest,
            "family": self.arch.family,
            "arch_config": self.arch.to_dict(),
            "val": self.splits.val_name,
            "val_images": len(self.splits.val),
            "num_classes": n,
            "img_size": self.recipe.img_size,
            "params": count_params(self.arch, self.recipe.img_size, n),
            "macs": count_macs(self.arch, self.recipe.img_size, n),
        }
        loader = eval_loader(self.splits.val, self.recipe, device_type=self.device.type)
        for suffix, net in self.eval_nets():
            result[f"top1{suffix}"] = top1(net, loader, self.device, self.recipe.amp)
        return result


@dataclass(frozen=True)
class FixedTrainingRequest(TrainingRequest):
    """What ``nas train`` is asked to do: ``arch``, and :class:`TrainingRequest`'s fields by keyword
    (``init``: released weights to fine-tune from)."""

    arch: ArchConfig
    label: str = ""  # how the arch was named (member name or YAML path), for the record
    space: str = ""  # the space the arch belongs to, for the record


def train_fixed(request: FixedTrainingRequest) -> dict[str, Any]:
    """Train ``request.arch`` from scratch (or fine-tune it from released weights ``request.init``)."""
    return FixedTrainer(request).train()
