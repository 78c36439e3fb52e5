"""Training a fixed architecture from scratch (``nas train``).

The searched network and its baselines are trained the way the papers train their final models
(EfficientFormerV2 §5.1): from random initialisation, with the recipe's optimizer, schedule,
augmentation, optional EMA and optional hard distillation from a teacher, on the loop supernet
training uses (:class:`nas.train.loop.Trainer`), so the two never disagree about data or schedule.

With a val/ (or test/) folder the network trains on every training image and is scored on that
folder; without one the search split stays held out and is the score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch.nn as nn

from nas.core.arch import ArchConfig
from nas.data import eval_loader
from nas.evaluate import top1
from nas.metrics import count_macs, count_params
from nas.recipe import Recipe
from nas.train.loop import Trainer
from supernets import build_static


class FixedTrainer(Trainer):
    """Trains one fixed architecture from scratch (``nas train``) on the shared training loop."""

    command = "train"
    compilable = True

    def __init__(
        self,
        arch: ArchConfig,
        recipe: Recipe,
        data: str | None,
        run: str | Path,
        seed: int = 0,
        resume: bool = False,
        progress: bool = True,
        max_steps: int | None = None,
        label: str = "",
        space: str = "",
        init: str | None = None,
    ):
        self.arch, self.label = arch, label or arch.digest
        config = {
            "arch": arch.to_dict(),
            "arch_digest": arch.digest,
            "label": self.label,
            "family": arch.family,
            "space": space,
        }
        super().__init__(recipe, data, run, config, seed, resume, progress, max_steps, hold_out_search=False, init=init)

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
        loader = eval_loader(self.splits.val, self.recipe)
        for suffix, net in self.eval_nets():
            result[f"top1{suffix}"] = top1(net, loader, self.device, self.recipe.amp)
        return result


def train_fixed(
    arch: ArchConfig,
    recipe: Recipe,
    data: str | None,
    run: str | Path,
    seed: int = 0,
    resume: bool = False,
    progress: bool = True,
    max_steps: int | None = None,
    label: str = "",
    space: str = "",
    init: str | None = None,
) -> dict[str, Any]:
    """Train ``arch`` from scratch (or fine-tune it from released weights ``init``)."""
    return FixedTrainer(arch, recipe, data, run, seed, resume, progress, max_steps, label, space, init).train()
