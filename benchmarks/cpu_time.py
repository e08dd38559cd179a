"""CPU seconds a process tree has used, from Linux's /proc: what the benchmarks charge a server.

CPU time per byte holds on a shared machine where throughput does not: other jobs
stretch a run's wall time, much less the CPU the server spends on each byte.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (the state, field 3, first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process and its descendants have used so far (Linux
    /proc): its own, its reaped children's and its live descendants', so a node that runs
    worker processes is counted whole."""
    ticks = sum(int(f) for f in _stat(pid)[11:15])  # utime, stime, cutime, cstime
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                children.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        with contextlib.suppress(OSError, IndexError):
            ticks += sum(int(f) for f in _stat(child)[11:15])
            todo += children.get(child, [])
    return ticks / os.sysconf("SC_CLK_TCK")


def measured(
    pid: int, phase: Callable[[], dict[str, float]], nbytes: float | None = None
) -> dict[str, float]:
    """`phase()`'s figures and `cpu_gib`: the CPU seconds `pid` used during it per GiB moved
    (`nbytes`, or the `bytes` the phase reports)."""
    cpu0 = cpu_s(pid)
    result = phase()
    moved = result["bytes"] if nbytes is None else nbytes
    return {**result, "cpu_gib": (cpu_s(pid) - cpu0) / (moved / 2**30)}
