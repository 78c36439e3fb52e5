"""The process a training run is: its place in a ``torchrun`` job and its random seeds."""

from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

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
