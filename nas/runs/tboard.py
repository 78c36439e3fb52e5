"""TensorBoard event files beside ``metrics.jsonl``, so ``tensorboard --logdir runs/`` shows a
whole experiment (every supernet, network and search of it).

A resumed run continues its curves: the writer is opened with ``purge_step`` one past the step
the run resumes from, which hides what the interrupted process logged after its last checkpoint,
so no step appears twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class Curves:
    """Scalars of one run folder, under ``group/name`` tags."""

    def __init__(self, folder: str | Path, purge_from: int | None = None):
        """``purge_from``: for a resumed run, the first step it logs again (earlier files' points
        from there on are hidden); None for a new run."""
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_from)

    def add(self, group: str, values: Mapping[str, Any], step: int) -> None:
        """Every finite number of ``values`` (other entries are skipped)."""
        for name, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                self.writer.add_scalar(f"{group}/{name}", value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
