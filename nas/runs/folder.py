"""A run folder and its protocol, the one every command that writes a run follows.

``runs/<name>/`` holds one run: its settings (:mod:`nas.runs.config`), its progress (a checkpoint,
a search state), metrics lines, ``result.json`` and ``wall.json`` (:mod:`nas.runs.provenance`).
A command checks the folder against ``--resume`` before it builds anything (:meth:`RunFolder.check`),
then takes the folder's lock, checks again (another process may have finished a run there
meanwhile) and records its settings or compares them with the recorded ones
(:meth:`RunFolder.start`). What marks a run and where its settings live differ by command
(:class:`RunKind`): a training run is marked by its checkpoint and records ``config.yaml``; a
search by its ``config.yaml``; a comparison and a ranking study by ``plan.json``, which holds the
settings under ``config`` beside the networks planned.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.typed_yaml import dump_yaml, read_yaml
from nas.runs.config import as_dict, require_resumable, run_config_from
from nas.runs.lock import RunLock
from nas.runs.provenance import RunClock
from nas.runs.writers import write_json

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
CONFIG = "config.yaml"
PLAN = "plan.json"
RESULT = "result.json"
METRICS = "metrics.jsonl"


@dataclass(frozen=True)
class RunKind:
    """What marks a run of one kind in its folder and where its settings are recorded."""

    holds: str  # the run in messages: "a run", "a search", ...
    marker: str  # the file a started run leaves: what --resume needs, what a new run must not find
    record: str = CONFIG  # config.yaml (the settings), or plan.json (the settings under "config")
    also_marks: tuple[str, ...] = ()  # other files a started run may leave
    option: str = "--run"  # the flag that names the folder
    rerecord: bool = False  # write config.yaml on --resume too (its free fields: paths, labels)


#: ``nas train`` and ``nas train-supernet``: the checkpoint marks the run.
TRAINING = RunKind("a run", CHECKPOINT)
#: ``nas search``: greedy writes state.json, optuna trials.jsonl; a resumed search records its paths anew.
SEARCH = RunKind("a search", CONFIG, also_marks=("state.json", "trials.jsonl"), rerecord=True)
#: ``nas compare``: the plan (networks fixed before any training) marks it.
COMPARISON = RunKind("a comparison", PLAN, record=PLAN, option="--out")
#: ``nas rank-check``.
RANKING = RunKind("a ranking study", PLAN, record=PLAN, option="--out")
#: ``nas headroom``: a pilot of random networks in a band, its plan as a comparison's (``--random-from``).
PILOT = RunKind("a headroom pilot", PLAN, record=PLAN, option="--out")


class _OneProcess:
    """The process environment of a command that is not a torchrun job."""

    is_main = True

    def barrier(self) -> None:
        """Nothing to wait for."""


class RunFolder:
    """One run folder of ``kind``; with ``env`` (a torchrun job's :class:`nas.train.distributed.DistEnv`),
    only the main process takes the lock and writes. Used as a context manager, the lock taken by
    :meth:`start` (or :meth:`hold`) is released at the block's end."""

    def __init__(self, path: str | Path, kind: RunKind | None = None, env: Any = None):
        self.path = Path(path)
        self.kind = kind
        self.env = env if env is not None else _OneProcess()
        self.lock: RunLock | None = None

    # --- paths ---------------------------------------------------------------------------------

    @property
    def checkpoint(self) -> Path:
        """Where a training run keeps its checkpoint."""
        return self.path / CHECKPOINT

    @property
    def metrics(self) -> Path:
        """The metrics log, one JSON line per record."""
        return self.path / METRICS

    @property
    def result(self) -> Path:
        """``result.json``: written once, when the run has finished."""
        return self.path / RESULT

    @property
    def finished(self) -> bool:
        """Whether the run has written its result."""
        return self.result.exists()

    @property
    def started(self) -> bool:
        """Whether a run of this kind was started here (its marker exists)."""
        return (self.path / self._kind.marker).exists()

    @property
    def _kind(self) -> RunKind:
        if self.kind is None:
            raise TypeError(f"{self.path}: this run folder was opened without a RunKind")
        return self.kind

    # --- the protocol --------------------------------------------------------------------------

    def check(self, config: Any, resume: bool, again: bool = False) -> dict[str, Any] | None:
        """Check the folder against ``resume``: a new run needs a folder without one, a resumed run
        the same settings (``config``, one of :mod:`nas.runs.config`'s dataclasses) as the recorded
        ones; a run that recorded them but stopped before its first save starts again. Returns the
        recorded settings file as read (``plan.json``'s whole mapping) when resuming a started run,
        else None. ``again``: the check made under the lock."""
        kind = self._kind
        if resume:
            if not self.started:
                if kind.record == kind.marker or not (self.path / kind.record).exists():
                    raise NasError(f"{self.path}: nothing to resume (no {kind.marker})")
                # Stopped before its first save (a training killed in its first steps): nothing to
                # continue, so --resume starts it again with the recorded settings, as a script that
                # resumes every folder it started expects.
                self._recorded(config)
                if again:
                    log.warning(
                        "%s: no %s yet (stopped before its first save): starting from the first step",
                        self.path,
                        kind.marker,
                    )
                return None
            return self._recorded(config)
        if any((self.path / name).exists() for name in (kind.marker, *kind.also_marks)):
            if again:  # written by a holder that finished before we took the lock
                raise NasError(f"{self.path} already holds {kind.holds}; pass --resume to continue it")
            raise NasError(
                f"{self.path} already holds {kind.holds}; pass --resume to continue it or choose another {kind.option}"
            )
        return None

    def start(self, config: Any, resume: bool, plan: dict[str, Any] | None = None) -> "RunFolder":
        """Create the folder, take its lock, check it again (:meth:`check`) and record ``config``
        (``plan``: what ``plan.json`` holds beside it), or keep the recorded one when resuming.
        The lock is held until :meth:`release` (or the end of a ``with`` block)."""
        if self.env.is_main:
            self.hold(config.command)
            try:
                self.check(config, resume, again=True)
                if not resume or self._kind.rerecord:
                    self._record(config, plan)
                if not (resume and self.started):
                    self.metrics.unlink(missing_ok=True)
            except BaseException:
                self.release()
                raise
        self.env.barrier()
        return self

    def hold(self, command: str) -> "RunFolder":
        """Create the folder and take its lock for ``command`` (a folder of stages, such as the demo's,
        holds only the lock: each stage is a run folder of its own)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.lock = RunLock(self.path, command).acquire()
        return self

    def release(self) -> None:
        """Release the lock, if held."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> "RunFolder":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def corrupt(self, error: Exception) -> NasError:
        """The error for a recorded plan that cannot be read back."""
        what = self._kind.holds.split(" ", 1)[-1]
        return NasError(f"{self.path / self._kind.record}: corrupt {what} plan ({type(error).__name__}: {error})")

    def recorded_setting(self, name: str, resume: bool) -> Any:
        """Setting ``name`` as the folder's record (``config.yaml`` or ``plan.json``'s ``config``) holds it,
        when resuming: what a resumed run keeps (such as the size it priced at). None when not resuming, when
        nothing is recorded, or when the record cannot be read: :meth:`check` says what is wrong with it."""
        path = self.path / self._kind.record
        if not (resume and path.is_file()):
            return None
        try:
            if self._kind.record == CONFIG:
                return (read_yaml(path, "run config") or {}).get(name)
            return json.loads(path.read_text(encoding="utf-8"))["config"].get(name)
        except (NasError, OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _recorded(self, config: Any) -> dict[str, Any]:
        """The recorded settings file, after refusing settings that differ from ``config``."""
        path = self.path / self._kind.record
        if self._kind.record == CONFIG:
            saved = read_yaml(path, "run config")
            require_resumable(run_config_from(saved, path, type(config)), config, path)
            return saved
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            require_resumable(run_config_from(saved["config"], path, type(config)), config, path)
        except (ValueError, KeyError, TypeError) as exc:
            raise self.corrupt(exc) from None
        return saved

    def _record(self, config: Any, plan: dict[str, Any] | None) -> None:
        path = self.path / self._kind.record
        if self._kind.record == CONFIG:
            write_text_atomic(path, dump_yaml(as_dict(config)))
        else:
            write_text_atomic(path, json.dumps({"config": as_dict(config), **(plan or {})}, indent=1) + "\n")

    # --- while it runs -------------------------------------------------------------------------

    def clock(self, resume: bool) -> RunClock:
        """The run's wall-time record (``wall.json``), continued when resuming."""
        return RunClock(self.path, resume)

    def log(self, record: dict[str, Any]) -> None:
        """Append one metrics line (main process)."""
        if self.env.is_main:
            with self.metrics.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")

    def truncate_metrics(self, step: int) -> None:
        """Drop metric lines written after the checkpoint a resumed run starts from (and the final
        line of a run stopped early by ``--max-steps``)."""
        if not self.env.is_main or not self.metrics.exists():
            return
        records = [
            (line, json.loads(line)) for line in self.metrics.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        kept = [line for line, r in records if r.get("step", 0) <= step and not r.get("final")]
        write_text_atomic(self.metrics, "".join(line + "\n" for line in kept))

    def write_json(self, name: str, data: Any) -> None:
        """``data`` as ``name`` in the folder (main process)."""
        if self.env.is_main:
            write_json(self.path / name, data)

    def write_result(self, result: dict[str, Any]) -> None:
        """``result.json`` (main process): the run has finished."""
        self.write_json(RESULT, result)

    def read_result(self) -> dict[str, Any]:
        """The finished run's ``result.json``."""
        return json.loads(self.result.read_text(encoding="utf-8"))

    def finished_or_run(self, start: Callable[[bool], dict[str, Any]]) -> dict[str, Any]:
        """The ``result.json`` of a finished run; otherwise ``start(resume)``, resuming when the
        kind's marker shows a run was started and interrupted."""
        if self.finished:
            return self.read_result()
        return start(self.started)
