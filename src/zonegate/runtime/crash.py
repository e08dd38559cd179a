"""A test hook that kills the process at a named step, as kill -9 would there.

`ZONEGATE_CRASH_AT=<step>` (a comma-separated list) makes `crash_point(step)` end
the process at once with status 137, writing nothing more: no flush, no atexit,
no lease given back. The crash-safety tests of retention and object GC restart
the node after each and check that nothing acknowledged is lost and nothing is
leaked (docs/storage.md). Never set in production.
"""

from __future__ import annotations

import os
import sys

_STEPS = frozenset(s.strip() for s in os.environ.get("ZONEGATE_CRASH_AT", "").split(",") if s)


def crash_point(step: str) -> None:
    if step in _STEPS:
        sys.stderr.write(f"ZONEGATE_CRASH_AT: killed at {step}\n")
        sys.stderr.flush()
        os._exit(137)
