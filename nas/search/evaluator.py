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

from nas.config.recipe import recipe_from_saved
from nas.config.spaces import load_space
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.families import build_supernet
from nas.core.space import SearchSpace
from nas.data import balanced_indices, calibration_indices, data_fingerprint, eval_loader, load_splits, preload
from nas.metrics.accuracy import subnet_accuracy
from nas.quantize import check_quantization
from nas.runs.checkpoint import file_digest, load_checkpoint

log = logging.getLogger(__name__)

#: What a supernet checkpoint must hold for its sub-networks to be evaluated.
SUPERNET_KEYS = ("model", "num_classes", "img_size")
#: Seed offset between draws of calibration and scored images (:attr:`Fidelity.draw`).
DRAW_STRIDE = 1_000_003
#: Seed offset of the scored subset of a split from the split's seed (what searches have always used).
SCORED_SEED = 104_729


@dataclass(frozen=True)
class Fidelity:
    """How a sub-network is scored: BatchNorm recalibrated on ``calib_batches`` batches of training
    images, then top-1 on ``images`` images of ``split`` (a class-balanced subset; None: all of it).

    ``draw`` picks which seeded images: 0 is the search's own; another draw takes other calibration
    images and another subset, so scoring a network at two draws measures the score's noise. ``split``
    is ``search`` (the held-out part of the training images that searches choose on) or ``val``
    (images no search chooses on, for judging searches). ``quantize`` (``int8``) scores the network
    quantized after its BatchNorm recalibration, calibrated on the same images (:mod:`nas.quantize`)."""

    calib_batches: int
    images: int | None = None
    draw: int = 0
    split: str = "search"
    quantize: str | None = None

    def __post_init__(self) -> None:
        if self.calib_batches < 1 or (self.images is not None and self.images < 1) or self.draw < 0:
            raise NasError(f"a fidelity needs 1 or more calibration batches and images, got {self}")
        if self.split not in ("search", "val"):
            raise NasError(f"a fidelity scores the search or val split, not {self.split!r}")
        check_quantization(self.quantize)

    @property
    def key(self) -> str:
        """A short name, unique per fidelity (the cache keys scores by it)."""
        quantized = f":{self.quantize}" if self.quantize else ""  # float keys as they have always been
        return f"{self.split}:{self.calib_batches}x{self.images or 'all'}#{self.draw}{quantized}"

    def describe(self) -> str:
        images = f"{self.images} images" if self.images else "every image"
        draw = f", draw {self.draw}" if self.draw else ""
        quantized = f", quantized to {self.quantize}" if self.quantize else ""
        calibrated = f"BatchNorm recalibrated on {self.calib_batches} batches"
        return f"{images} of the {self.split} split, {calibrated}{draw}{quantized}"

    def to_dict(self) -> dict:
        """As plain data; ``quantize`` only when set (float fidelities are written as they always were)."""
        data = dataclasses.asdict(self)
        if data["quantize"] is None:
            del data["quantize"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Fidelity:
        return cls(**data)


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

    @property
    def fidelity(self) -> Fidelity:
        """The fidelity a search scores at: its calibration batches and scored images, draw 0."""
        return Fidelity(self.calib_batches, self.search_images)

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


class SubnetEvaluator:
    """Top-1 of sub-networks on the search split with ``spec``'s supernet weights, BatchNorm
    recalibrated per sub-network; cached in memory by digest."""

    def __init__(self, spec: EvalSpec, device: str = "cpu", space: SearchSpace | None = None):
        # space: spec's, when the caller has loaded it already (the in-process evaluator of a search)
        self.spec = spec
        recipe = dataclasses.replace(recipe_from_saved(spec.recipe), bn_calib_batches=spec.calib_batches)
        state = load_checkpoint(spec.checkpoint, "supernet checkpoint", require=SUPERNET_KEYS)
        self.space: SearchSpace = space or load_space(spec.space)
        # Only the calibration and scored images are read (and kept, below), not the whole data set.
        splits = load_splits(spec.data, recipe, spec.seed, decode_all=False)
        self.net = build_supernet(self.space, img_size=state["img_size"], num_classes=state["num_classes"])
        self.net.load_state_dict(state["model"])
        self.net.to(device).eval()
        self.device, self.splits, self.recipe = device, splits, recipe
        self.default = spec.fidelity
        # Transformed once (when they fit in the recipe's image cache budget): every evaluation at a
        # fidelity uses the same calibration and scored images. The search's own are kept; of the
        # others (finalists, noise draws) the two used last.
        self._images: dict[Fidelity, tuple] = {}
        self.calib, self.search = self._loaders(self.default)
        self.scored_images = self.images(self.default)
        self.cache: dict[str, float] = {}

    def _loaders(self, fidelity: Fidelity) -> tuple:
        """The (calibration, scored) batches of ``fidelity``, built on first use."""
        if fidelity in self._images:
            self._images[fidelity] = self._images.pop(fidelity)  # most recently used last
            return self._images[fidelity][:2]
        spec, recipe = self.spec, dataclasses.replace(self.recipe, bn_calib_batches=fidelity.calib_batches)
        device_type = torch.device(self.device).type  # pinned batches for a CUDA device
        offset = DRAW_STRIDE * fidelity.draw
        train, split = self.splits.train, getattr(self.splits, fidelity.split)
        calib = eval_loader(train, recipe, calibration_indices(train, recipe, spec.seed + offset), device_type)
        scored = balanced_indices(split, fidelity.images, spec.seed + SCORED_SEED + offset) if fidelity.images else None
        loaders = (
            preload(calib, recipe.cache_max_mb),
            preload(eval_loader(split, recipe, scored, device_type), recipe.cache_max_mb),
            len(scored) if scored is not None else len(split),
        )
        others = [f for f in self._images if f != self.default]
        if len(others) >= 2:
            del self._images[others[0]]
        self._images[fidelity] = loaders
        return loaders[:2]

    def images(self, fidelity: Fidelity | None = None) -> int:
        """How many images a score at ``fidelity`` (default: the search's) counts."""
        fidelity = fidelity or self.default
        self._loaders(fidelity)
        return self._images[fidelity][2]

    def accuracy(self, arch: ArchConfig, fidelity: Fidelity | None = None) -> float:
        """Top-1 of ``arch`` at ``fidelity`` (default: the search's), cached in memory."""
        fidelity = fidelity or self.default
        key = cache_key(arch, fidelity, self.default)
        if key not in self.cache:
            calib, scored = self._loaders(fidelity)
            with torch.no_grad():
                self.cache[key] = subnet_accuracy(
                    self.net, arch, calib, scored, self.device, quantize=fidelity.quantize
                )
        return self.cache[key]


def cache_key(arch: ArchConfig, fidelity: Fidelity, default: Fidelity) -> str:
    """Where a score is cached: the digest at the search's own fidelity (as caches have always been
    keyed), ``digest@fidelity`` at any other."""
    return arch.digest if fidelity == default else f"{arch.digest}@{fidelity.key}"


class DiskCache:
    """Accuracies by digest, one JSON line each in the run folder (survives restarts).

    Every line carries the evaluation ``context`` (:meth:`EvalSpec.context`); lines of another
    context are ignored, so one file never mixes accuracies computed two ways. A last line cut
    short by a killed process is dropped (and cut from the file, so the next line starts clean)."""

    def __init__(self, path: Path, context: dict | None = None):
        self.path, self.context = Path(path), context or {}
        self.values: dict[str, float] = {}
        self.archs: dict[str, dict] = {}  # digest -> the architecture (as a dict) of every score's network
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
                digest, accuracy = record.get("key", record["digest"]), float(record["accuracy"])
            except (ValueError, KeyError, TypeError):
                raise NasError(
                    f"{self.path}, line {number}: not an evaluation record; delete the file to evaluate again"
                ) from None
            if record.get("context", {}) == self.context:
                self.values[digest] = accuracy
                if "arch" in record:
                    self.archs[record["digest"]] = record["arch"]
            else:
                ignored += 1
        if ignored:
            log.info("%s: %d cached accuracies of other settings ignored", self.path, ignored)

    def add(self, arch: ArchConfig, accuracy: float, key: str | None = None, fidelity: Fidelity | None = None) -> None:
        """Record ``arch``'s ``accuracy`` under ``key`` (default: its digest, the search's fidelity)."""
        key = key or arch.digest
        self.values[key] = accuracy
        self.archs[arch.digest] = arch.to_dict()
        record = {"digest": arch.digest, "accuracy": accuracy, "context": self.context, "arch": arch.to_dict()}
        if key != arch.digest:
            record.update(key=key, fidelity=fidelity.to_dict() if fidelity else None)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def spec_dict(spec: EvalSpec) -> dict:
    """``spec`` as a plain dict (what Ray actors are built from)."""
    return asdict(spec)
