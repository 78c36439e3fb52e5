"""Supernet training.

EfficientFormerV2 and SwiftFormer (EfficientFormerV2 §4.2.2, alg. 1): the sandwich rule. Every
step runs the largest, the smallest and ``sandwich_random`` uniformly sampled sub-networks on the
same batch, accumulates their gradients and takes one optimizer step. The largest learns from the
labels (and a teacher, if any); by default the others learn the largest's soft outputs (in-place
distillation).

EfficientFormer (§4.2, eq. 8): every step draws one block choice per position by Gumbel-softmax,
at a temperature annealed exponentially from ``gumbel_tau_start`` to ``gumbel_tau_end``; the
architecture logits α have their own optimizer and are saved, with the importance scores, in
every checkpoint and in ``importance.json``.

The loop, data, schedule, EMA, checkpoints and ``--resume`` are :class:`nas.train.loop.Trainer`'s,
shared with training fixed networks from scratch (``nas train``).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from nas.arch import ArchConfig
from nas.data import calibration_indices, eval_loader
from nas.evaluate import subnet_accuracy
from nas.recipe import Recipe
from nas.runconfig import SupernetRunConfig
from nas.space import SearchSpace
from nas.train.common import soft_cross_entropy
from nas.train.loop import Trainer

log = logging.getLogger(__name__)


def recorded_source(space: SearchSpace) -> str:
    """Where the space was read from, as a run records it: a shipped space relative to the
    repository (``search_configs/spaces/x.yaml``), so no machine's path lands in a run's files; a
    user's space file as given."""
    from nas.space import config_root

    root = config_root().resolve()
    try:
        return str(Path(space.source).resolve().relative_to(root.parent))
    except ValueError:
        return space.source


def gumbel_temperature(recipe: Recipe, progress: float) -> float:
    """Exponential annealing from ``gumbel_tau_start`` (progress 0) to ``gumbel_tau_end`` (1)."""
    return recipe.gumbel_tau_start * (recipe.gumbel_tau_end / recipe.gumbel_tau_start) ** min(max(progress, 0.0), 1.0)


class SupernetTrainer(Trainer):
    command = "train-supernet"
    config_class = SupernetRunConfig
    find_unused_parameters = True

    def __init__(self, space: SearchSpace, recipe: Recipe, data: str | None, run: str | Path, seed: int = 0,
                 resume: bool = False, progress: bool = True, max_steps: int | None = None,
                 init: str | None = None):
        self.space = space
        self.gumbel = space.family == "efficientformer"
        config = {"family": space.family, "space": space.name, "space_file": recorded_source(space)}
        super().__init__(recipe, data, run, config, seed, resume, progress, max_steps, init=init)

    @property
    def description(self) -> str:
        return f"train-supernet {self.space.name}"

    def build_net(self, num_classes: int) -> nn.Module:
        from supernets import build_supernet

        return build_supernet(self.space, img_size=self.recipe.img_size, num_classes=num_classes,
                              drop_path_rate=self.recipe.drop_path)

    def weight_parameters(self):
        return [(n, p) for n, p in self.net.named_parameters() if not n.startswith("arch_logits")]

    def setup(self) -> None:
        recipe = self.recipe
        self.alpha_optimizer = torch.optim.Adam(self.net.arch_parameters(), lr=recipe.alpha_lr, betas=(0.5, 0.999),
                                                weight_decay=recipe.alpha_weight_decay) if self.gumbel else None
        self.sandwich_rng = random.Random(self.seed + 17)

    # --- checkpoints ---------------------------------------------------------------------------

    def extra_state(self) -> dict[str, Any]:
        state = {"sandwich_rng": self.sandwich_rng.getstate(), "space": self.space.name, "family": self.space.family}
        if self.gumbel:
            state["alpha_optimizer"] = self.alpha_optimizer.state_dict()
            state["temperature"] = self.net.temperature
            state["importance"] = self.net.importance().to_dict()
        return state

    def after_save(self, state: dict[str, Any]) -> None:
        if self.gumbel:
            self.folder.write_json("importance.json", {"step": self.step, "temperature": self.net.temperature,
                                                       **state["importance"]})

    def restore_extra(self, state: dict[str, Any]) -> None:
        if self.gumbel:
            self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
            self.net.set_temperature(state["temperature"])
        self.sandwich_rng.setstate(state["sandwich_rng"])

    def step_record(self) -> dict[str, Any]:
        return {"temperature": self.net.temperature} if self.gumbel else {}

    # --- steps ---------------------------------------------------------------------------------

    def train_step(self, images, targets, teacher_labels) -> float:
        step = self.gumbel_step if self.gumbel else self.sandwich_step
        return step(images, targets, teacher_labels)

    def sandwich_step(self, images, targets, teacher_labels) -> float:
        archs: list[ArchConfig] = [self.space.largest(), self.space.smallest()]
        archs += [self.space.sample(self.sandwich_rng) for _ in range(self.recipe.sandwich_random)]
        self.optimizer.zero_grad(set_to_none=True)
        soft_targets, total = None, 0.0
        for i, arch in enumerate(archs):
            with self.autocast():
                output = self.model(images, arch)
                if i == 0 or not self.recipe.inplace_distill:
                    loss, logits = self.supervised_loss(output, targets, teacher_labels)
                    if i == 0 and self.recipe.inplace_distill:
                        soft_targets = logits.detach().float().softmax(dim=-1)
                else:
                    logits = output if self.teacher is None else (output[0] + output[1]) / 2
                    loss = soft_cross_entropy(logits.float(), soft_targets)
            self.backward(loss)
            total += loss.item()
        self.optimizer_step(self.net.parameters())
        return total / len(archs)

    def gumbel_step(self, images, targets, teacher_labels) -> float:
        self.net.set_temperature(gumbel_temperature(self.recipe, self.step / max(self.total_steps, 1)))
        self.optimizer.zero_grad(set_to_none=True)
        self.alpha_optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss, _ = self.supervised_loss(self.model(images), targets, teacher_labels)
        self.backward(loss)
        self.optimizer_step(self.net.weight_parameters(), self.optimizer, self.alpha_optimizer)
        return loss.item()

    # --- result --------------------------------------------------------------------------------

    def evaluate(self) -> dict[str, Any]:
        """Accuracy of the largest and smallest sub-networks on the search split (BN recalibrated)."""
        result: dict[str, Any] = {"space": self.space.name, "family": self.space.family,
                                  "search_split": len(self.splits.search), "train_split": len(self.splits.train)}
        calib = eval_loader(self.splits.train, self.recipe,
                            calibration_indices(self.splits.train, self.recipe, self.seed))
        search = eval_loader(self.splits.search, self.recipe)
        for suffix, net in self.eval_nets():
            for name, arch in (("largest", self.space.largest()), ("smallest", self.space.smallest())):
                result[f"{name}_top1{suffix}"] = subnet_accuracy(net, arch, calib, search, self.device,
                                                                 self.recipe.amp)
        if self.gumbel:
            result["importance"] = self.net.importance().to_dict()
        return result


def train_supernet(space: SearchSpace, recipe: Recipe, data: str | None, run: str | Path, seed: int = 0,
                   resume: bool = False, progress: bool = True, max_steps: int | None = None,
                   init: str | None = None) -> dict[str, Any]:
    """Train the supernet of ``space`` (``init``: released weights of its largest network to start from)."""
    return SupernetTrainer(space, recipe, data, run, seed, resume, progress, max_steps, init).train()
