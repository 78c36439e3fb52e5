"""A trained supernet run folder, read once: what search, sample, compare and rank-check take.

``nas train-supernet`` leaves a run folder with its settings (``config.yaml``) and a checkpoint that
records the input size it trained at and its class count. :meth:`SupernetRun.read` checks both,
loads the space once and maps the checkpoint's tensors without reading them (each evaluator loads
the weights itself); :meth:`SupernetRun.eval_spec` is the plain data an evaluator is built from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nas.config.spaces import load_space
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import read_yaml
from nas.runs.checkpoint import load_checkpoint
from nas.runs.config import SupernetRunConfig, run_config_from
from nas.runs.folder import CONFIG, TRAINING, RunFolder
from nas.search.evaluator import SUPERNET_KEYS, EvalSpec


@dataclass(frozen=True, eq=False)
class SupernetRun:
    """A trained supernet run: its space, the input size it trained at, its classes, data and recipe."""

    path: Path
    checkpoint: Path
    space: SearchSpace
    space_ref: str  # the space file it recorded when that file is still there, else the space's name
    img_size: int  # the input size it trained at
    num_classes: int
    config: SupernetRunConfig
    # The checkpoint with its tensors memory-mapped, not read (a family's greedy moves read its metadata).
    state: dict[str, Any] = field(repr=False)

    @classmethod
    def read(cls, run: str | Path) -> SupernetRun:
        """Read and check the supernet run folder ``run``; a folder that is not one is one :class:`NasError`."""
        folder = RunFolder(run, TRAINING)
        if not folder.started:
            raise NasError(
                f"{folder.path}: not a trained supernet run (no {folder.checkpoint.name}); "
                "train one with `nas train-supernet`"
            )
        config_path = folder.path / CONFIG
        raw = read_yaml(config_path, "run config") or {}  # read once: its command, then its settings
        if not isinstance(raw, dict) or raw.get("command") != "train-supernet":
            command = raw.get("command") if isinstance(raw, dict) else None
            raise NasError(f"{folder.path}: not a supernet run (config.yaml says {command!r})")
        config = run_config_from(raw, config_path, SupernetRunConfig)
        space_ref = config.space_file if config.space_file and Path(config.space_file).exists() else config.space
        state = load_checkpoint(folder.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS, mmap=True)
        return cls(
            path=folder.path,
            checkpoint=folder.checkpoint,
            space=load_space(space_ref),
            space_ref=str(space_ref),
            img_size=int(state["img_size"]),
            num_classes=int(state["num_classes"]),
            config=config,
            state=state,
        )

    def eval_spec(self, bn_calib_batches: int | None = None, search_images: int | None = None) -> EvalSpec:
        """What an evaluator of its sub-networks is built from (plain data, for Ray actors), with the
        BatchNorm calibration and scored images given (None: the recipe's batches, every image)."""
        return EvalSpec(
            str(self.checkpoint),
            self.space_ref,
            self.config.data,
            dataclasses.asdict(self.config.recipe),
            self.config.seed,
            bn_calib_batches,
            search_images,
        )
