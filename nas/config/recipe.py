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

from nas.config.folder import config_root
from nas.core.errors import NasError
from nas.core.typed_yaml import (
    check_settings,
    dump_yaml,
    from_mapping,
    names_a_file,
    read_yaml,
    setting,
)

#: Gradient clipping modes of timm's ``dispatch_clip_grad``.
CLIP_MODES = ("agc", "norm", "value")
#: Mixed-precision modes: ``bf16`` autocast (CPU and CUDA), ``fp16`` autocast with loss scaling (CUDA).
AMP_MODES = ("none", "bf16", "fp16")
#: In-place distillation losses: KL divergence, or AlphaNet's adaptive alpha-divergence.
DISTILL_DIVERGENCES = ("kl", "alpha")
#: How trainers read a shard folder (:mod:`nas.data.shards`): as streams, or by index like a folder.
SHARD_READINGS = ("stream", "index")
#: ``loader_workers: auto``: worker processes chosen when the loader is built.
LOADER_WORKERS_AUTO = "auto"
#: The smallest input side every family's stem and four downsampling stages accept.
MIN_IMG_SIZE = 32
#: Epochs ``nas demo`` trains with the demo recipe, its supernet and each network from scratch: about
#: five minutes on 2 CPU cores in all, long enough for the from-scratch accuracies to settle above 90%.
DEMO_SUPERNET_EPOCHS = 8
DEMO_TRAIN_EPOCHS = 15


@dataclass(frozen=True)
class Recipe:
    """How to train (supernets and fixed networks alike). Each field's ``help`` says what it means;
    ``docs/reference/recipes.md`` lists them all."""

    # schedule and optimiser (EfficientFormerV2 §5.1: AdamW, lr 1e-3 per 1024 images, cosine, 5 warm-up epochs)
    epochs: int = setting(300, low=1, help="training epochs; the cosine schedule spans them all")
    batch_size: int = setting(
        128, low=1, help="images per step in each process (the global batch is this times the processes)"
    )
    lr: float = setting(
        1e-3,
        low=0,
        exclusive="low",
        help="AdamW peak learning rate at lr_reference_batch images per step; scaled linearly with the global batch",
    )
    lr_reference_batch: int = setting(1024, low=1, help="global batch size at which lr applies unscaled")
    weight_decay: float = setting(0.025, low=0, help="AdamW weight decay")
    warmup_epochs: float = setting(5.0, low=0, help="epochs of linear warm-up from warmup_lr (at most epochs)")
    warmup_lr: float = setting(1e-5, low=0, help="learning rate at the start of the warm-up")
    min_lr: float = setting(1e-5, low=0, help="learning rate at the end of the cosine schedule")
    clip_grad: float = setting(0.01, low=0, help="gradient clipping threshold (0 switches clipping off)")
    clip_mode: str = setting(
        "agc",
        choices=CLIP_MODES,
        help="timm's clipping mode: agc (adaptive, as the released EfficientFormerV2 code), norm or value",
    )
    # data and augmentation (timm)
    img_size: int = setting(224, low=MIN_IMG_SIZE, help="input side in pixels for training and evaluation")
    search_fraction: float = setting(
        0.1,
        low=0,
        high=1,
        exclusive="both",
        help="fraction of the training images held out as the search split (the search scores sub-networks on it)",
    )
    train_images: int = setting(
        0,
        low=0,
        help="0: every training image; else a seeded, class-balanced subset of this many "
        "(a short proxy recipe that keeps the class mix)",
    )
    crop_scale_min: float = setting(
        0.08, low=0, high=1, exclusive="low", help="smallest area fraction of timm's random resized crop"
    )
    hflip: float = setting(0.5, low=0, high=1, help="probability of a horizontal flip")
    randaugment: str = setting("", help='timm auto_augment string such as "rand-m9-mstd0.5"; "" for none')
    color_jitter: float = setting(0.4, low=0, help="colour jitter strength (timm)")
    reprob: float = setting(0.25, low=0, high=1, help="random erasing probability (timm)")
    mixup: float = setting(0.8, low=0, help="mixup alpha (0: off)")
    cutmix: float = setting(1.0, low=0, help="cutmix alpha (0: off)")
    label_smoothing: float = setting(0.1, low=0, high=1, exclusive="high", help="label smoothing of the targets")
    cache_images: bool = setting(True, free=True, help="keep decoded images in memory when they fit in cache_max_mb")
    cache_max_mb: int = setting(4096, low=0, free=True, help="memory, in MB, that cached images may take")
    loader_workers: int | str = setting(
        LOADER_WORKERS_AUTO,
        low=0,
        words=(LOADER_WORKERS_AUTO,),
        free=True,
        help="DataLoader worker processes (--workers is Ray's): a number, or auto: 0 for images decoded in "
        "memory, else this process's share of the cores",
    )
    shard_reading: str = setting(
        "stream",
        choices=SHARD_READINGS,
        help="how the trainers read a shard folder: stream (each process reads its own shards in turn, a "
        "seeded order of their own: for shards on slow or remote disks) or index (each image by one seek, "
        "in the order the image folder gives: the folder's results). Every other command reads by index",
    )
    drop_path: float = setting(0.0, low=0, high=1, exclusive="high", help="stochastic depth rate")
    # supernet training
    sandwich_random: int = setting(
        2, low=0, help="random sub-networks per step besides the largest and the smallest (sandwich rule)"
    )
    # Parameter counts, as --target of --objective params (one unit per cost across options).
    sandwich_params_low: float = setting(
        0.0,
        low=0,
        help="lower end of the band the random sub-networks are drawn from: a parameter count such as 3e6 "
        "at img_size (AttentiveNAS: train where the search will look); 0 leaves it open",
    )
    sandwich_params_high: float = setting(
        0.0, low=0, help="upper end of that band: a parameter count such as 5e6; 0 leaves it open"
    )
    inplace_distill: bool = setting(True, help="the other sub-networks learn the largest sub-network's soft outputs")
    inplace_distill_divergence: str = setting(
        "kl",
        choices=DISTILL_DIVERGENCES,
        help="how they learn them: kl (KL divergence, BigNAS/EfficientFormerV2) or alpha (AlphaNet's adaptive "
        "alpha-divergence: the larger of the divergences at inplace_distill_alpha_min and "
        "inplace_distill_alpha_max, importance weights clipped at inplace_distill_iw_clip)",
    )
    inplace_distill_alpha_min: float = setting(
        -1.0, high=0, exclusive="high", help="alpha: the negative alpha of the adaptive divergence"
    )
    inplace_distill_alpha_max: float = setting(
        1.0, low=0, exclusive="low", help="alpha: the positive alpha of the adaptive divergence"
    )
    inplace_distill_iw_clip: float = setting(
        5.0, low=0, exclusive="low", help="alpha: where the divergence's importance weights are clipped"
    )
    sandwich_gradient_projection: bool = setting(
        False,
        help="NASViT's gradient projection: where the largest sub-network's gradient of a weight tensor points "
        "against the other sub-networks' (negative inner product), project it onto the normal plane of theirs "
        "before summing, so the smaller sub-networks' training comes first",
    )
    teacher: str = setting("", help='timm model name for hard distillation ("" for none)')
    teacher_checkpoint: str = setting("", help="the teacher's weights (a timm state dict or checkpoint); needs teacher")
    distill_alpha: float = setting(
        0.5, low=0, high=1, help="weight of the teacher's hard labels in the loss (the rest: the targets')"
    )
    model_ema: bool = setting(
        False, help="keep an exponential moving average of the weights (timm's ModelEmaV3), scored beside them"
    )
    model_ema_decay: float = setting(0.9998, low=0, high=1, exclusive="both", help="decay of the moving average")
    model_ema_warmup: bool = setting(True, help="the decay ramps up over the first steps (short runs need it)")
    # EfficientFormer Gumbel-softmax search (§4.2): temperature annealed exponentially
    gumbel_tau_start: float = setting(
        5.0, low=0, exclusive="low", help="EfficientFormer: Gumbel-softmax temperature at the start of training"
    )
    gumbel_tau_end: float = setting(
        0.5, low=0, exclusive="low", help="EfficientFormer: temperature at the end (annealed exponentially)"
    )
    alpha_lr: float = setting(3e-4, low=0, help="EfficientFormer: learning rate of the block-choice parameters")
    alpha_weight_decay: float = setting(1e-3, low=0, help="EfficientFormer: weight decay of those parameters")
    # speed on a GPU: mixed precision, memory layout, compilation (compile: fixed networks on CUDA only)
    amp: str = setting(
        "none",
        choices=AMP_MODES,
        help="autocast for training and evaluation: none, bf16 (CPU and CUDA) or fp16 (CUDA, with loss scaling)",
    )
    channels_last: bool = setting(False, help="channels-last memory layout for the network and its inputs")
    compile: bool = setting(
        False, help="torch.compile the training forward of a fixed network on CUDA (a supernet's changes per step)"
    )
    # evaluation and checkpoints
    eval_batch_size: int = setting(256, low=1, help="images per batch when scoring")
    bn_calib_batches: int = setting(
        10, low=1, help="training batches that recalibrate a sub-network's batch-norm statistics before it is scored"
    )
    checkpoint_every: int = setting(
        200, low=1, free=True, help="steps between checkpoints (and one at every epoch end)"
    )
    log_every: int = setting(20, low=1, free=True, help="steps between lines of metrics.jsonl")

    def to_yaml(self) -> str:
        return dump_yaml(dataclasses.asdict(self))

    def lr_for(self, global_batch: int) -> float:
        return self.lr * global_batch / self.lr_reference_batch

    def check(self, where: str) -> "Recipe":
        """Rules that tie fields together (each field's own range is checked where it is read)."""
        if self.teacher_checkpoint and not self.teacher:
            raise NasError(f"{where}: teacher_checkpoint is set but teacher is not; give --teacher MODEL")
        if self.sandwich_params_high and self.sandwich_params_low > self.sandwich_params_high:
            raise NasError(
                f"{where}: sandwich_params_low ({self.sandwich_params_low:g}) exceeds sandwich_params_high "
                f"({self.sandwich_params_high:g})"
            )
        if self.warmup_epochs > self.epochs:
            raise NasError(f"{where}: warmup_epochs ({self.warmup_epochs:g}) exceeds epochs ({self.epochs})")
        return self


#: Recipe keys renamed since runs were written; a saved run's recipe still loads.
RENAMED_KEYS = {"workers": "loader_workers"}
#: Keys of earlier runs in millions of parameters, now parameter counts: old key -> (key, factor).
RESCALED_KEYS = {
    "sandwich_params_min": ("sandwich_params_low", 1e6),
    "sandwich_params_max": ("sandwich_params_high", 1e6),
}


def saved_recipe_fields(data: dict) -> dict:
    """A recipe mapping stored by any version (``config.yaml``, ``plan.json``, a checkpoint) with today's
    keys: renamed keys under their new names, the band of earlier runs from millions to parameter counts."""
    fields = {}
    for key, value in data.items():
        if key in RESCALED_KEYS:
            key, factor = RESCALED_KEYS[key]
            if isinstance(value, (int, float)) and not isinstance(value, bool):  # else the type check says so
                value = float(round(value * factor))
        fields[RENAMED_KEYS.get(key, key)] = value
    return fields


def recipe_from_saved(data: dict) -> Recipe:
    """The recipe stored in a run (``config.yaml``, a checkpoint or a Ray task), old keys included."""
    return Recipe(**saved_recipe_fields(data))


def available_recipes() -> list[str]:
    """Names of the recipes in ``search_configs/recipes/``."""
    return sorted(p.stem for p in (config_root() / "recipes").glob("*.yaml"))


def load_recipe(name_or_path: str | os.PathLike) -> Recipe:
    """The recipe named ``name_or_path`` in ``search_configs/recipes/``, or read from a YAML path; checked."""
    text = str(name_or_path)
    path = Path(text)
    if not names_a_file(text):
        path = config_root() / "recipes" / f"{text}.yaml"
        if not path.exists():
            raise NasError(
                f"unknown recipe {text!r}; available: {', '.join(available_recipes())} (or give a YAML path)"
            )
    data = read_yaml(path, "recipe")
    if isinstance(data, dict):  # a recipe written for an earlier version: its old keys, as a saved run's
        data = saved_recipe_fields(data)
    return from_mapping(Recipe, data if data is not None else {}, str(path)).check(str(path))


#: Recipe fields that only a supernet's training reads (the sandwich rule, in-place distillation,
#: EfficientFormer's Gumbel-softmax block choice): options of ``nas train-supernet`` alone.
SUPERNET_FIELDS = frozenset(
    f.name
    for f in dataclasses.fields(Recipe)
    if f.name.startswith(("sandwich_", "inplace_distill", "gumbel_", "alpha_"))
)


def add_recipe_overrides(parser: argparse.ArgumentParser, supernet: bool = False) -> None:
    """One ``--field-name`` option per recipe field (default: the recipe's value); the supernet-only
    fields (:data:`SUPERNET_FIELDS`) only with ``supernet``, since they mean nothing to a fixed network."""
    group = parser.add_argument_group("recipe overrides (default: the recipe's values)")
    group.add_argument(
        "--set",
        dest="recipe_set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a recipe field as key=value, repeatable: the same as its flag below (--set lr=0.001 is --lr 0.001)",
    )
    hints = typing.get_type_hints(Recipe)
    for f in dataclasses.fields(Recipe):
        if f.name in SUPERNET_FIELDS and not supernet:
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = hints[f.name]
        if kind is bool:
            # --x (true), --no-x (false); --x true|false as before
            group.add_argument(
                flag, dest=f"recipe_{f.name}", type=_reader(f, kind), nargs="?", const=True, metavar="true|false",
                help=help_of(f),
            )  # fmt: skip
            group.add_argument(
                "--no-" + flag[2:], dest=f"recipe_{f.name}", action="store_const", const=False,
                help=f"the same as {flag} false",
            )  # fmt: skip
        else:  # a word or a number is checked with the other flags (recipe_from_args)
            metavar = "|".join(f.metadata["words"]) + "|INT" if f.metadata.get("words") else kind.__name__.upper()
            group.add_argument(flag, dest=f"recipe_{f.name}", type=_reader(f, kind), metavar=metavar, help=help_of(f))


def _reader(f: dataclasses.Field, kind: type) -> typing.Callable[[str], typing.Any]:
    """How a recipe field (of type ``kind``) is read from the command line, by its flag and by ``--set``."""
    return _parse_bool if kind is bool else _parse_word_or_int if f.metadata.get("words") else kind


def help_of(f: dataclasses.Field) -> str:
    """A recipe field's meaning, as an option's help (argparse expands ``%`` in help, so it is doubled)."""
    return f.metadata.get("help", "").replace("%", "%%")


def _parse_word_or_int(text: str) -> int | str:
    """``text`` as an integer when it is one, else as given (its field's rules judge it)."""
    try:
        return int(text)
    except ValueError:
        return text


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _assigned(pairs: list[str], args: argparse.Namespace) -> dict[str, typing.Any]:
    """``--set key=value`` pairs as typed recipe changes, read as the fields' flags read them; a pair that is
    not key=value, names no field this command has, or disagrees with the field's flag is one NasError."""
    hints = typing.get_type_hints(Recipe)
    fields = {f.name: f for f in dataclasses.fields(Recipe) if hasattr(args, f"recipe_{f.name}")}
    changes: dict[str, typing.Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise NasError(f"--set {pair!r}: give key=value (a recipe field and its value)")
        if key not in fields:
            raise NasError(f"--set {key}: not a recipe field of this command; its fields: {', '.join(fields)}")
        kind = hints[key]
        try:
            value = _reader(fields[key], kind)(text.strip())
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise NasError(f"--set {key}={text}: expected {getattr(kind, '__name__', kind)} ({exc})") from None
        flag = getattr(args, f"recipe_{key}", None)
        if flag is not None and flag != value:
            raise NasError(f"--set {key}={text} and --{key.replace('_', '-')} {flag} disagree; give one")
        changes[key] = value
    return changes


def recipe_from_args(args: argparse.Namespace) -> Recipe:
    """The ``--recipe`` recipe with the command line's recipe overrides (flags and ``--set key=value``)
    applied; checked."""
    recipe = load_recipe(args.recipe)
    changes = {
        f.name: getattr(args, f"recipe_{f.name}")
        for f in dataclasses.fields(Recipe)
        if getattr(args, f"recipe_{f.name}", None) is not None
    }
    changes.update(_assigned(getattr(args, "recipe_set", []), args))
    recipe = dataclasses.replace(recipe, **changes)
    check_settings(recipe, lambda name: "--" + name.replace("_", "-"), only=set(changes))
    return recipe.check(f"recipe {args.recipe} with the given flags")
