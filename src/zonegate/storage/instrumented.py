"""The one wrapper around any object-store backend: retries, timeouts, counters, faults.

Kept apart from the backends (as SlateDB's retrying/instrumented stores are) so
every backend gets the same retry policy and every S3 request is counted in one
place for usage records. Tests use `inject_fault` to make the next calls of an
operation fail without a misbehaving server. GETs and PUTs are also counted by
purpose: the I/O class the caller set (runtime/io_class.py), for /metrics; and
every request by its S3 purpose (`by_purpose`), for the usage records.
When an `Admission` is set (the node's QoS scheduler, qos/admission.py), every
attempt first waits for its grant, under the caller's I/O class, so no call of
the node reaches the store around it.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.runtime.histogram import Histograms
from zonegate.runtime.io_class import current_io_class, current_s3_purpose
from zonegate.storage.objects import (
    DeletionUnit,
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    TransientObjectStoreError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

OPERATIONS = ("put", "put_if_absent", "get", "get_range", "delete_many", "list")

# Priced like S3: one LIST returns, and one DeleteObjects takes, up to 1000 keys.
_KEYS_PER_REQUEST = 1000


# Local-filesystem errors that no retry will fix.
_PERMANENT_OS_ERRORS = (
    PermissionError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    FileExistsError,
)


@dataclass(frozen=True)
class ObjectStoreStats:
    """Requests and bytes since the last `take_stats()`, by S3 price class."""

    put_requests: int = 0
    get_requests: int = 0
    other_requests: int = 0
    put_bytes: int = 0
    get_bytes: int = 0


class AdmissionTicket(Protocol):
    def release(self, moved_bytes: int) -> None:
        """The attempt is over, having moved `moved_bytes` (sent or received)."""
        ...


class Admission(Protocol):
    """What decides when an object-store attempt may go (qos/admission.py)."""

    async def admit(self, op: str, io_class: str, nbytes: int) -> AdmissionTicket: ...


@dataclass(slots=True)
class ClassCounts:
    """GETs or PUTs of one I/O class since the store opened (attempts, as S3 bills)."""

    requests: int = 0
    bytes: int = 0


@dataclass(slots=True)
class PurposeCounts:
    """Requests of one S3 purpose since the store opened, by S3 request kind (attempts, as
    S3 bills): PUTs, GETs, LISTs (one per 1000 keys listed), DeleteObjects (one per 1000
    keys)."""

    put_requests: int = 0
    get_requests: int = 0
    list_requests: int = 0
    delete_requests: int = 0
    put_bytes: int = 0
    get_bytes: int = 0

    def minus(self, before: PurposeCounts) -> PurposeCounts:
        return PurposeCounts(
            self.put_requests - before.put_requests,
            self.get_requests - before.get_requests,
            self.list_requests - before.list_requests,
            self.delete_requests - before.delete_requests,
            self.put_bytes - before.put_bytes,
            self.get_bytes - before.get_bytes,
        )

    def copy(self) -> PurposeCounts:
        return self.minus(PurposeCounts())


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed. Not-found and bad requests never will."""
    if isinstance(exc, (ObjectNotFound, *_PERMANENT_OS_ERRORS)):
        return False
    return isinstance(exc, TransientObjectStoreError | TimeoutError | OSError)


class InstrumentedObjectStore:
    def __init__(
        self,
        inner: ObjectStore,
        *,
        retries: int = 3,
        timeout_s: float = 30.0,
        backoff_base_s: float = 0.05,
        backoff_max_s: float = 2.0,
        sleep: Callable[[float], Awaitable[None]] | None = None,  # default: clock.sleep
        rng: random.Random | None = None,
        clock: Clock = SYSTEM_CLOCK,  # for the attempts' timeouts and the backoff
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.inner = inner
        self._retries = retries
        self._timeout_s = timeout_s
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._sleep = sleep or clock.sleep
        self._clock = clock
        self._rng = rng or random.Random()
        self._faults: dict[str, deque[Exception]] = {op: deque() for op in OPERATIONS}
        self._put_requests = 0
        self._get_requests = 0
        self._other_requests = 0
        self._put_bytes = 0
        self._get_bytes = 0
        self.latency = Histograms()  # seconds per operation ("put", "get_range", ...)
        self.admission: Admission | None = None
        # ("get" or "put", I/O class) -> requests and bytes, never reset.
        self.by_class: dict[tuple[str, str], ClassCounts] = {}
        # S3 purpose (runtime/io_class.py) -> requests and bytes, never reset.
        self.by_purpose: dict[str, PurposeCounts] = {}

    # -- stats ---------------------------------------------------------------

    def stats(self) -> ObjectStoreStats:
        return ObjectStoreStats(
            self._put_requests,
            self._get_requests,
            self._other_requests,
            self._put_bytes,
            self._get_bytes,
        )

    def take_stats(self) -> ObjectStoreStats:
        """The counters since the previous call, then zero them (one usage interval)."""
        snapshot = self.stats()
        self._put_requests = self._get_requests = self._other_requests = 0
        self._put_bytes = self._get_bytes = 0
        return snapshot

    def purpose_counts(self) -> dict[str, PurposeCounts]:
        """A copy of `by_purpose`, for a later difference."""
        return {k: v.copy() for k, v in self.by_purpose.items()}

    def _purpose(self) -> PurposeCounts:
        name = current_s3_purpose()
        counts = self.by_purpose.get(name)
        if counts is None:
            counts = self.by_purpose[name] = PurposeCounts()
        return counts

    def _count(self, kind: str, n_bytes: int = 0) -> ClassCounts:
        """Counts one request of `kind` in the caller's I/O class and S3 purpose."""
        purpose = self._purpose()
        if kind == "put":
            purpose.put_requests += 1
            purpose.put_bytes += n_bytes
        else:
            purpose.get_requests += 1
        key = (kind, current_io_class())
        counts = self.by_class.get(key)
        if counts is None:
            counts = self.by_class[key] = ClassCounts()
        counts.requests += 1
        counts.bytes += n_bytes
        return counts

    # -- faults --------------------------------------------------------------

    def inject_fault(self, op: str, exc: Exception, times: int = 1) -> None:
        """Make the next `times` attempts of `op` raise `exc` instead of reaching the backend.

        Attempts, not calls: a transient fault injected twice under `retries=3` is
        absorbed by the retries; a non-transient one fails the call at once.
        """
        if op not in self._faults:
            raise ValueError(f"unknown operation {op!r}; expected one of {', '.join(OPERATIONS)}")
        self._faults[op].extend([exc] * times)

    # -- the retry loop ------------------------------------------------------

    async def _call(self, op: str, attempt: Callable[[], Awaitable[T]], nbytes: int = 0) -> T:
        start = time.perf_counter()
        try:
            return await self._retrying(op, attempt, nbytes)
        finally:
            # The caller's wait, retries included: what a produce or a fetch felt.
            self.latency.observe(op, time.perf_counter() - start)

    async def _retrying(self, op: str, attempt: Callable[[], Awaitable[T]], nbytes: int) -> T:
        tries = 0
        while True:
            try:
                faults = self._faults[op]
                if faults:
                    raise faults.popleft()
                if self.admission is None:
                    async with self._clock.timeout(self._timeout_s):
                        return await attempt()
                return await self._admitted(op, attempt, nbytes)
            except Exception as exc:
                if tries >= self._retries or not is_transient(exc):
                    raise
                delay = min(self._backoff_max_s, self._backoff_base_s * (2**tries))
                tries += 1
                log.debug("object store %s failed (%s); retry %d", op, exc, tries)
                # Full jitter: many nodes throttled together must not retry in step.
                await self._sleep(self._rng.uniform(0, delay))

    async def _admitted(self, op: str, attempt: Callable[[], Awaitable[T]], nbytes: int) -> T:
        """One attempt after its grant; the wait for the grant is not the backend's, so
        the timeout starts after it."""
        assert self.admission is not None
        ticket = await self.admission.admit(op, current_io_class(), nbytes)
        moved = 0
        try:
            async with self._clock.timeout(self._timeout_s):
                result = await attempt()
            moved = len(result) if isinstance(result, bytes) else nbytes
            return result
        finally:
            ticket.release(moved)

    # -- ObjectStore ---------------------------------------------------------

    async def put(self, key: str, data: bytes) -> None:
        async def attempt() -> None:
            self._put_requests += 1
            self._put_bytes += len(data)
            self._count("put", len(data))
            await self.inner.put(key, data)

        await self._call("put", attempt, len(data))

    async def put_new(self, key: str, data: bytes) -> str:
        """A PUT for counting, retries and injected `put` faults, whatever the backend
        makes of it (the local store appends to a pack file). A failed attempt that
        wrote somewhere leaves those bytes unreferenced; the retry writes them again."""

        async def attempt() -> str:
            self._put_requests += 1
            self._put_bytes += len(data)
            self._count("put", len(data))
            return await self.inner.put_new(key, data)

        return await self._call("put", attempt, len(data))

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        attempts = 0

        async def attempt() -> bool:
            nonlocal attempts
            attempts += 1
            self._put_requests += 1
            self._put_bytes += len(data)
            self._count("put", len(data))
            return await self.inner.put_if_absent(key, data)

        created = await self._call("put_if_absent", attempt, len(data))
        if not created and attempts > 1:
            # An earlier attempt may have written the object and then lost the
            # answer (timeout, reset). If the object holds exactly our bytes, it
            # was ours: report the write as ours rather than a lost race.
            try:
                return await self.get(key) == data
            except ObjectNotFound:
                return False
        return created

    async def get(self, key: str) -> bytes:
        async def attempt() -> bytes:
            self._get_requests += 1
            counts = self._count("get")
            data = await self.inner.get(key)
            self._get_bytes += len(data)
            counts.bytes += len(data)
            self._purpose().get_bytes += len(data)
            return data

        return await self._call("get", attempt)

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        async def attempt() -> bytes:
            self._get_requests += 1
            counts = self._count("get")
            data = await self.inner.get_range(key, start, length)
            self._get_bytes += len(data)
            counts.bytes += len(data)
            self._purpose().get_bytes += len(data)
            return data

        return await self._call("get_range", attempt, length)

    async def delete_many(self, keys: Sequence[str]) -> None:
        if not keys:
            return

        async def attempt() -> None:
            n = math.ceil(len(keys) / _KEYS_PER_REQUEST)
            self._other_requests += n
            self._purpose().delete_requests += n
            await self.inner.delete_many(keys)

        await self._call("delete_many", attempt)

    async def list(self, prefix: str) -> list[ObjectInfo]:
        async def attempt() -> list[ObjectInfo]:
            infos = await self.inner.list(prefix)
            n = max(1, math.ceil(len(infos) / _KEYS_PER_REQUEST))
            self._other_requests += n
            self._purpose().list_requests += n
            return infos

        return await self._call("list", attempt)

    def deletion_unit(self, key: str) -> DeletionUnit:
        return self.inner.deletion_unit(key)  # no request: the backend's key layout

    async def close(self) -> None:
        await self.inner.close()
