"""Pieces every training run shares: process group, run folder, checkpoints, metrics, losses."""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

from nas.checkpoint import load_checkpoint
from nas.core.errors import NasError
from nas.core.typed_yaml import dump_yaml, write_text_atomic
from nas.recipe import Recipe
from nas.reports import write_json
from nas.runconfig import as_dict, read_run_config, require_resumable
from nas.runlock import RunLock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistEnv:
    """This process's place in a ``torchrun`` job (rank 0 of 1 without one)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def setup(cls) -> "DistEnv":
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world == 1:
            return cls()
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        return cls(dist.get_rank(), world, int(os.environ.get("LOCAL_RANK", "0")))

    def device(self) -> torch.device:
        if torch.cuda.is_available():
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def teardown(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global random generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class RunFolder:
    """``runs/<name>/``: resolved config, checkpoint, metrics (JSON lines) and results; one writer
    at a time (:class:`nas.runlock.RunLock`, held by the main process from :meth:`prepare` to
    :meth:`release`)."""

    def __init__(self, path: str | Path, env: DistEnv):
        self.path = Path(path)
        self.env = env
        self.checkpoint = self.path / "checkpoint.pt"
        self.metrics = self.path / "metrics.jsonl"
        self.lock: RunLock | None = None

    def prepare(self, config: Any, resume: bool) -> None:
        """Take the folder's lock, check it against ``resume`` and write (or compare) ``config.yaml``
        (``config`` is one of :mod:`nas.runconfig`'s dataclasses)."""
        config_path = self.path / "config.yaml"
        if resume and not self.checkpoint.exists():
            raise NasError(f"{self.path}: nothing to resume (no checkpoint.pt)")
        if not resume and self.checkpoint.exists():
            raise NasError(f"{self.path} already holds a run; pass --resume to continue it or choose another --run")
        if self.env.is_main:
            self.path.mkdir(parents=True, exist_ok=True)
            self.lock = RunLock(self.path, config.command).acquire()
            try:
                if resume:
                    require_resumable(read_run_config(config_path, type(config)), config, config_path)
                elif self.checkpoint.exists():  # written by a holder that finished before we took the lock
                    raise NasError(f"{self.path} already holds a run; pass --resume to continue it")
                else:
                    write_text_atomic(config_path, dump_yaml(as_dict(config)))
                    self.metrics.unlink(missing_ok=True)
            except BaseException:
                self.release()
                raise
        self.env.barrier()

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def log(self, record: dict[str, Any]) -> None:
        if self.env.is_main:
            with self.metrics.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")

    def truncate_metrics(self, step: int) -> None:
        """Drop metric lines written after the checkpoint a resumed run starts from (and the final
        line of a run stopped early by ``--max-steps``)."""
        if not self.env.is_main or not self.metrics.exists():
            return
        records = [
            (line, json.loads(line)) for line in self.metrics.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        kept = [line for line, r in records if r.get("step", 0) <= step and not r.get("final")]
        write_text_atomic(self.metrics, "".join(line + "\n" for line in kept))

    def write_json(self, name: str, data: Any) -> None:
        if self.env.is_main:
            write_json(self.path / name, data)


def finished_or_run(folder: Path, progress_file: str, start: Callable[[bool], dict[str, Any]]) -> dict[str, Any]:
    """The ``result.json`` of a finished run in ``folder``; otherwise ``start(resume)``, resuming
    when the run's ``progress_file`` (checkpoint or state) shows it was interrupted."""
    done = folder / "result.json"
    if done.exists():
        return json.loads(done.read_text(encoding="utf-8"))
    return start((folder / progress_file).exists())


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
