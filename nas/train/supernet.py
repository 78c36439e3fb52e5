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

Checkpoints are atomic and carry everything needed to continue exactly (model, optimizers,
scheduler, RNG states, the step, and with it the data order). Under ``torchrun`` the model is
wrapped in DistributedDataParallel (gloo on CPU, NCCL on GPU).
"""

from __future__ import annotations

import logging
import math
import random
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from timm.scheduler import CosineLRScheduler
from timm.utils import dispatch_clip_grad
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from nas.arch import ArchConfig
from nas.data import calibration_indices, eval_loader, load_splits, train_loader
from nas.evaluate import subnet_accuracy
from nas.recipe import Recipe
from nas.space import SearchSpace
from nas.train.common import (
    DistEnv,
    RunFolder,
    classification_loss,
    load_checkpoint,
    load_teacher,
    param_groups,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_rng_state,
    soft_cross_entropy,
)

log = logging.getLogger(__name__)


def gumbel_temperature(recipe: Recipe, progress: float) -> float:
    """Exponential annealing from ``gumbel_tau_start`` (progress 0) to ``gumbel_tau_end`` (1)."""
    return recipe.gumbel_tau_start * (recipe.gumbel_tau_end / recipe.gumbel_tau_start) ** min(max(progress, 0.0), 1.0)


class SupernetTrainer:
    def __init__(self, space: SearchSpace, recipe: Recipe, data: str | None, run: str | Path, seed: int = 0,
                 resume: bool = False, progress: bool = True, max_steps: int | None = None):
        from supernets import build_supernet

        self.env = DistEnv.setup()
        self.device = self.env.device()
        self.space, self.recipe, self.seed, self.progress = space, recipe, seed, progress
        self.gumbel = space.family == "efficientformer"
        self.folder = RunFolder(run, self.env)
        self.config = {"command": "train-supernet", "family": space.family, "space": space.name,
                       "space_file": space.source, "data": data, "seed": seed, "world_size": self.env.world,
                       "recipe": recipe.__dict__}
        seed_everything(seed)
        self.splits = load_splits(data, recipe, seed)  # bad data fails here, before anything is written
        self.folder.prepare(self.config, resume)
        self.net = build_supernet(space, img_size=recipe.img_size, num_classes=self.splits.num_classes,
                                  drop_path_rate=recipe.drop_path).to(self.device)
        self.teacher = load_teacher(recipe, self.splits.num_classes, self.device)
        if self.teacher is not None:
            self.net.set_distilled_training(True)
        self.loader, self.sampler, self.dataset = train_loader(self.splits, recipe, seed, self.env.rank, self.env.world)
        self.steps_per_epoch = self.sampler.batches_per_epoch
        self.total_steps = recipe.epochs * self.steps_per_epoch
        self.max_steps = max_steps  # stop early (tests); the schedule still spans all epochs
        global_batch = recipe.batch_size * self.env.world

        no_decay = {f"{k}" for k in self.net.no_weight_decay()}
        weights = [(n, p) for n, p in self.net.named_parameters() if not n.startswith("arch_logits")]
        self.optimizer = torch.optim.AdamW(param_groups(weights, recipe.weight_decay, no_decay),
                                           lr=recipe.lr_for(global_batch))
        self.alpha_optimizer = torch.optim.Adam(self.net.arch_parameters(), lr=recipe.alpha_lr, betas=(0.5, 0.999),
                                                weight_decay=recipe.alpha_weight_decay) if self.gumbel else None
        self.scheduler = CosineLRScheduler(
            self.optimizer, t_initial=self.total_steps, lr_min=recipe.min_lr * global_batch / recipe.lr_reference_batch,
            warmup_t=int(recipe.warmup_epochs * self.steps_per_epoch), warmup_lr_init=recipe.warmup_lr,
            t_in_epochs=False)
        self.mixup, self.criterion = classification_loss(recipe, self.splits.num_classes)
        self.sandwich_rng = random.Random(seed + 17)
        self.model = (DistributedDataParallel(self.net, find_unused_parameters=True)
                      if self.env.world > 1 else self.net)
        self.step = 0
        if resume:
            self._restore(load_checkpoint(self.folder.checkpoint))

    # --- checkpoints ---------------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        state = {"step": self.step, "model": self.net.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "scheduler": self.scheduler.state_dict(), "rng": rng_state(),
                 "sandwich_rng": self.sandwich_rng.getstate(), "config": self.config, "space": self.space.name,
                 "family": self.space.family, "num_classes": self.splits.num_classes, "img_size": self.recipe.img_size}
        if self.gumbel:
            state["alpha_optimizer"] = self.alpha_optimizer.state_dict()
            state["temperature"] = self.net.temperature
            state["importance"] = self.net.importance().to_dict()
        return state

    def save(self) -> None:
        if self.env.is_main:
            state = self._state()
            save_checkpoint(self.folder.checkpoint, state)
            if self.gumbel:
                self.folder.write_json("importance.json", {"step": self.step, "temperature": self.net.temperature,
                                                           **state["importance"]})
        self.env.barrier()

    def _restore(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.gumbel:
            self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
            self.net.set_temperature(state["temperature"])
        set_rng_state(state["rng"])
        self.sandwich_rng.setstate(state["sandwich_rng"])
        self.step = state["step"]
        self.folder.truncate_metrics(self.step)
        log.info("resumed %s at step %d", self.folder.path, self.step)

    # --- steps ---------------------------------------------------------------------------------

    def _clip(self, params) -> None:
        if self.recipe.clip_grad > 0:
            dispatch_clip_grad(params, self.recipe.clip_grad, mode=self.recipe.clip_mode)

    def _supervised_loss(self, output, targets, teacher_labels):
        if self.teacher is None:
            return self.criterion(output, targets), output
        cls, dist = output
        loss = (1 - self.recipe.distill_alpha) * self.criterion(cls, targets) + \
            self.recipe.distill_alpha * nn.functional.cross_entropy(dist, teacher_labels)
        return loss, (cls + dist) / 2

    def sandwich_step(self, images, targets, teacher_labels) -> float:
        archs: list[ArchConfig] = [self.space.largest(), self.space.smallest()]
        archs += [self.space.sample(self.sandwich_rng) for _ in range(self.recipe.sandwich_random)]
        self.optimizer.zero_grad(set_to_none=True)
        soft_targets, total = None, 0.0
        for i, arch in enumerate(archs):
            output = self.model(images, arch)
            if i == 0 or not self.recipe.inplace_distill:
                loss, logits = self._supervised_loss(output, targets, teacher_labels)
                if i == 0 and self.recipe.inplace_distill:
                    soft_targets = logits.detach().softmax(dim=-1)
            else:
                logits = output if self.teacher is None else (output[0] + output[1]) / 2
                loss = soft_cross_entropy(logits, soft_targets)
            loss.backward()
            total += loss.item()
        self._clip(self.net.parameters())
        self.optimizer.step()
        return total / len(archs)

    def gumbel_step(self, images, targets, teacher_labels) -> float:
        self.net.set_temperature(gumbel_temperature(self.recipe, self.step / max(self.total_steps, 1)))
        self.optimizer.zero_grad(set_to_none=True)
        self.alpha_optimizer.zero_grad(set_to_none=True)
        loss, _ = self._supervised_loss(self.model(images), targets, teacher_labels)
        loss.backward()
        self._clip(self.net.weight_parameters())
        self.optimizer.step()
        self.alpha_optimizer.step()
        return loss.item()

    # --- loop ----------------------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        recipe = self.recipe
        start_epoch, start_batch = divmod(self.step, self.steps_per_epoch)
        last = self.total_steps if self.max_steps is None else min(self.total_steps, self.max_steps)
        bar = tqdm(total=last, initial=self.step, desc=f"train-supernet {self.space.name}",
                   disable=None if (self.progress and self.env.is_main) else True)
        window_loss, window_images, window_start = 0.0, 0, time.perf_counter()
        self.net.train()
        for epoch in range(start_epoch, recipe.epochs):
            if self.step >= last:
                break
            self.sampler.set_epoch(epoch, start_batch if epoch == start_epoch else 0)
            self.dataset.epoch = epoch
            for images, labels in self.loader:
                images, labels = images.to(self.device), labels.to(self.device)
                targets = labels
                if self.mixup is not None:
                    images, targets = self.mixup(images, labels)
                teacher_labels = None
                if self.teacher is not None:
                    with torch.no_grad():
                        teacher_labels = self.teacher(images).argmax(dim=-1)
                self.scheduler.step_update(self.step)
                step_fn = self.gumbel_step if self.gumbel else self.sandwich_step
                loss = step_fn(images, targets, teacher_labels)
                if not math.isfinite(loss):
                    raise FloatingPointError(f"loss is {loss} at step {self.step}; lower --lr")
                self.step += 1
                window_loss += loss
                window_images += images.shape[0] * self.env.world
                lr = self.optimizer.param_groups[0]["lr"]
                if self.step % recipe.log_every == 0 or self.step == last:
                    elapsed = time.perf_counter() - window_start
                    n = recipe.log_every if self.step % recipe.log_every == 0 else max(1, self.step % recipe.log_every)
                    record = {"step": self.step, "epoch": epoch, "loss": window_loss / n, "lr": lr,
                              "images_per_s": window_images / max(elapsed, 1e-9)}
                    if self.gumbel:
                        record["temperature"] = self.net.temperature
                    self.folder.log(record)
                    bar.set_postfix(loss=f"{record['loss']:.3f}", lr=f"{lr:.2e}", img_s=f"{record['images_per_s']:.0f}")
                    window_loss, window_images, window_start = 0.0, 0, time.perf_counter()
                bar.update(1)
                if self.step % recipe.checkpoint_every == 0:
                    self.save()
                if self.step >= last:
                    break
            if self.step % self.steps_per_epoch == 0 or self.step >= last:
                self.save()  # epoch end (or the early stop)
        bar.close()
        result = self.finish()
        self.env.teardown()
        return result

    def finish(self) -> dict[str, Any]:
        """Accuracy of the largest and smallest sub-networks on the search split (BN recalibrated)."""
        result: dict[str, Any] = {"step": self.step, "epochs": self.recipe.epochs, "space": self.space.name,
                                  "family": self.space.family, "search_split": len(self.splits.search),
                                  "train_split": len(self.splits.train), "chance": 1 / self.splits.num_classes}
        if self.env.is_main:
            calib = eval_loader(self.splits.train, self.recipe,
                                calibration_indices(self.splits.train, self.recipe, self.seed))
            search = eval_loader(self.splits.search, self.recipe)
            self.net.eval()
            for name, arch in (("largest", self.space.largest()), ("smallest", self.space.smallest())):
                result[f"{name}_top1"] = subnet_accuracy(self.net, arch, calib, search, self.device)
            if self.gumbel:
                result["importance"] = self.net.importance().to_dict()
            self.folder.log({"step": self.step, "final": True, **{k: v for k, v in result.items() if k != "importance"}})
            self.folder.write_json("result.json", result)
        return result


def train_supernet(space: SearchSpace, recipe: Recipe, data: str | None, run: str | Path, seed: int = 0,
                   resume: bool = False, progress: bool = True, max_steps: int | None = None) -> dict[str, Any]:
    return SupernetTrainer(space, recipe, data, run, seed, resume, progress, max_steps).train()
