"""Checkpoints: written atomically, read as data only.

A checkpoint is a ``torch.save`` of tensors and plain containers (dict, list, tuple, str, int,
float, bool, None). It is read with ``torch.load(weights_only=True)``, whose unpickler builds
nothing else, so a file from someone else (a shared supernet, a teacher's weights, a ``nas train``
checkpoint to export) is data and can never run code. Random-generator states are stored as
tensors and integers for the same reason (numpy's own state object would need numpy's pickle
globals).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nas.core.errors import NasError


def save_checkpoint(path: str | os.PathLike, state: Mapping[str, Any]) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename: never half-written."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(dict(state), tmp)
    os.replace(tmp, path)


def load_checkpoint(
    path: str | os.PathLike, what: str = "checkpoint", require: Iterable[str] = (), mmap: bool = False
) -> dict[str, Any]:
    """The mapping stored in ``path``, loaded as data only (``weights_only=True``).

    Any problem is one :class:`NasError` line naming the file: missing, not a file, truncated or
    not a torch file, holding Python objects other than tensors and plain data (refused, never
    executed), not a mapping, or lacking one of the ``require`` keys. ``mmap`` maps tensors
    instead of reading them (cheap when only the metadata is wanted).
    """
    path = Path(path)
    if not path.exists():
        raise NasError(f"{path}: {what} not found")
    if not path.is_file():
        raise NasError(f"{path}: is not a file, expected a {what}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        # The weights-only unpickler names the first global it refused (e.g. ``posix.system``).
        refused = next(
            (line.strip() for line in str(exc).splitlines() if "GLOBAL" in line or "global" in line),
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        raise NasError(
            f"{path}: refused to load this {what}: it holds Python objects other than tensors and plain "
            f"data ({refused}); checkpoints are read as data only and never run code"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, AttributeError, KeyError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NasError(f"{path}: corrupt or truncated {what} ({type(exc).__name__}: {first})") from None
    if not isinstance(state, dict):
        raise NasError(f"{path}: not a {what}: expected a mapping of names to tensors, got {type(state).__name__}")
    missing = [key for key in require if key not in state]
    if missing:
        raise NasError(
            f"{path}: not a {what}: it lacks {', '.join(repr(k) for k in missing)} "
            f"(keys: {', '.join(map(str, list(state)[:8]))})"
        )
    return state


def file_digest(path: str | os.PathLike, length: int = 16) -> str:
    """SHA-256 of a file's bytes (the first ``length`` hex digits): identifies a checkpoint or table
    in resume checks and cache keys, whatever its path."""
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:length]


def rng_state() -> dict[str, Any]:
    """Python's, numpy's and torch's generator states, as tensors and plain data."""
    numpy_state = np.random.get_state(legacy=False)
    state = {
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "numpy": {
            "key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        },
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": "MT19937",
            "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


#: timm's classifier heads (EfficientFormer, EfficientFormerV2, SwiftFormer): re-initialised when the
#: released weights were trained for another number of classes.
HEAD_PREFIXES = ("head.", "head_dist.", "dist_head.")


def load_pretrained(model: torch.nn.Module, path: str | os.PathLike, what: str = "network") -> list[str]:
    """Load released (timm) weights into ``model``, strictly: every key must exist with its shape,
    except the classifier heads, which are left initialised when they were trained for another
    number of classes (fine-tuning from ImageNet weights). Returns the keys left initialised; a
    mismatch is one :class:`NasError` naming the missing, unexpected or misshapen keys."""
    state = load_checkpoint(path, "weights file")
    for key in ("model", "state_dict", "model_ema"):
        if isinstance(state.get(key), dict):
            state = state[key]
            break
    own = model.state_dict()
    state = {
        k: _resized_bias(v, own[k]) if k.endswith("attention_biases") and k in own else v for k, v in state.items()
    }
    mismatched = [k for k in state if k in own and tuple(own[k].shape) != tuple(getattr(state[k], "shape", ()))]
    heads = [k for k in mismatched if k.startswith(HEAD_PREFIXES)]
    misshapen = [k for k in mismatched if k not in heads]
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]

    def names(keys: list[str]) -> str:
        return ", ".join(keys[:4]) + (f" (+{len(keys) - 4} more)" if len(keys) > 4 else "")

    problems = [
        f"{label}: {names(keys)}"
        for label, keys in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("keys of another shape", misshapen),
        )
        if keys
    ]
    if problems:
        raise NasError(f"{path}: does not fit the {what} ({'; '.join(problems)})")
    model.load_state_dict({k: v for k, v in state.items() if k not in heads}, strict=False)
    return heads


def _resized_bias(bias: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """An attention-bias table (heads x grid points) for another resolution: the square grid is
    resized bicubically, as timm does for relative position biases, so weights trained at 224 fine-
    tune at another input size."""
    if (
        not isinstance(bias, torch.Tensor)
        or bias.shape == like.shape
        or bias.ndim != 2
        or like.ndim != 2
        or bias.shape[0] != like.shape[0]
    ):
        return bias
    old, new = round(bias.shape[1] ** 0.5), round(like.shape[1] ** 0.5)
    if old * old != bias.shape[1] or new * new != like.shape[1]:
        return bias
    grid = bias.reshape(1, bias.shape[0], old, old).float()
    resized = torch.nn.functional.interpolate(grid, size=(new, new), mode="bicubic", align_corners=False)
    return resized.reshape(like.shape).to(bias.dtype)
