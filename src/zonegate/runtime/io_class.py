"""What an object-store call is for: the class QoS schedules it in and metrics count it by.

Callers say it around their calls (`with io_class("compaction"): ...`); the
object store's wrappers read it (`current_io_class()`). A context variable,
so it follows the task (and tasks it starts) without threading a parameter
through every layer. Classes (docs/storage.md, docs/qos.md):

- `produce`: WAL uploads on the produce path;
- `tail_fetch`: reads of recent data for Fetch (the log cache's misses);
- `catch_up_fetch`: reads of older data for Fetch and ListOffsets;
- `compaction`: compaction and cleaning's reads and uploads;
- `housekeeping`: retention, object GC, usage records, health probes.

Within a class, an object-store request also has a purpose, which the usage
records count S3 requests by (docs/usage-records.md) and the cost model prices
(docs/cost-model.md): by default the class's own (`produce` -> `wal`,
`tail_fetch` -> `tail_read`, the log cache's misses; `catch_up_fetch` ->
`catch_up_read`; `compaction`; `housekeeping`), or a finer one its caller
names with `s3_purpose` (`cleaning`, `gc`, `usage_records`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

IO_CLASSES = ("produce", "tail_fetch", "catch_up_fetch", "compaction", "housekeeping")
_CURRENT: ContextVar[str] = ContextVar("zonegate_io_class", default="housekeeping")

S3_PURPOSES = (
    "wal",
    "tail_read",
    "catch_up_read",
    "compaction",
    "cleaning",
    "gc",
    "usage_records",
    "housekeeping",
)
_CLASS_PURPOSE = {
    "produce": "wal",
    "tail_fetch": "tail_read",
    "catch_up_fetch": "catch_up_read",
    "compaction": "compaction",
    "housekeeping": "housekeeping",
}
_PURPOSE: ContextVar[str] = ContextVar("zonegate_s3_purpose", default="")


def current_io_class() -> str:
    return _CURRENT.get()


@contextlib.contextmanager
def io_class(name: str) -> Iterator[None]:
    if name not in IO_CLASSES:
        raise ValueError(f"unknown I/O class {name!r}; one of {', '.join(IO_CLASSES)}")
    token = _CURRENT.set(name)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_s3_purpose() -> str:
    """The purpose named by the innermost `s3_purpose`, else the I/O class's own."""
    return _PURPOSE.get() or _CLASS_PURPOSE[_CURRENT.get()]


@contextlib.contextmanager
def s3_purpose(name: str) -> Iterator[None]:
    if name not in S3_PURPOSES:
        raise ValueError(f"unknown S3 purpose {name!r}; one of {', '.join(S3_PURPOSES)}")
    token = _PURPOSE.set(name)
    try:
        yield
    finally:
        _PURPOSE.reset(token)
