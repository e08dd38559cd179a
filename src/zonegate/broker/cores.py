"""How many cores this process is allowed: what `zonegate.workers` 0 means.

A container's CPU limit is its cgroup's quota (`cpu.max`: "QUOTA PERIOD", or "max"
for none), not the machine's CPU count; without a quota, the CPUs the process may
run on (its affinity, which `taskset` and a cpuset narrow) are the bound.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def quota_cores(cpu_max: str) -> int | None:
    """The cores a cgroup v2 `cpu.max` line allows, rounded up; None for no quota."""
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return max(1, math.ceil(quota / period))


def allowed_cores(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The cgroup's quota if it has one (and it is below the CPUs we may run on), else
    the CPUs we may run on."""
    affinity = len(os.sched_getaffinity(0))
    try:
        quota = quota_cores(cpu_max.read_text())
    except OSError:  # no cgroup v2 file here (not a container, or cgroup v1)
        quota = None
    return min(quota, affinity) if quota is not None else affinity


def workers_setting(value: int) -> int:
    """`zonegate.workers` as a process count: 0 is the cores allowed (module doc)."""
    return value if value > 0 else allowed_cores()
