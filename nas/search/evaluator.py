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

from nas.arch import ArchConfig
from nas.errors import NasError
from nas.recipe import recipe_from_saved
from nas.space import SearchSpace, load_space
from nas.train.common import load_checkpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalSpec:
    """Everything an evaluator needs, as plain data (it crosses process boundaries)."""

    checkpoint: str
    space: str  # name or path
    data: str | None
    recipe: dict
    seed: int
    bn_calib_batches: int | None = None

    @classmethod
    def from_run(cls, run: str | Path, bn_calib_batches: int | None = None) -> "EvalSpec":
        run = Path(run)
        checkpoint = run / "checkpoint.pt"
        if not checkpoint.exists():
            raise NasError(f"{run}: not a trained supernet run (no checkpoint.pt); train one with `nas train-supernet`")
        from nas.typed_yaml import read_yaml

        config = read_yaml(run / "config.yaml", "run config") or {}
        if config.get("command") != "train-supernet":
            raise NasError(f"{run}: not a supernet run (config.yaml says {config.get('command')!r})")
        space = config.get("space_file") if Path(str(config.get("space_file"))).exists() else config.get("space")
        return cls(str(checkpoint), str(space), config.get("data"), dict(config["recipe"]), int(config["seed"]),
                   bn_calib_batches)


class SubnetEvaluator:
    def __init__(self, spec: EvalSpec, device: str = "cpu"):
        from supernets import build_supernet

        from nas.data import calibration_indices, eval_loader, load_splits

        self.spec = spec
        overrides = {} if spec.bn_calib_batches is None else {"bn_calib_batches": spec.bn_calib_batches}
        recipe = dataclasses.replace(recipe_from_saved(spec.recipe), **overrides)
        state = load_checkpoint(Path(spec.checkpoint))
        self.space: SearchSpace = load_space(spec.space)
        splits = load_splits(spec.data, recipe, spec.seed)
        self.net = build_supernet(self.space, img_size=state["img_size"], num_classes=state["num_classes"])
        self.net.load_state_dict(state["model"])
        self.net.to(device).eval()
        self.device = device
        self.calib = eval_loader(splits.train, recipe, calibration_indices(splits.train, recipe, spec.seed))
        self.search = eval_loader(splits.search, recipe)
        self.cache: dict[str, float] = {}

    def accuracy(self, arch: ArchConfig) -> float:
        from nas.evaluate import subnet_accuracy

        if arch.digest not in self.cache:
            with torch.no_grad():
                self.cache[arch.digest] = subnet_accuracy(self.net, arch, self.calib, self.search, self.device)
        return self.cache[arch.digest]


class DiskCache:
    """Accuracies by digest, one JSON line each in the run folder (survives restarts)."""

    def __init__(self, path: Path):
        self.path = path
        self.values: dict[str, float] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    record = json.loads(line)
                    self.values[record["digest"]] = record["accuracy"]

    def add(self, arch: ArchConfig, accuracy: float) -> None:
        self.values[arch.digest] = accuracy
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"digest": arch.digest, "accuracy": accuracy, "arch": arch.to_dict()}) + "\n")


def spec_dict(spec: EvalSpec) -> dict:
    return asdict(spec)
