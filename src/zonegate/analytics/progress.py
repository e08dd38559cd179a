"""Progress of the report on stderr: a live bar on a terminal, a few log lines otherwise.

On a terminal one line is redrawn in place (bar, step, elapsed time, and what
the step has done so far). Anywhere else (a file, a pipe, CI) each step is one
line with the time the previous one took, and nothing is redrawn, so a log of
the run stays a handful of lines.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

_BAR = 20


class Progress:
    def __init__(self, steps: int, out: TextIO | None = None, *, live: bool | None = None) -> None:
        self._steps = steps
        self._n = 0
        self._out = out or sys.stderr
        self.live = self._out.isatty() if live is None else live
        self._what = ""
        self._t0 = self._last = time.monotonic()

    def step(self, what: str) -> None:
        now = time.monotonic()
        self._n += 1
        self._what = what
        if self.live:
            self._draw("")
        else:
            self._out.write(f"[{self._n}/{self._steps}] {what} (+{now - self._last:.1f}s)\n")
            self._out.flush()
        self._last = now

    def update(self, detail: str) -> None:
        """What the current step has done so far: shown live, never logged."""
        if self.live:
            self._draw(detail)

    def _draw(self, detail: str) -> None:
        filled = _BAR * (self._n - 1) // self._steps
        bar = "#" * filled + "-" * (_BAR - filled)
        extra = f" · {detail}" if detail else ""
        line = f"[{bar}] {self._n}/{self._steps} {self._what}{extra} · {self._elapsed():.0f}s"
        self._out.write(f"\r\x1b[K{line}")
        self._out.flush()

    def _elapsed(self) -> float:
        return time.monotonic() - self._t0

    def done(self, what: str) -> None:
        if self.live:
            self._out.write(f"\r\x1b[K[{'#' * _BAR}] {self._steps}/{self._steps}\n")
        self._out.write(f"done: {what} in {self._elapsed():.1f}s\n")
        self._out.flush()

    def abandon(self) -> None:
        """End a live line before an error message is printed under it."""
        if self.live and self._n:
            self._out.write("\n")
            self._out.flush()
