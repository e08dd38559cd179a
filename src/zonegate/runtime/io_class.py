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
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

IO_CLASSES = ("produce", "tail_fetch", "catch_up_fetch", "compaction", "housekeeping")
_CURRENT: ContextVar[str] = ContextVar("zonegate_io_class", default="housekeeping")


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
