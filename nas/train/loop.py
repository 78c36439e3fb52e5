"""The one training loop supernets and fixed networks share.

A :class:`Trainer` owns everything a run needs apart from what one step does: the process group,
data (seeded per-sample augmentation, sharded sampler), AdamW with timm's no-decay rule, the
warm-up + cosine schedule, mixup/cutmix and label smoothing, an optional hard-distillation teacher
(DeiT style, as the EfficientFormer papers train), an optional EMA of the weights (timm's
``ModelEmaV3``), atomic checkpoints, exact ``--resume``, metrics lines and the progress bar.
Subclasses say how to build the network, what one step does and how to score the result.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from timm.scheduler import CosineLRScheduler
from timm.utils import dispatch_clip_grad
from torch.nn.parallel import DistributedDataParallel

from nas.config.recipe import Recipe
from nas.core.errors import NasError
from nas.data import Splits, load_splits, train_loader
from nas.metrics.accuracy import autocast_for
from nas.runs.checkpoint import (
    file_digest,
    load_checkpoint,
    load_pretrained,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from nas.runs.config import FixedRunConfig, as_dict
from nas.runs.folder import TRAINING, RunFolder
from nas.runs.progress import Progress
from nas.runs.tboard import Curves
from nas.train.distributed import DistEnv, seed_everything
from nas.train.losses import classification_loss, load_teacher, param_groups

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TrainingRequest:
    """What every trainer is asked to do (the CLI's flags, as one object):
    :class:`nas.train.fixed.FixedTrainingRequest` and :class:`nas.train.supernet.SupernetTrainingRequest`
    add, first and positional, what they train."""

    recipe: Recipe
    data: str | None  # image folder or shards (None: scikit-learn's digits)
    run: str | Path  # the run folder
    seed: int = 0
    resume: bool = False
    progress: bool = True
    max_steps: int | None = None  # stop after this many steps (the schedule still spans the epochs)
    init: str | None = None  # released weights to start from


class Trainer:
    """Subclasses set ``command`` and implement :meth:`build_net`, :meth:`train_step` and
    :meth:`evaluate`; they may extend :meth:`extra_state` / :meth:`restore_extra` and
    :meth:`step_record`."""

    command = "train"
    config_class: type = FixedRunConfig  # what config.yaml holds (nas.runs.config)
    find_unused_parameters = False  # DDP: a supernet step leaves the unsampled weights without gradients
    compilable = False  # torch.compile: a fixed network's forward; a supernet's graph changes every step

    def __init__(self, request: TrainingRequest, config: dict[str, Any], hold_out_search: bool = True):
        recipe, data, seed, resume, init = request.recipe, request.data, request.seed, request.resume, request.init
        run, progress, max_steps = request.run, request.progress, request.max_steps
        self.env = DistEnv.setup()
        self.device = self.env.device()
        self.recipe, self.seed, self.progress, self.data = recipe, seed, progress, data
        self.max_steps = max_steps  # stop early (tests); the schedule still spans all epochs
        self.folder = RunFolder(run, TRAINING, self.env)
        seed_everything(seed)
        # Every input is checked before anything is written: data (each image decoded once per data set), the
        # teacher and its checkpoint, the batch size against the images, the checkpoint to resume.
        self.splits: Splits = load_splits(
            data, recipe, seed, hold_out_search=hold_out_search, once=self.env.on_main, allow_shards=True
        )
        self.run_config = self.config_class(
            **config,
            data=data,
            data_fingerprint=self.splits.fingerprint,
            seed=seed,
            world_size=self.env.world,
            recipe=recipe,
            init=init,
            init_digest=file_digest(init) if init and Path(init).is_file() else None,
        )
        self.config = as_dict(self.run_config)
        self.teacher = load_teacher(recipe, self.splits.num_classes, self.device)
        self.loader, self.sampler, self.dataset = train_loader(
            self.splits, recipe, seed, self.env.rank, self.env.world, self.device.type
        )
        if recipe.amp == "fp16" and self.device.type != "cuda":
            raise NasError("amp fp16 needs a CUDA device; on the CPU use --amp bf16 or none")
        resume_state = None
        if resume and self.folder.checkpoint.exists():
            resume_state = load_checkpoint(
                self.folder.checkpoint, require=("model", "optimizer", "scheduler", "rng", "step")
            )
        self.net = self.build_net(self.splits.num_classes).to(self.device)
        if init and resume_state is None:  # a resumed run's weights come from its checkpoint
            fresh = load_pretrained(self.net, init, self.description.split(" ", 1)[-1])
            if fresh:
                log.warning(
                    "%s: classifier %s left initialised (trained for another number of classes)",
                    init,
                    ", ".join(sorted({k.split(".")[0] for k in fresh})),
                )
        self.folder.check(self.run_config, resume)
        self.folder.start(self.run_config, resume)
        self.clock = self.folder.clock(resume)
        try:
            self._build(resume_state)
        except BaseException:
            self.folder.release()
            raise

    def _build(self, resume_state: dict[str, Any] | None) -> None:
        recipe = self.recipe
        if self.teacher is not None:
            self.net.set_distilled_training(True)
        self.steps_per_epoch = self.sampler.batches_per_epoch
        self.total_steps = recipe.epochs * self.steps_per_epoch
        global_batch = recipe.batch_size * self.env.world
        no_decay = set(self.net.no_weight_decay()) if hasattr(self.net, "no_weight_decay") else set()
        self.optimizer = torch.optim.AdamW(
            param_groups(self.weight_parameters(), recipe.weight_decay, no_decay), lr=recipe.lr_for(global_batch)
        )
        self.scheduler = CosineLRScheduler(
            self.optimizer,
            t_initial=self.total_steps,
            lr_min=recipe.min_lr * global_batch / recipe.lr_reference_batch,
            warmup_t=int(recipe.warmup_epochs * self.steps_per_epoch),
            warmup_lr_init=recipe.warmup_lr,
            t_in_epochs=False,
        )
        self.mixup, self.criterion = classification_loss(recipe, self.splits.num_classes)
        self.ema = None
        if recipe.model_ema:
            from timm.utils import ModelEmaV3

            self.ema = ModelEmaV3(self.net, decay=recipe.model_ema_decay, use_warmup=recipe.model_ema_warmup)
        if recipe.channels_last:
            self.net.to(memory_format=torch.channels_last)
        self.model = (
            DistributedDataParallel(self.net, find_unused_parameters=self.find_unused_parameters)
            if self.env.world > 1
            else self.net
        )
        if recipe.compile:
            if self.device.type == "cuda" and self.compilable:
                self.model = torch.compile(self.model)
            else:
                log.warning("compile: only fixed networks on CUDA are compiled; this run trains eagerly")
        # Loss scaling for fp16 (bf16 needs none); disabled, it is a plain backward and step.
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=recipe.amp == "fp16")
        self.step = 0
        self.setup()
        if resume_state is not None:
            self._restore(resume_state)

    # --- what subclasses provide ---------------------------------------------------------------

    def build_net(self, num_classes: int) -> nn.Module:
        raise NotImplementedError

    def weight_parameters(self) -> list[tuple[str, nn.Parameter]]:
        return list(self.net.named_parameters())

    def setup(self) -> None:
        """Anything built after the network and optimizer (before a resume restores state)."""

    def train_step(self, images, targets, teacher_labels) -> float:
        raise NotImplementedError

    def extra_state(self) -> dict[str, Any]:
        return {}

    def restore_extra(self, state: dict[str, Any]) -> None:
        pass

    def step_record(self) -> dict[str, Any]:
        return {}

    def after_save(self, state: dict[str, Any]) -> None:
        pass

    def evaluate(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def description(self) -> str:
        return self.command

    # --- shared step pieces --------------------------------------------------------------------

    def autocast(self):
        """The recipe's mixed precision for a forward (a no-op context for ``amp: none``)."""
        return autocast_for(self.recipe.amp, self.device)

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def optimizer_step(self, params, *optimizers) -> None:
        """Unscale (fp16), clip ``params`` as the recipe says, step every optimizer."""
        optimizers = optimizers or (self.optimizer,)
        for optimizer in optimizers:
            self.scaler.unscale_(optimizer)
        if self.recipe.clip_grad > 0:
            dispatch_clip_grad(params, self.recipe.clip_grad, mode=self.recipe.clip_mode)
        for optimizer in optimizers:
            self.scaler.step(optimizer)
        self.scaler.update()

    def supervised_loss(self, output, targets, teacher_labels):
        """Loss against the labels (and the teacher's hard labels on the distillation head, DeiT's
        hard distillation); returns (loss, the logits the network predicts with)."""
        if self.teacher is None:
            return self.criterion(output, targets), output
        cls, dist = output
        loss = (1 - self.recipe.distill_alpha) * self.criterion(
            cls, targets
        ) + self.recipe.distill_alpha * nn.functional.cross_entropy(dist, teacher_labels)
        return loss, (cls + dist) / 2

    def eval_nets(self) -> list[tuple[str, nn.Module]]:
        """The weights to score: the trained ones, and their EMA when the recipe keeps one."""
        nets = [("", self.net)]
        if self.ema is not None:
            nets.append(("_ema", self.ema.module))
        return nets

    # --- checkpoints ---------------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        state = {
            "step": self.step,
            "model": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_state(),
            "config": self.config,
            "num_classes": self.splits.num_classes,
            "img_size": self.recipe.img_size,
        }
        if self.ema is not None:
            state["model_ema"] = self.ema.state_dict()
        state.update(self.extra_state())
        return state

    def save(self) -> None:
        if self.env.is_main:
            state = self._state()
            save_checkpoint(self.folder.checkpoint, state)
            self.clock.tick()
            self.after_save(state)
        self.env.barrier()

    def _restore(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.ema is not None:
            self.ema.load_state_dict(state["model_ema"])
        self.restore_extra(state)
        set_rng_state(state["rng"])
        self.step = state["step"]
        self.folder.truncate_metrics(self.step)
        log.info("resumed %s at step %d", self.folder.path, self.step)

    # --- loop ----------------------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        """Train to the end (or ``max_steps``), score, write ``result.json``; the run folder's lock is
        released however it ends."""
        try:
            return self._train()
        finally:
            self.folder.release()

    def _train(self) -> dict[str, Any]:
        last = self.total_steps if self.max_steps is None else min(self.total_steps, self.max_steps)
        bar = Progress(
            self.description, total=last, done=self.step, unit="steps", enabled=self.progress and self.env.is_main
        )
        curves = Curves(self.folder.path, purge_from=self.step + 1 if self.step else None) if self.env.is_main else None
        try:
            self._run_epochs(last, bar, curves)
        finally:
            bar.close()
        result = self._finish(curves)
        self.env.teardown()
        return result

    def _run_epochs(self, last: int, bar, curves: Curves | None) -> None:
        """Steps from the current one to ``last``: one per batch, logged every ``log_every``,
        checkpointed every ``checkpoint_every`` and at each epoch's end."""
        recipe = self.recipe
        start_epoch, start_batch = divmod(self.step, self.steps_per_epoch)
        window = _Window()
        self.net.train()
        first = True
        for epoch in range(start_epoch, recipe.epochs):
            if self.step >= last:
                break
            # The epoch reaches the dataset (in worker processes too) through the sampler's (epoch, index) pairs.
            self.sampler.set_epoch(epoch, start_batch if epoch == start_epoch else 0)
            batches = iter(self.loader)
            while True:
                # Data wait: host time spent getting the next batch (the loader's queue, or decoding
                # and augmenting itself with 0 workers) and issuing its copy to the device. With pinned
                # memory the copy itself runs asynchronously and overlaps compute, so this is the time
                # the training process could not spend stepping.
                waited = time.perf_counter()
                batch = next(batches, None)
                if batch is None:
                    break
                images, labels = self._to_device(*batch)
                window.data_s += time.perf_counter() - waited
                loss = self._step(images, labels)
                if first:  # start-up cost a user waits through (benchmarks/data_scale.py reads this line)
                    log.info("first optimizer step (step %d) done", self.step)
                    first = False
                window.add(loss, images.shape[0] * self.env.world)
                if self.step % recipe.log_every == 0 or self.step == last:
                    self._log(epoch, window, curves, bar)
                    window = _Window()
                bar.advance()
                if self.step % recipe.checkpoint_every == 0:
                    self.save()
                if self.step >= last:
                    break
            if self.step % self.steps_per_epoch == 0 or self.step >= last:
                self.save()  # epoch end (or the early stop)

    def _to_device(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch on the training device: asynchronous from the pinned memory the loader gives on CUDA."""
        images = images.to(self.device, non_blocking=True)
        labels = labels.to(self.device, non_blocking=True)
        if self.recipe.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images, labels

    def _step(self, images: torch.Tensor, labels: torch.Tensor) -> float:
        """One optimizer step on a batch on the device (:meth:`_to_device`): augmentation, teacher
        labels, the subclass's step, EMA."""
        targets = labels
        if self.mixup is not None:
            images, targets = self.mixup(images, labels)
        teacher_labels = None
        if self.teacher is not None:
            with torch.no_grad():
                teacher_labels = self.teacher(images).argmax(dim=-1)
        self.scheduler.step_update(self.step)
        loss = self.train_step(images, targets, teacher_labels)
        if not math.isfinite(loss):
            raise FloatingPointError(f"loss is {loss} at step {self.step}; lower --lr")
        self.step += 1
        if self.ema is not None:
            self.ema.update(self.net, step=self.step)
        return loss

    def _log(self, epoch: int, window: "_Window", curves: Curves | None, bar) -> None:
        if self.device.type == "cuda":
            # Queued GPU work belongs to this window's wall time: synchronised once per window, not per
            # step (a float loss already waits for its step today; this keeps the clock honest if it stops).
            torch.cuda.synchronize(self.device)
        seconds = max(time.perf_counter() - window.start, 1e-9)
        lr = self.optimizer.param_groups[0]["lr"]
        record = {
            "step": self.step,
            "epoch": epoch,
            "loss": window.loss / max(window.steps, 1),
            "lr": lr,
            "images_per_s": window.images / seconds,
            # The share of the window's wall time spent waiting for data (see _run_epochs; on rank 0), and per step.
            "data_wait": window.data_s / seconds,
            "data_ms": 1000 * window.data_s / max(window.steps, 1),
            **self.step_record(),
        }
        if self.device.type == "cuda":  # the most the caching allocator has held for tensors so far
            record["peak_memory_mb"] = torch.cuda.max_memory_allocated(self.device) / 2**20
        self.folder.log(record)
        if curves is not None:
            curves.add("train", {k: v for k, v in record.items() if k not in ("step", "epoch")}, self.step)
        bar.set_status(
            f"loss {record['loss']:.3f}, lr {lr:.2e}, {record['images_per_s']:.0f} img/s, "
            f"data wait {record['data_wait']:.0%}"
        )

    def _finish(self, curves: Curves | None) -> dict[str, Any]:
        """Score the trained network (main process) and write ``result.json``."""
        result: dict[str, Any] = {
            "step": self.step,
            "epochs": self.recipe.epochs,
            "train_images": len(self.splits.train),
            "chance": 1 / self.splits.num_classes,
        }
        if self.env.is_main:
            self.net.eval()
            result.update(self.evaluate())
            result["provenance"] = self.clock.summary()
            self.folder.log(
                {
                    "step": self.step,
                    "final": True,
                    **{k: v for k, v in result.items() if not isinstance(v, (dict, list))},
                }
            )
            self.folder.write_result(result)
            curves.add("eval", {k: v for k, v in result.items() if "top1" in k}, self.step)
            curves.close()
        return result


class _Window:
    """Loss, images and seconds waited for data since the last metrics line."""

    def __init__(self):
        self.loss, self.images, self.steps, self.start = 0.0, 0, 0, time.perf_counter()
        self.data_s = 0.0

    def add(self, loss: float, images: int) -> None:
        self.loss += loss
        self.images += images
        self.steps += 1
