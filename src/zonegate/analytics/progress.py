"""Progress lines on stderr while the report runs: which step, how long the last one took."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, steps: int, out: TextIO | None = None) -> None:
        self._steps = steps
        self._n = 0
        self._out = out or sys.stderr
        self._t0 = self._last = time.monotonic()

    def step(self, what: str) -> None:
        now = time.monotonic()
        self._n += 1
        self._out.write(f"[{self._n}/{self._steps}] {what} (+{now - self._last:.1f}s)\n")
        self._out.flush()
        self._last = now

    def done(self, what: str) -> None:
        self._out.write(f"done: {what} in {time.monotonic() - self._t0:.1f}s\n")
        self._out.flush()
