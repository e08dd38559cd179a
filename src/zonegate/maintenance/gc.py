"""Object GC: deletes the objects no index entry names any more, after a grace.

One node at a time runs it (the controller). A pass LISTs the WAL and stream
object prefixes (the only LISTs, never on a client's path), groups the objects
into the units the store deletes together (`ObjectStore.deletion_unit`: a pack
file of the local store is one unit), asks the index store which units are
still named by an entry, records the unreferenced ones with the time
they were first seen so, and deletes those unreferenced for
`unreferenced_grace_ms` and uploaded longer than `orphan_grace_ms` ago. Usage
records older than their retention go too. Objects are deleted before their
pending rows, so a crash anywhere leaves work the next pass finishes and
nothing half done. docs/storage.md has the design and why the graces are safe.

The orphan grace covers a commit that may still come. A stream object has one
commit, the swap that named it (its partition's leader writes it, then swaps
it in): once a pass has seen it named, no commit of it is pending, and when
no entry names it any more it waits only its unreferenced grace, however
recently it was uploaded (splitting at the head writes objects that expire
seconds later: maintenance/splitting.py). A WAL object holds many
partitions, committed by their leaders one by one: it always waits the
orphan grace. What a pass saw named is kept in memory (a new controller
starts afresh, and waits the orphan grace: later, never sooner).

The unreferenced grace is Kafka's `file.delete.delay.ms`, per topic (`GcDelays`):
a stream object holds one partition, so it waits its topic's delay; a WAL
object mixes topics and no longer says which once unreferenced, so it waits
the longest delay of any topic (never less than any of its topics asked for).

Policy (`decide`: which units are due, which rows to add and drop, when the
next one is due; `expired_usage`) is pure, given what the LIST and the index
said and the time; `ObjectGc` does the LISTs, the deletes and the rows.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field

from zonegate.runtime.clock import Clock
from zonegate.runtime.crash import crash_point
from zonegate.runtime.io_class import io_class, s3_purpose
from zonegate.storage.index import GcStore
from zonegate.storage.objects import ObjectInfo, ObjectStore

log = logging.getLogger(__name__)

WAL_PREFIX = "wal/"
STREAMS_PREFIX = "streams/"  # storage/stream_objects.py
USAGE_PREFIX = "usage/"
_USAGE_DATE = re.compile(r"(?:^|/)date=(\d{4}-\d{2}-\d{2})/")
_DELETE_BATCH = 1000  # S3's DeleteObjects takes at most 1,000 keys a call


@dataclass(frozen=True)
class GcSettings:
    unreferenced_grace_ms: int = 60_000  # log.segment.delete.delay.ms
    orphan_grace_ms: int = 600_000  # zonegate.gc.orphan.grace.ms
    usage_retention_ms: int = 30 * 86_400_000  # --usage-retention-days


_STREAM_UNIT = re.compile(r"^streams/(\d+)/")


@dataclass(frozen=True)
class GcDelays:
    """The unreferenced grace of each unit, from the topics' `file.delete.delay.ms`."""

    by_stream: Mapping[int, int]  # a stream's topic's delay, where it differs from `wal_ms`
    wal_ms: int  # the longest delay of any topic (the node's own when there are none)

    def of(self, unit: str) -> int:
        m = _STREAM_UNIT.match(unit)
        if m is None:
            return self.wal_ms
        return self.by_stream.get(int(m.group(1)), self.wal_ms)


@dataclass
class GcStats:
    passes: int = 0
    deleted_objects: int = 0
    deleted_bytes: int = 0
    deleted_usage_objects: int = 0
    pending_objects: int = 0
    pending_bytes: int = 0
    # kind -> (objects, bytes) as of the last pass's LIST
    stored: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class _Unit:
    """What GC deletes together: an object, or a pack file's objects."""

    member_keys: tuple[str, str] | None  # DeletionUnit.member_keys
    size: int = 0
    modified_ms: int = 0  # the newest upload of its objects


@dataclass(frozen=True)
class GcDecision:
    """What one pass does, decided from the LIST, the index and the time."""

    due: list[str]  # units to delete now
    add: dict[str, tuple[int, int]]  # newly unreferenced units: (first seen ms, bytes)
    stale: list[str]  # rows of units named again (a commit after the LIST), or gone
    next_due_ms: int | None  # when the first unit still waiting out a grace is due


def decide(
    units: Mapping[str, _Unit],
    referenced: set[str],
    pending: Mapping[str, tuple[int, int]],
    now: int,
    settings: GcSettings,
    delays: GcDelays | None = None,
    committed: Set[str] = frozenset(),
) -> GcDecision:
    """Which units go now: unreferenced for their grace (`delays`, else
    `unreferenced_grace_ms`; since their pending row's first sighting, or now) and
    uploaded `orphan_grace_ms` ago, unless `committed` (stream objects an earlier pass
    saw named: their one commit is done)."""
    s = settings
    add: dict[str, tuple[int, int]] = {}
    due: list[str] = []
    waiting: list[int] = []
    for name, u in units.items():
        if name in referenced:
            continue
        first_seen = pending[name][0] if name in pending else now
        if name not in pending:
            add[name] = (now, u.size)
        grace = s.unreferenced_grace_ms if delays is None else delays.of(name)
        due_at = first_seen + grace
        if name not in committed:
            due_at = max(due_at, u.modified_ms + s.orphan_grace_ms)
        if due_at <= now:
            due.append(name)
        else:
            waiting.append(due_at)
    stale = [name for name in pending if name in referenced or name not in units]
    return GcDecision(due, add, stale, min(waiting, default=None))


def expired_usage(infos: Iterable[ObjectInfo], now_ms: int, retention_ms: int) -> list[str]:
    """The usage records whose day ended more than `retention_ms` ago (by their key's
    `date=` part)."""
    cutoff = datetime.datetime.fromtimestamp((now_ms - retention_ms) / 1000, datetime.UTC).date()
    return [
        i.key
        for i in infos
        if (m := _USAGE_DATE.search(i.key)) is not None
        and datetime.date.fromisoformat(m.group(1)) < cutoff
    ]


class ObjectGc:
    def __init__(
        self,
        store: ObjectStore,
        index: GcStore,
        clock: Clock,
        settings: GcSettings,
        delays: Callable[[int], GcDelays] | None = None,
    ) -> None:
        self._store = store
        # The topics' delays now, given the node's own (None: the node's for all).
        self._delays = delays
        self._index = index
        self._clock = clock
        self._settings = settings
        self.stats = GcStats()
        # When (wall ms) the next unit waiting out a grace becomes due, as of the last
        # pass: the node runs the next pass then, not a whole interval later.
        self.next_due_ms: int | None = None
        # Stream objects a pass saw named, uploaded within the orphan grace (older ones
        # need no exception): unit -> upload ms.
        self._named_streams: dict[str, int] = {}

    async def run_once(self) -> None:
        # The lowest class: it never holds a client back.
        with io_class("housekeeping"), s3_purpose("gc"):
            await self._pass()

    async def _pass(self) -> None:
        self.stats.passes += 1
        units: dict[str, _Unit] = {}
        kind_of: dict[str, str] = {}
        for prefix in (WAL_PREFIX, STREAMS_PREFIX):
            for info in await self._store.list(prefix):
                unit = self._store.deletion_unit(info.key)
                name = unit.key
                u = units.setdefault(name, _Unit(unit.member_keys))
                u.size += info.size
                u.modified_ms = max(u.modified_ms, info.modified_ms)
                kind_of[name] = prefix.rstrip("/")
        referenced = await self._index.referenced_units(
            {name: u.member_keys for name, u in units.items()}
        )
        pending = await self._index.gc_pending()
        now = self._clock.wall_ms()
        delays = None
        if self._delays is not None:
            delays = self._delays(self._settings.unreferenced_grace_ms)
        committed = self._committed_streams(units, referenced, now)
        decision = decide(units, referenced, pending, now, self._settings, delays, committed)
        due, add, stale = decision.due, decision.add, decision.stale
        self.next_due_ms = decision.next_due_ms
        if due:
            crash_point("gc:before-delete")
        for i in range(0, len(due), _DELETE_BATCH):
            await self._store.delete_many(due[i : i + _DELETE_BATCH])
        if due:
            crash_point("gc:after-delete")
        await self._index.update_gc_pending(add, [*stale, *due])
        if add or stale:
            crash_point("gc:after-rows")
        deleted_bytes = sum(units[name].size for name in due)
        self.stats.deleted_objects += len(due)
        self.stats.deleted_bytes += deleted_bytes
        left = {n: u for n, u in units.items() if n not in referenced and n not in due}
        self.stats.pending_objects = len(left)
        self.stats.pending_bytes = sum(u.size for u in left.values())
        stored = {"wal": (0, 0), "streams": (0, 0)}
        for n, u in units.items():
            if n not in due:
                count, size = stored[kind_of[n]]
                stored[kind_of[n]] = (count + 1, size + u.size)
        self.stats.stored = stored
        if due:
            log.info("object GC deleted %d objects (%d bytes)", len(due), deleted_bytes)
        await self._expire_usage(now)

    def _committed_streams(
        self, units: Mapping[str, _Unit], referenced: set[str], now: int
    ) -> set[str]:
        """The unreferenced stream objects an earlier pass saw named; remembers those and
        the named ones while they are listed and within the orphan grace of their upload."""
        committed = {n for n in self._named_streams if n in units and n not in referenced}
        young = now - self._settings.orphan_grace_ms
        self._named_streams = {
            n: units[n].modified_ms
            for n in (*referenced, *committed)
            if n.startswith(STREAMS_PREFIX) and units[n].modified_ms > young
        }
        return committed

    def next_pass_in(self) -> float | None:
        """Seconds until the next unit waiting out a grace is due (None: none waits)."""
        if self.next_due_ms is None:
            return None
        return max(self.next_due_ms - self._clock.wall_ms(), 0) / 1000

    async def _expire_usage(self, now_ms: int) -> None:
        infos = await self._store.list(USAGE_PREFIX)
        old = expired_usage(infos, now_ms, self._settings.usage_retention_ms)
        for i in range(0, len(old), _DELETE_BATCH):
            await self._store.delete_many(old[i : i + _DELETE_BATCH])
        self.stats.deleted_usage_objects += len(old)
        gone = set(old)
        kept = [i for i in infos if i.key not in gone]
        self.stats.stored["usage"] = (len(kept), sum(i.size for i in kept))
