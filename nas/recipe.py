"""Training recipes: YAML in ``search_configs/recipes/`` into a typed, frozen dataclass.

Every field can be overridden on the command line (``--epochs 3 --lr 2e-3``): the options are
generated from the dataclass, so a recipe field and its flag never drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import typing
from dataclasses import dataclass
from pathlib import Path

from nas.errors import NasError
from nas.space import config_root
from nas.typed_yaml import dump_yaml, from_mapping, read_yaml


@dataclass(frozen=True)
class Recipe:
    """How to train (supernets and fixed networks alike)."""

    # schedule and optimiser (EfficientFormerV2 §5.1: AdamW, lr 1e-3 per 1024 images, cosine, 5 warm-up epochs)
    epochs: int = 300
    batch_size: int = 128  # per process
    lr: float = 1e-3  # at lr_reference_batch images per step; scaled linearly with the global batch
    lr_reference_batch: int = 1024
    weight_decay: float = 0.025
    warmup_epochs: float = 5.0
    warmup_lr: float = 1e-5
    min_lr: float = 1e-5
    clip_grad: float = 0.01  # 0 switches clipping off
    clip_mode: str = "agc"  # timm's clipping: "agc" (adaptive, as the released code) or "norm" or "value"
    # data and augmentation (timm)
    img_size: int = 224
    search_fraction: float = 0.1  # share of the training folder held out as the search split
    crop_scale_min: float = 0.08
    hflip: float = 0.5
    randaugment: str = "rand-m9-mstd0.5"  # timm auto_augment string; "" for none
    color_jitter: float = 0.4
    reprob: float = 0.25
    mixup: float = 0.8
    cutmix: float = 1.0
    label_smoothing: float = 0.1
    cache_images: bool = True  # keep decoded images in memory when they fit
    cache_max_mb: int = 4096
    loader_workers: int = 0  # DataLoader processes (--workers is Ray's, in search and compare)
    drop_path: float = 0.0  # stochastic depth (supernets and fixed networks)
    # supernet training
    sandwich_random: int = 2  # random sub-networks per step besides the largest and the smallest
    inplace_distill: bool = True  # others learn the largest sub-network's soft outputs
    teacher: str = ""  # timm model name for hard distillation ("" for none)
    teacher_checkpoint: str = ""
    distill_alpha: float = 0.5
    # exponential moving average of the weights (timm's ModelEmaV3), scored beside the weights
    model_ema: bool = False
    model_ema_decay: float = 0.9998
    model_ema_warmup: bool = True  # decay ramps up over the first steps (short runs need it)
    # EfficientFormer Gumbel-softmax search (§4.2): temperature annealed exponentially
    gumbel_tau_start: float = 5.0
    gumbel_tau_end: float = 0.5
    alpha_lr: float = 3e-4
    alpha_weight_decay: float = 1e-3
    # evaluation and checkpoints
    eval_batch_size: int = 256
    bn_calib_batches: int = 10
    checkpoint_every: int = 200  # steps; and at every epoch end
    log_every: int = 20

    def to_yaml(self) -> str:
        return dump_yaml(dataclasses.asdict(self))

    def lr_for(self, global_batch: int) -> float:
        return self.lr * global_batch / self.lr_reference_batch


#: Recipe keys renamed since runs were written; a saved run's recipe still loads.
RENAMED_KEYS = {"workers": "loader_workers"}


def recipe_from_saved(data: dict) -> Recipe:
    """The recipe stored in a run (``config.yaml``, a checkpoint or a Ray task), old key names included."""
    return Recipe(**{RENAMED_KEYS.get(k, k): v for k, v in data.items()})


def available_recipes() -> list[str]:
    return sorted(p.stem for p in (config_root() / "recipes").glob("*.yaml"))


def load_recipe(name_or_path: str | os.PathLike) -> Recipe:
    text = str(name_or_path)
    path = Path(text)
    if not (path.suffix in (".yaml", ".yml") or os.sep in text):
        path = config_root() / "recipes" / f"{text}.yaml"
        if not path.exists():
            raise NasError(f"unknown recipe {text!r}; available: {', '.join(available_recipes())} (or give a YAML path)")
    data = read_yaml(path, "recipe")
    return from_mapping(Recipe, data if data is not None else {}, str(path))


def add_recipe_overrides(parser: argparse.ArgumentParser) -> None:
    """One ``--field-name`` option per recipe field (default: the recipe's value)."""
    group = parser.add_argument_group("recipe overrides (default: the recipe's values)")
    hints = typing.get_type_hints(Recipe)
    for f in dataclasses.fields(Recipe):
        flag = "--" + f.name.replace("_", "-")
        kind = hints[f.name]
        if kind is bool:
            group.add_argument(flag, dest=f"recipe_{f.name}", type=_parse_bool, metavar="true|false")
        else:
            group.add_argument(flag, dest=f"recipe_{f.name}", type=kind, metavar=kind.__name__.upper())


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def recipe_from_args(args: argparse.Namespace) -> Recipe:
    recipe = load_recipe(args.recipe)
    changes = {f.name: getattr(args, f"recipe_{f.name}") for f in dataclasses.fields(Recipe)
               if getattr(args, f"recipe_{f.name}", None) is not None}
    return dataclasses.replace(recipe, **changes)
