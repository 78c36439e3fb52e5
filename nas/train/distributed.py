"""The process a training run is: its place in a ``torchrun`` job and its random seeds."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import numpy as np
import torch
import torch.distributed as dist

from nas.core.errors import NasError

log = logging.getLogger(__name__)

T = TypeVar("T")
#: How long the other ranks wait for rank 0's one-off work (the first decode check of a large data
#: set can take many minutes; the default process-group timeout is meant for a training step).
ON_MAIN_TIMEOUT = timedelta(hours=12)


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

    def on_main(self, work: Callable[[], T]) -> T:
        """``work()`` in rank 0 while the other ranks wait; every rank gets its result, or raises its
        :class:`NasError` (one check of the data for the job, not one per rank)."""
        if self.world == 1:
            return work()
        group = dist.new_group(backend="gloo", timeout=ON_MAIN_TIMEOUT)  # CPU objects, whatever the backend
        outcome: list = [None]
        try:
            if self.is_main:
                try:
                    outcome[0] = ("ok", work())
                except NasError as exc:
                    outcome[0] = ("error", str(exc))
                except BaseException as exc:
                    outcome[0] = ("crash", f"rank 0 failed: {type(exc).__name__}: {exc}")
                    dist.broadcast_object_list(outcome, src=0, group=group)
                    raise
            dist.broadcast_object_list(outcome, src=0, group=group)
        finally:
            dist.destroy_process_group(group)
        kind, value = outcome[0]
        if kind == "error":
            raise NasError(value)
        if kind == "crash":
            raise RuntimeError(value)
        return value

    def teardown(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global random generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
