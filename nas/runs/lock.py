"""One writer per run folder: a lock file naming its holder.

Two commands given the same run folder at once would interleave checkpoints, caches and metrics.
The first to start creates ``<folder>/.lock`` (written completely, then linked into place, so the
file is never seen half-written) holding its pid, host, process start time and command; a second
one exits with code 2 naming the holder. A lock left by a process that no longer runs (killed,
or its machine rebooted) is detected by pid and start time on the same host and taken over.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from nas.core.errors import NasError

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"


def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None where /proc is absent.
    A pid reused by a new process gets a new start time, so a stale lock is not mistaken for live."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(holder: dict[str, Any]) -> bool:
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's live process
    started = holder.get("started_ticks")
    return started is None or _process_start(pid) in (None, started)


def describe(holder: dict[str, Any]) -> str:
    """A lock holder for messages: pid, host, command and since when."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
    return f"pid {holder.get('pid')} on {holder.get('host')} ({holder.get('command') or 'a nas command'}, since {when})"


class RunLock:
    """``with RunLock(folder, "search"):`` holds ``folder/.lock`` for the block (the folder must
    exist); ``name`` locks one file of a shared folder instead (``.<table>.json.lock``)."""

    def __init__(self, folder: str | os.PathLike, command: str = "", name: str = LOCK_NAME):
        self.folder = Path(folder)
        self.path = self.folder / name
        self.command = command
        self.held = False
        self._token = uuid.uuid4().hex

    @property
    def target(self) -> Path:
        """What the lock guards: the folder, or the one file a named lock is for."""
        return self.folder if self.path.name == LOCK_NAME else self.folder / self.path.name[1 : -len(".lock")]

    def _record(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_ticks": _process_start(os.getpid()),
            "since": time.time(),
            "command": self.command,
            "token": self._token,
        }

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> "RunLock":
        tmp = self.path.with_name(f"{self.path.name}.{self._token}")
        tmp.write_text(json.dumps(self._record()), encoding="utf-8")
        try:
            for _ in range(10):
                try:
                    os.link(tmp, self.path)  # atomic: fails when a lock exists
                    self.held = True
                    return self
                except FileExistsError:
                    pass
                holder = self._read(self.path)
                if holder is None:
                    continue  # released meanwhile
                if holder.get("host") not in (None, socket.gethostname()):
                    raise NasError(
                        f"{self.target} is in use by {describe(holder)}; wait for it to finish, or delete "
                        f"{self.path} if that process is gone"
                    )
                if _alive(holder):
                    raise NasError(
                        f"{self.target} is in use by {describe(holder)}; wait for it to finish or choose another output"
                    )
                self._take_over(holder)
            raise NasError(f"{self.path}: could not take the lock (it keeps changing hands)")
        finally:
            tmp.unlink(missing_ok=True)

    def _take_over(self, stale: dict[str, Any]) -> None:
        """Move a dead holder's lock aside, unless another process replaced it meanwhile."""
        aside = self.path.with_name(f"{self.path.name}.stale.{self._token}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        if self._read(aside) == stale:
            log.warning("%s: taking over the lock of %s, which no longer runs", self.folder, describe(stale))
            aside.unlink(missing_ok=True)
        else:  # a live process took it over first: give it back
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
            aside.unlink(missing_ok=True)

    def release(self) -> None:
        if not self.held:
            return
        holder = self._read(self.path)
        if holder and holder.get("token") == self._token:
            self.path.unlink(missing_ok=True)
        self.held = False

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
