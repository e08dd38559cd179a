"""Mixes produce data of all partitions into WAL objects and uploads each with one PUT.

An object is sealed when it reaches `seal_bytes` or when its first entry is
`seal_age_s` old by the writer's clock (its age timer included, so a test moves
time by hand). Several PUTs may be in flight, but the futures `append`
returned resolve strictly in seal order: the proxy forwards locations to the
leaders as they resolve, and the leader must see a producer's batches in the
order the producer sent them, even when a later PUT happens to finish first.

With `seal_when_idle` (group commit), data that arrives while a PUT is in flight
waits for it and goes out in the next object: one PUT at a time keeps the PUT count
low. But a slow link (latency added to every PUT) would then add its delay twice to
a produce, once waiting and once in its own PUT. So the writer paces: once the
newest PUT has run twice as long as a PUT usually takes (`PutPace`), waiting data is
sealed into a PUT of its own beside it. PUTs then start no more often than once per
two usual PUT times, and a slow link adds its delay about once (issue 28).
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.runtime.histogram import SIZE_BUCKETS_BYTES, Histogram
from zonegate.runtime.io_class import io_class
from zonegate.storage.objects import ObjectStore
from zonegate.wal_s3.wal_format import WalEntryLocation, encode_wal_object

__all__ = [
    "WalEntryLocation",
    "WalUploadFailed",
    "WalWriter",
    "WalWriterClosed",
    "WalWriterError",
]

log = logging.getLogger(__name__)


class WalWriterError(Exception):
    pass


class WalUploadFailed(WalWriterError):
    """The PUT of a WAL object failed after the store's retries; its entries are not durable."""

    def __init__(self, key: str, cause: BaseException) -> None:
        super().__init__(f"upload of WAL object {key!r} failed: {cause!r}")
        self.key = key
        self.__cause__ = cause


class WalWriterClosed(WalWriterError):
    def __init__(self, detail: str = "WAL writer is closed") -> None:
        super().__init__(detail)


@dataclass(eq=False)
class _OpenObject:
    opened_at: float
    entries: list[tuple[int, bytes]] = field(default_factory=list)
    futures: list[asyncio.Future[WalEntryLocation]] = field(default_factory=list)
    size: int = 0


@dataclass(eq=False)
class _SealedObject:
    key: str
    data: bytes
    futures: list[asyncio.Future[WalEntryLocation]]
    locations: list[WalEntryLocation]
    sealed_at: float = 0.0
    done: bool = False
    error: BaseException | None = None


class PutPace:
    """How long a PUT usually takes, followed slowly: each PUT moves it toward its own
    time by at most e-fold per `down_s` (ten seconds) when faster and per `up_s` (a
    minute) when slower. A link slowed for a few seconds leaves it about where the
    healthy link put it; a link that stays slow becomes the usual within minutes; the
    slow PUTs of a node's start are forgotten within seconds. It settles near the
    seventh of PUTs that are fastest (where the pulls balance, 10 s against 60). The
    interval between paced seals is twice it: a PUT that takes twice that is a slow one."""

    def __init__(self, down_s: float = 10.0, up_s: float = 60.0) -> None:
        self._down_s = down_s
        self._up_s = up_s
        self.usual_s: float | None = None
        self._at = 0.0

    def observe(self, seconds: float, now: float) -> None:
        if self.usual_s is None:
            self.usual_s = seconds
        else:
            elapsed = max(0.0, now - self._at)
            if seconds > self.usual_s:
                step = math.exp(min(1.0, elapsed / self._up_s))
                self.usual_s = min(seconds, self.usual_s * step)
            elif seconds < self.usual_s:
                step = math.exp(min(1.0, elapsed / self._down_s))
                self.usual_s = max(seconds, self.usual_s / step)
        self._at = now

    @property
    def interval_s(self) -> float | None:
        return None if self.usual_s is None else 2 * self.usual_s


class WalWriter:
    def __init__(
        self,
        store: ObjectStore,
        *,
        node_id: int,
        seal_bytes: int,
        seal_age_s: float,
        max_inflight_uploads: int = 4,
        clock: Clock = SYSTEM_CLOCK,
        key_prefix: str = "wal/",
        on_uploaded: Callable[[str, bytes], None] | None = None,
        seal_when_idle: bool = False,
    ) -> None:
        if seal_bytes <= 0 or seal_age_s <= 0 or max_inflight_uploads <= 0:
            raise ValueError(
                f"seal_bytes ({seal_bytes}), seal_age_s ({seal_age_s}) and "
                f"max_inflight_uploads ({max_inflight_uploads}) must be positive"
            )
        self._store = store
        self._node_id = node_id
        self._seal_bytes = seal_bytes
        self._seal_age_s = seal_age_s
        self._max_inflight = max_inflight_uploads
        self._clock = clock
        self.seal_wait = Histogram()  # seconds from an object's first batch to its seal
        self.put_latency = Histogram()  # seconds from a sealed object's upload start to done
        self.object_bytes = Histogram(SIZE_BUCKETS_BYTES)
        self._node_prefix = f"{key_prefix}{node_id}/"  # this node's WAL objects' keys
        self._on_uploaded = on_uploaded
        # A sequence restarts with the process; the random run id keeps keys
        # from a restarted node (or two nodes given the same id) from colliding.
        self._run_id = secrets.token_hex(8)
        self._seq = 0
        self._open: _OpenObject | None = None
        self._unresolved: deque[_SealedObject] = deque()  # seal order
        self._waiting: deque[_SealedObject] = deque()  # sealed, no upload slot yet
        self._uploads: set[asyncio.Task[None]] = set()
        # One task seals by age for the writer's life (started by the first append,
        # which has a running loop), rather than a timer armed and cancelled per object.
        self._age_timer: asyncio.Task[None] | None = None
        self._object_opened = asyncio.Event()
        self._closed = False
        # Group commit: with no upload in flight, seal at the end of this loop turn
        # instead of waiting out the age; while one is in flight, data accumulates
        # and is sealed when it completes (one PUT at a time keeps the PUT count
        # low; letting all slots seal eagerly measured no faster on moto). Age and
        # size stay upper bounds.
        self._seal_when_idle = seal_when_idle
        self._idle_seal_scheduled = False
        self.put_pace = PutPace()
        self._last_upload_at: float | None = None  # when the newest PUT started
        self._paced_seal: asyncio.Task[None] | None = None

    # -- introspection -------------------------------------------------------

    @property
    def open_bytes(self) -> int:
        return self._open.size if self._open else 0

    # -- appending and sealing ----------------------------------------------

    def append(self, stream_id: int, data: bytes) -> asyncio.Future[WalEntryLocation]:
        """Stage `data` for `stream_id`; the future resolves once it is durably in the store."""
        if self._closed:
            raise WalWriterClosed()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[WalEntryLocation] = loop.create_future()
        obj = self._open
        if obj is None:
            obj = self._open = _OpenObject(opened_at=self._clock.monotonic())
            self._object_opened.set()
            if self._age_timer is None:
                self._age_timer = loop.create_task(self._seal_by_age(), name="wal-seal-by-age")
        obj.entries.append((stream_id, data))
        obj.futures.append(fut)
        obj.size += len(data)
        if obj.size >= self._seal_bytes or self._is_due(obj):
            self._seal()
        else:
            self._maybe_seal_when_idle()
        return fut

    def _maybe_seal_when_idle(self) -> None:
        if (
            not self._seal_when_idle
            or self._idle_seal_scheduled
            or self._open is None
            or self._waiting
            or len(self._uploads) >= self._max_inflight
        ):
            return
        loop = asyncio.get_running_loop()
        if self._uploads:
            # A PUT is in flight: wait for it, unless it runs past the pace (module doc).
            pace = self.put_pace.interval_s
            if pace is None or self._last_upload_at is None:
                return
            due = self._last_upload_at + pace
            if due > self._clock.monotonic():
                if self._paced_seal is None or self._paced_seal.done():
                    self._paced_seal = loop.create_task(self._seal_at_pace(due))
                return
        self._idle_seal_scheduled = True
        # call_soon: every append of the current loop turn (one produce request
        # stages all its batches synchronously) joins the same object.
        loop.call_soon(self._seal_idle)

    async def _seal_at_pace(self, due: float) -> None:
        await self._clock.sleep(due - self._clock.monotonic())
        self._paced_seal = None  # a later PUT may have moved the pace: look again
        if not self._closed:
            self._maybe_seal_when_idle()

    def _seal_idle(self) -> None:
        self._idle_seal_scheduled = False
        if self._open is not None and not self._closed:
            self._seal()

    def _is_due(self, obj: _OpenObject) -> bool:
        return self._clock.monotonic() - obj.opened_at >= self._seal_age_s

    async def _seal_by_age(self) -> None:
        """Seals the open object once its first entry is `seal_age_s` old. It sleeps to
        the open object's deadline; if that object was sealed by size meanwhile, it
        sleeps on to the deadline of the one open then, and waits when none is."""
        while not self._closed:
            obj = self._open
            if obj is None:
                self._object_opened.clear()
                await self._object_opened.wait()
                continue
            remaining = obj.opened_at + self._seal_age_s - self._clock.monotonic()
            if remaining > 0:
                await self._clock.sleep(remaining)
                continue
            try:
                self._seal()
            except Exception:
                # A bug sealing one object must not stop age sealing for every later one.
                log.exception("sealing WAL object by age failed")

    def _seal(self) -> None:
        obj, self._open = self._open, None
        assert obj is not None
        key = f"{self._node_prefix}{self._seq:012d}-{self._run_id}"
        self._seq += 1
        data, locations = encode_wal_object(
            self._node_id, self._clock.wall_ms(), obj.entries, object_key=key
        )
        now = self._clock.monotonic()
        # Produce latency by stage: the first batch's wait for the seal, then the PUT.
        self.seal_wait.observe(now - obj.opened_at)
        self.object_bytes.observe(len(data))
        sealed = _SealedObject(key, data, obj.futures, locations, sealed_at=now)
        self._unresolved.append(sealed)
        self._waiting.append(sealed)
        self._start_uploads()

    # -- uploading -----------------------------------------------------------

    def _start_uploads(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting and len(self._uploads) < self._max_inflight:
            sealed = self._waiting.popleft()
            self._last_upload_at = self._clock.monotonic()
            task = loop.create_task(self._upload(sealed), name=f"wal-upload {sealed.key}")
            self._uploads.add(task)
            task.add_done_callback(self._uploads.discard)

    async def _upload(self, sealed: _SealedObject) -> None:
        started = self._clock.monotonic()
        try:
            with io_class("produce"):
                key = await self._store.put_new(sealed.key, sealed.data)
            if key != sealed.key:  # the store placed it (the local store's pack files)
                sealed.key = key
                sealed.locations = [
                    WalEntryLocation(key, loc.stream_id, loc.position, loc.length)
                    for loc in sealed.locations
                ]
        except asyncio.CancelledError:
            sealed.error = WalUploadFailed(sealed.key, WalWriterClosed("closed without drain"))
            raise
        except Exception as exc:
            log.warning("WAL object %s upload failed: %s", sealed.key, exc)
            sealed.error = WalUploadFailed(sealed.key, exc)
        else:
            now = self._clock.monotonic()
            self.put_latency.observe(now - started)
            self.put_pace.observe(now - started, now)
            if self._on_uploaded is not None:
                try:
                    self._on_uploaded(sealed.key, sealed.data)
                except Exception:
                    # A cache hook must not turn a durable write into a failed one.
                    log.exception("on_uploaded hook failed for %s", sealed.key)
        finally:
            # Free this slot now: the done-callback runs only after we return,
            # too late for the _start_uploads below.
            current = asyncio.current_task()
            if current is not None:
                self._uploads.discard(current)
            sealed.done = True
            self._resolve_in_seal_order()
            if not self._closed or self._waiting:
                self._start_uploads()
            if not self._closed:
                self._maybe_seal_when_idle()

    def _resolve_in_seal_order(self) -> None:
        while self._unresolved and self._unresolved[0].done:
            sealed = self._unresolved.popleft()
            for fut, loc in zip(sealed.futures, sealed.locations, strict=True):
                if fut.done():
                    continue  # the caller cancelled it
                if sealed.error is not None:
                    fut.set_exception(sealed.error)
                else:
                    fut.set_result(loc)
            sealed.data = b""  # the log cache holds it if anyone needs it

    # -- closing -------------------------------------------------------------

    async def close(self, drain: bool = True) -> None:
        """Stop accepting appends. With `drain`, upload everything staged and resolve
        every future; without, fail what is not uploaded yet with `WalWriterClosed`."""
        self._closed = True
        if self._age_timer is not None:
            self._age_timer.cancel()
        if self._paced_seal is not None:
            self._paced_seal.cancel()
        if drain:
            if self._open is not None:
                self._seal()
        else:
            self._abandon()
        while self._unresolved:
            if not self._uploads:
                self._start_uploads()
                if not self._uploads:
                    break
            await asyncio.gather(*self._uploads, return_exceptions=True)

    def _abandon(self) -> None:
        closed = WalWriterClosed("WAL writer closed before the data was sealed")
        obj, self._open = self._open, None
        if obj is not None:
            for fut in obj.futures:
                if not fut.done():
                    fut.set_exception(closed)
        while self._waiting:
            sealed = self._waiting.popleft()
            sealed.done = True
            sealed.error = WalUploadFailed(sealed.key, closed)
        for task in self._uploads:
            task.cancel()
        self._resolve_in_seal_order()
