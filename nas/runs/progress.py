"""What a long command tells its user while it runs: how far it is, how it is doing, how long is left.

On a terminal a tqdm bar (updated in place); elsewhere (a log file, a CI job, a notebook's captured
stderr) one line per unit of work the caller marks (a generation, a greedy step, a training) and at least
one every ``every_s`` seconds, so no long command is silent for longer. ``enabled=False`` (``-q``) shows
nothing. It writes to stderr, like tqdm; results go to stdout and to the run folder.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from typing import TextIO

from tqdm import tqdm


def duration_words(seconds: float) -> str:
    """``seconds`` as a reader says it: ``40 s``, ``12 min``, ``2.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class Display:
    """Where progress lines go (None: stderr), how often at least (not on a terminal), and the clock
    that times them (tests give their own)."""

    stream: TextIO | None = None
    every_s: float = 30.0
    clock: Callable[[], float] = time.monotonic


class Progress:
    """Counts done units of ``total`` (None: unknown) and shows them with a status the caller keeps up to
    date (``status()``: the best so far, the step) and an estimate of the time left.

    The estimate is the mean time per unit done in this process times the units left; without a total, the
    caller may give ``fraction()`` (its own share done, 0 to 1), and the time left is the elapsed time
    scaled by what remains of it."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        done: int = 0,
        unit: str = "done",
        enabled: bool = True,
        status: Callable[[], str] | None = None,
        fraction: Callable[[], float | None] | None = None,
        display: Display = Display(),
    ):
        self.label, self.total, self.done, self.unit, self.enabled = label, total, done, unit, enabled
        self._status, self._fraction, self._pushed = status, fraction, ""
        self.stream = display.stream if display.stream is not None else sys.stderr
        self.every_s, self.clock = display.every_s, display.clock
        self._started, self._start_done = self.clock(), done
        self._last_line = self._started
        self._bar = None
        if enabled and _is_terminal(self.stream):
            self._bar = tqdm(total=total, initial=done, desc=label, file=self.stream, dynamic_ncols=True, leave=True)

    def left_seconds(self) -> float | None:
        """The estimated time left, or None before there is anything to estimate from."""
        elapsed = self.clock() - self._started
        new = self.done - self._start_done
        if self.total is not None and self.done >= self.total:
            return None  # the count is done; what follows (a search's finalists) is not estimated
        if self.total is not None and new > 0:
            return max(self.total - self.done, 0) * elapsed / new
        share = self._fraction() if self._fraction is not None else None
        if share is not None and 0.02 <= share < 1:
            return elapsed * (1 - share) / share
        return None

    def line(self) -> str:
        """The one-line state: done (of the total), the caller's status, the time left."""
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        parts = [f"{self.label}: {count} {self.unit}"]
        status = self._status_text()
        if status:
            parts.append(status)
        left = self.left_seconds()
        if left is not None:
            parts.append(f"about {duration_words(left)} left")
        return ", ".join(parts)

    def advance(self, n: int = 1) -> None:
        """``n`` more units done; a line when ``every_s`` passed since the last one (not on a terminal)."""
        self.done += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            status = self._status_text()
            if status:
                self._bar.set_postfix_str(status, refresh=False)
            return
        if self.clock() - self._last_line >= self.every_s:
            self._write()

    def set_status(self, text: str) -> None:
        """The status shown from now on (for callers that push it rather than being asked)."""
        self._pushed = text

    def mark(self) -> None:
        """A unit of the caller's work ended (a generation, a step): a line, when not on a terminal."""
        if self.enabled and self._bar is None:
            self._write()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _status_text(self) -> str:
        return self._status() if self._status is not None else self._pushed

    def _write(self) -> None:
        self.stream.write(self.line() + "\n")
        self.stream.flush()
        self._last_line = self.clock()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def tracked(
    items: Iterable, label: str, enabled: bool = True, unit: str = "done", display: Display = Display()
) -> Iterator:
    """``items`` one by one, counted as a :class:`Progress` (a bar, or a line at least every 30 s); the total is
    ``len(items)`` where it has one."""
    total = len(items) if isinstance(items, Sized) else None
    with Progress(label, total=total, unit=unit, enabled=enabled, display=display) as progress:
        for item in items:
            yield item
            progress.advance()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
