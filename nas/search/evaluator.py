"""Accuracy of sub-networks from a trained supernet run, cached by architecture digest.

An evaluation extracts the sub-network, recalibrates BatchNorm on a fixed, seeded set of training
images and scores the run's search split (never the validation set). The evaluator is built from
plain data (:class:`EvalSpec`), so Ray actors can each build their own.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.core.typed_yaml import read_yaml
from nas.data import balanced_indices, calibration_indices, data_fingerprint, eval_loader, load_splits, preload
from nas.data.shards import refuse_shards
from nas.evaluate import subnet_accuracy
from nas.recipe import recipe_from_saved
from nas.runs.checkpoint import file_digest, load_checkpoint
from nas.runs.config import SupernetRunConfig, run_config_from
from nas.runs.folder import CONFIG, TRAINING, RunFolder
from nas.space_files import load_space
from supernets import build_supernet

log = logging.getLogger(__name__)

#: What a supernet checkpoint must hold for its sub-networks to be evaluated.
SUPERNET_KEYS = ("model", "num_classes", "img_size")


@dataclass(frozen=True)
class EvalSpec:
    """Everything an evaluator needs, as plain data (it crosses process boundaries)."""

    checkpoint: str
    space: str  # name or path
    data: str | None
    recipe: dict
    seed: int
    bn_calib_batches: int | None = None
    search_images: int | None = None  # score a fixed, class-balanced subset of the search split

    @property
    def calib_batches(self) -> int:
        """The BatchNorm calibration batches used: the override, or the supernet recipe's."""
        return self.bn_calib_batches or recipe_from_saved(self.recipe).bn_calib_batches

    def context(self) -> dict:
        """Everything besides the architecture that an accuracy depends on: the supernet weights (by
        content), the images (by listing), the split seed and the BatchNorm calibration. Cached
        accuracies are keyed by it, so a changed setting never reuses one computed another way."""

        return {
            "supernet_digest": file_digest(self.checkpoint),
            "data_fingerprint": data_fingerprint(self.data),
            "split_seed": self.seed,
            "bn_calib_batches": self.calib_batches,
            # Only when set, so that caches written before the option existed stay valid.
            **({"search_images": self.search_images} if self.search_images else {}),
        }

    @classmethod
    def from_run(
        cls, run: str | Path, bn_calib_batches: int | None = None, search_images: int | None = None
    ) -> "EvalSpec":
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
        # Before any folder is written or worker started: sub-networks are scored on images read by index.
        refuse_shards(config.data, "scoring its sub-networks", "train the supernet on the image folder to search it")
        space = config.space_file if config.space_file and Path(config.space_file).exists() else config.space
        return cls(
            str(folder.checkpoint),
            str(space),
            config.data,
            dataclasses.asdict(config.recipe),
            config.seed,
            bn_calib_batches,
            search_images,
        )


class SubnetEvaluator:
    """Top-1 of sub-networks on the search split with ``spec``'s supernet weights, BatchNorm
    recalibrated per sub-network; cached in memory by digest."""

    def __init__(self, spec: EvalSpec, device: str = "cpu"):

        self.spec = spec
        recipe = dataclasses.replace(recipe_from_saved(spec.recipe), bn_calib_batches=spec.calib_batches)
        state = load_checkpoint(spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS)
        self.space: SearchSpace = load_space(spec.space)
        # Only the calibration and scored images are read (and kept, below), not the whole data set.
        splits = load_splits(spec.data, recipe, spec.seed, decode_all=False)
        self.net = build_supernet(self.space, img_size=state["img_size"], num_classes=state["num_classes"])
        self.net.load_state_dict(state["model"])
        self.net.to(device).eval()
        self.device = device
        # Transformed once (when they fit in the recipe's image cache budget): every evaluation uses
        # the same calibration and search images.
        device_type = torch.device(device).type  # pinned batches for a CUDA device
        calib = eval_loader(splits.train, recipe, calibration_indices(splits.train, recipe, spec.seed), device_type)
        self.calib = preload(calib, recipe.cache_max_mb)
        scored = (
            balanced_indices(splits.search, spec.search_images, spec.seed + 104_729) if spec.search_images else None
        )
        self.search = preload(eval_loader(splits.search, recipe, scored, device_type), recipe.cache_max_mb)
        self.scored_images = len(scored) if scored is not None else len(splits.search)
        self.cache: dict[str, float] = {}

    def accuracy(self, arch: ArchConfig) -> float:
        if arch.digest not in self.cache:
            with torch.no_grad():
                self.cache[arch.digest] = subnet_accuracy(self.net, arch, self.calib, self.search, self.device)
        return self.cache[arch.digest]


class DiskCache:
    """Accuracies by digest, one JSON line each in the run folder (survives restarts).

    Every line carries the evaluation ``context`` (:meth:`EvalSpec.context`); lines of another
    context are ignored, so one file never mixes accuracies computed two ways. A last line cut
    short by a killed process is dropped (and cut from the file, so the next line starts clean)."""

    def __init__(self, path: Path, context: dict | None = None):
        self.path, self.context = Path(path), context or {}
        self.values: dict[str, float] = {}
        if not self.path.exists():
            return
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]
            log.warning("%s: dropping a last line cut short by an interrupted run", self.path)
            with self.path.open("r+", encoding="utf-8") as handle:
                handle.truncate(len(text.encode("utf-8")))
        ignored = 0
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                digest, accuracy = record["digest"], float(record["accuracy"])
            except (ValueError, KeyError, TypeError):
                raise NasError(
                    f"{self.path}, line {number}: not an evaluation record; delete the file to evaluate again"
                ) from None
            if record.get("context", {}) == self.context:
                self.values[digest] = accuracy
            else:
                ignored += 1
        if ignored:
            log.info("%s: %d cached accuracies of other settings ignored", self.path, ignored)

    def add(self, arch: ArchConfig, accuracy: float) -> None:
        self.values[arch.digest] = accuracy
        record = {"digest": arch.digest, "accuracy": accuracy, "context": self.context, "arch": arch.to_dict()}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def spec_dict(spec: EvalSpec) -> dict:
    """``spec`` as a plain dict (what Ray actors are built from)."""
    return asdict(spec)
