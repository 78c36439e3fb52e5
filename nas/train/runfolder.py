"""A training run's folder: lock, ``config.yaml``, metrics lines and ``result.json``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nas.core.errors import NasError
from nas.core.typed_yaml import dump_yaml, write_text_atomic
from nas.reports import write_json
from nas.runconfig import as_dict, read_run_config, require_resumable
from nas.runlock import RunLock
from nas.train.distributed import DistEnv

log = logging.getLogger(__name__)


class RunFolder:
    """``runs/<name>/``: resolved config, checkpoint, metrics (JSON lines) and results; one writer
    at a time (:class:`nas.runlock.RunLock`, held by the main process from :meth:`prepare` to
    :meth:`release`)."""

    def __init__(self, path: str | Path, env: DistEnv):
        self.path = Path(path)
        self.env = env
        self.checkpoint = self.path / "checkpoint.pt"
        self.metrics = self.path / "metrics.jsonl"
        self.lock: RunLock | None = None

    def prepare(self, config: Any, resume: bool) -> None:
        """Take the folder's lock, check it against ``resume`` and write (or compare) ``config.yaml``
        (``config`` is one of :mod:`nas.runconfig`'s dataclasses)."""
        config_path = self.path / "config.yaml"
        if resume and not self.checkpoint.exists():
            raise NasError(f"{self.path}: nothing to resume (no checkpoint.pt)")
        if not resume and self.checkpoint.exists():
            raise NasError(f"{self.path} already holds a run; pass --resume to continue it or choose another --run")
        if self.env.is_main:
            self.path.mkdir(parents=True, exist_ok=True)
            self.lock = RunLock(self.path, config.command).acquire()
            try:
                if resume:
                    require_resumable(read_run_config(config_path, type(config)), config, config_path)
                elif self.checkpoint.exists():  # written by a holder that finished before we took the lock
                    raise NasError(f"{self.path} already holds a run; pass --resume to continue it")
                else:
                    write_text_atomic(config_path, dump_yaml(as_dict(config)))
                    self.metrics.unlink(missing_ok=True)
            except BaseException:
                self.release()
                raise
        self.env.barrier()

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def log(self, record: dict[str, Any]) -> None:
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
        if self.env.is_main:
            write_json(self.path / name, data)


def finished_or_run(folder: Path, progress_file: str, start: Callable[[bool], dict[str, Any]]) -> dict[str, Any]:
    """The ``result.json`` of a finished run in ``folder``; otherwise ``start(resume)``, resuming
    when the run's ``progress_file`` (checkpoint or state) shows it was interrupted."""
    done = folder / "result.json"
    if done.exists():
        return json.loads(done.read_text(encoding="utf-8"))
    return start((folder / progress_file).exists())
