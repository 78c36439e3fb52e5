"""Image data: which images a run reads (:mod:`nas.data.source`) and the loaders that feed them to
a network (:mod:`nas.data.loader`)."""

from nas.data.loader import (
    EpochSampler,
    ImageDataset,
    eval_loader,
    eval_transform,
    preload,
    train_loader,
    train_transform,
)
from nas.data.source import (
    IMAGE_EXTENSIONS,
    MEAN,
    STD,
    ImageSource,
    Splits,
    balanced_indices,
    calibration_indices,
    data_fingerprint,
    load_splits,
)

__all__ = [
    "IMAGE_EXTENSIONS",
    "MEAN",
    "STD",
    "EpochSampler",
    "ImageDataset",
    "ImageSource",
    "Splits",
    "balanced_indices",
    "calibration_indices",
    "data_fingerprint",
    "eval_loader",
    "eval_transform",
    "load_splits",
    "preload",
    "train_loader",
    "train_transform",
]
