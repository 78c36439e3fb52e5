"""Where a run's results came from: the code's commit, the library versions, and the wall time
spent on it over every session that worked on it (a run resumed three times has three sessions).

Each run folder keeps ``wall.json``: one entry per session (start time, seconds, commit), rewritten
atomically whenever the run saves its progress, so a killed session loses at most the time since
its last save; a run whose progress is saved in other folders (a comparison's trainings) ticks its own
clock on a timer instead (:meth:`RunClock.ticking`). ``result.json`` gets :meth:`RunClock.summary`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import platform
import subprocess
import threading
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from nas.core.atomic_files import write_text_atomic

log = logging.getLogger(__name__)

_REPO = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """The commit of the checkout ``nas`` runs from and whether it had uncommitted changes to
    tracked files (``commit`` is ``"unknown"`` outside a git checkout, e.g. a wheel install)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return {"commit": commit, "dirty": bool(changed)}
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": False}


def environment() -> dict[str, Any]:
    """Library versions and the machine's core count: what a reader needs to weigh a wall time."""
    import timm
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "timm": timm.__version__,
        "cpus": os.cpu_count(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


class RunClock:
    """Wall time of one run over all its sessions, kept in ``<folder>/wall.json``.

    ``resume=False`` starts the count afresh (a new run); ``resume=True`` continues the sessions
    recorded there. An unreadable ``wall.json`` is informational only: it is restarted with a warning.
    """

    def __init__(self, folder: str | Path, resume: bool):
        self.path = Path(folder) / "wall.json"
        self.previous: list[dict[str, Any]] = []
        if resume and self.path.exists():
            try:
                self.previous = list(json.loads(self.path.read_text(encoding="utf-8"))["sessions"])
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s: unreadable (%s); wall time counts from this session", self.path, exc)
        self._started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self._t0 = time.perf_counter()
        self._writing = threading.Lock()
        # The code this process imported, read now: code_version() is cached at its first call, which
        # would otherwise be the first save, after a commit made since the start would be recorded.
        self._code = code_version()

    def sessions(self) -> list[dict[str, Any]]:
        current = {"started": self._started_at, "seconds": round(time.perf_counter() - self._t0, 1), **self._code}
        return self.previous + [current]

    def tick(self) -> None:
        """Record the time spent so far (call where the run saves its progress)."""
        with self._writing:  # the timer of ticking() and the run's own saves write one after the other
            if self.path.parent.exists():
                write_text_atomic(self.path, json.dumps({"sessions": self.sessions()}, indent=1) + "\n")

    @contextlib.contextmanager
    def ticking(self, every_s: float = 60.0) -> Iterator["RunClock"]:
        """Tick every ``every_s`` seconds while the block runs, and once as it ends (an exception
        included). For a run that saves its progress elsewhere: a comparison whose network trains for
        minutes in its own folder would otherwise lose the whole session's time if killed mid-training."""
        stop = threading.Event()

        def tick_until_stopped() -> None:
            while not stop.wait(every_s):
                self.tick()

        timer = threading.Thread(target=tick_until_stopped, name=f"wall clock of {self.path.parent}", daemon=True)
        timer.start()
        try:
            yield self
        finally:
            stop.set()
            timer.join()
            self.tick()

    def summary(self) -> dict[str, Any]:
        """For ``result.json``: total wall seconds, sessions, and the code and libraries that made it."""
        self.tick()
        sessions = self.sessions()
        return {
            "wall_seconds": round(sum(s["seconds"] for s in sessions), 1),
            "sessions": len(sessions),
            **self._code,
            **environment(),
        }
