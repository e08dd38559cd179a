"""Which object-store request goes next: weighted fair queueing with a floor for every class.

No I/O and no clock of its own (the h11 way): `Lane.request` and
`Lane.dispatch` take the time and return what was granted; qos/admission.py
moves futures and sleeps. One lane per direction (PUT-like and GET-like
requests have separate budgets, as S3 prices and limits them separately).

A lane grants a request when its budget allows it: the bytes bucket and the
requests bucket are above zero (qos/buckets.py) and fewer than `max_in_flight`
of its requests are under way. When the budget allows it and nothing waits,
a request passes at once (the common case costs one comparison). Otherwise
requests wait in one FIFO per class and each grant goes to:

1. the first class, in priority order (produce, tail_fetch, catch_up_fetch,
   compaction, housekeeping), that is below its **floor**: a class that has
   been waiting accrues `floor` x the cost of every grant made meanwhile and
   spends the cost of its own; a class with credit left is owed its floor share;
2. otherwise the waiting class with the smallest **virtual time** (start-time
   fair queueing): each grant moves its class's tag by cost / weight, and a
   class that was idle starts at the lane's current virtual time, so idle time
   earns nothing and its share goes to the classes that are waiting
   (work-conserving).

The cost of a request is its bytes plus a fixed charge per request (the
bytes/s budget divided by the requests/s budget when both are set, so a
request costs what its share of the request budget is worth in bytes; else
64 KiB), so many small requests are not free against a few big ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from zonegate.qos.buckets import TokenBucket
from zonegate.runtime.histogram import Histogram
from zonegate.runtime.io_class import IO_CLASSES

# Seconds a request waited for its grant: from nothing to a badly starved class.
WAIT_BUCKETS_S = (
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0,
)  # fmt: skip
_NOMINAL_REQUEST_COST = 64 * 1024
# Under a bytes budget, requests larger than this are admitted in parts of this size.
CHUNK_BYTES = 256 * 1024
# Floor credit is bounded both ways: a class owed its floor catches up at most this
# much at once, and one that got more than its floor (by weight) keeps no more than
# this much history of it.
_CREDIT_CAP = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ClassPolicy:
    weight: float
    floor: float  # the least share of the lane's grants while the class waits, 0..1


# Defaults and why: docs/qos.md.
DEFAULT_POLICIES: Mapping[str, ClassPolicy] = {
    "produce": ClassPolicy(50, 0.30),
    "tail_fetch": ClassPolicy(25, 0.10),
    "catch_up_fetch": ClassPolicy(12, 0.10),
    "compaction": ClassPolicy(8, 0.10),
    "housekeeping": ClassPolicy(5, 0.05),
}


@dataclass(frozen=True, slots=True)
class Budget:
    bytes_per_s: float = 0.0  # 0: no limit
    requests_per_s: float = 0.0  # 0: no limit
    max_in_flight: int = 0  # 0: no limit
    burst_s: float = 0.05  # the buckets hold this many seconds of their rate


def check_policies(policies: Mapping[str, ClassPolicy]) -> None:
    """Raises ValueError for a set of policies a lane cannot honour."""
    missing = [c for c in IO_CLASSES if c not in policies]
    unknown = [c for c in policies if c not in IO_CLASSES]
    if missing or unknown:
        raise ValueError(f"classes must be exactly {', '.join(IO_CLASSES)}")
    for name, p in policies.items():
        if not p.weight > 0:
            raise ValueError(f"{name}: weight must be > 0, got {p.weight:g}")
        if not 0 <= p.floor <= 1:
            raise ValueError(f"{name}: floor must be within 0..1, got {p.floor:g}")
    total = sum(p.floor for p in policies.values())
    if total > 1 + 1e-9:
        raise ValueError(f"the floors add up to {total:g}; they can guarantee at most 1")


@dataclass(slots=True, eq=False)
class Waiter:
    io_class: str
    nbytes: int
    enqueued_at: float
    granted: bool = False
    cancelled: bool = False
    admitted: int = 0  # bytes of it granted so far (large requests go chunk by chunk)


@dataclass(slots=True)
class ClassStats:
    granted_bytes: int = 0
    granted_requests: int = 0
    wait: Histogram = field(default_factory=lambda: Histogram(WAIT_BUCKETS_S))


@dataclass(slots=True)
class _Class:
    policy: ClassPolicy
    rank: int
    queue: deque[Waiter] = field(default_factory=deque)
    tag: float = 0.0  # virtual time of its next grant
    credit: float = 0.0  # floor owed (> 0) or exceeded (< 0)
    stats: ClassStats = field(default_factory=ClassStats)


class Lane:
    def __init__(
        self,
        budget: Budget,
        now: float,
        policies: Mapping[str, ClassPolicy] = DEFAULT_POLICIES,
    ) -> None:
        check_policies(policies)
        self.budget = budget
        burst = budget.bytes_per_s * budget.burst_s
        self._bytes = TokenBucket(budget.bytes_per_s, burst, now)
        self._requests = TokenBucket(
            budget.requests_per_s, max(1.0, budget.requests_per_s * budget.burst_s), now
        )
        if budget.bytes_per_s and budget.requests_per_s:
            self._request_cost = budget.bytes_per_s / budget.requests_per_s
        else:
            self._request_cost = float(_NOMINAL_REQUEST_COST)
        # Under a bytes budget a large request is admitted a chunk at a time, each chunk
        # a grant of its own in the order below, and starts when its last chunk is
        # granted: it waits for its share of the budget instead of taking the budget
        # whole and making every request behind it wait (an 8 MiB GET under 50 MB/s
        # would hold produce back 170 ms).
        self._chunk = max(1, min(CHUNK_BYTES, int(burst))) if budget.bytes_per_s else 0
        self._classes = {name: _Class(policies[name], rank) for rank, name in enumerate(IO_CLASSES)}
        self._vtime = 0.0
        self._waiting = 0
        self.in_flight = 0

    # -- what callers see ----------------------------------------------------------
    def stats(self, io_class: str) -> ClassStats:
        return self._classes[io_class].stats

    def queue_depth(self, io_class: str) -> int:
        return sum(1 for w in self._classes[io_class].queue if not w.cancelled)

    @property
    def waiting(self) -> int:
        return self._waiting

    def request(self, io_class: str, nbytes: int, now: float) -> Waiter:
        """A request of `nbytes` for `io_class`: granted at once (`granted`) when nothing
        waits and the budget allows it, else queued until `dispatch` grants it."""
        c = self._classes[io_class]
        w = Waiter(io_class, nbytes, now)
        if not self._backlogged(c):
            c.tag = max(c.tag, self._vtime)  # idle time earns no precedence
        if self._waiting == 0 and (not self._chunk or nbytes <= self._chunk):
            if self._can_grant(now):
                self._admit(c, w, nbytes, now)
                return w
        c.queue.append(w)
        self._waiting += 1
        return w

    def cancel(self, w: Waiter) -> None:
        """The waiter gave up (its task was cancelled); a granted one is released."""
        if w.granted:
            self.release(w, w.nbytes)
        elif not w.cancelled:
            w.cancelled = True
            self._waiting -= 1

    def release(self, w: Waiter, moved_bytes: int) -> None:
        """A granted request finished, having moved `moved_bytes` (a whole-object GET
        learns its size only now): the bytes beyond what it asked are charged now."""
        self.in_flight -= 1
        extra = moved_bytes - w.nbytes
        if extra > 0:
            self._bytes.take(extra)
            self._classes[w.io_class].stats.granted_bytes += extra

    def dispatch(self, now: float) -> list[Waiter]:
        """Grants waiting requests (or chunks of them) while the budget allows, in the
        order above; returns the requests now wholly granted."""
        granted = []
        while self._waiting and self._can_grant(now):
            c, by_floor = self._pick()
            w = c.queue[0]
            if not by_floor:
                # Start-time fair queueing: the lane's virtual time is the start tag of
                # the request served by weight. A grant owed to a floor does not move
                # it, or the classes waiting by weight would lose their precedence.
                self._vtime = max(self._vtime, c.tag)
            left = w.nbytes - w.admitted
            self._admit(c, w, min(left, self._chunk) if self._chunk else left, now)
            if w.granted:
                c.queue.popleft()
                self._waiting -= 1
                granted.append(w)
        return granted

    def next_ready_in(self, now: float) -> float | None:
        """Seconds until the buckets allow the next grant; None when nothing waits or
        only a release (a request in flight finishing) can let the next one go."""
        if not self._waiting:
            return None
        if self.budget.max_in_flight and self.in_flight >= self.budget.max_in_flight:
            return None
        return max(self._bytes.seconds_until_ready(now), self._requests.seconds_until_ready(now))

    # -- the order -------------------------------------------------------------------
    def _backlogged(self, c: _Class) -> bool:
        while c.queue and c.queue[0].cancelled:
            c.queue.popleft()
        return bool(c.queue)

    def _can_grant(self, now: float) -> bool:
        if self.budget.max_in_flight and self.in_flight >= self.budget.max_in_flight:
            return False
        return self._bytes.ready(now) and self._requests.ready(now)

    def _pick(self) -> tuple[_Class, bool]:
        """The class served next, and whether it is served for its floor."""
        waiting: Sequence[_Class] = [c for c in self._classes.values() if self._backlogged(c)]
        owed = [c for c in waiting if c.credit > 0]
        if owed:
            return min(owed, key=lambda c: c.rank), True
        return min(waiting, key=lambda c: (c.tag, c.rank)), False

    def _admit(self, c: _Class, w: Waiter, nbytes: int, now: float) -> None:
        """Charges `nbytes` more of `w` (its first part also charges the request)."""
        cost = float(nbytes)
        if w.admitted == 0:
            self._requests.take(1)
            cost += self._request_cost
        w.admitted += nbytes
        self._bytes.take(nbytes)
        for other in self._classes.values():
            if other is not c and other.queue and other.policy.floor > 0:
                other.credit = min(_CREDIT_CAP, other.credit + other.policy.floor * cost)
        c.credit = max(-_CREDIT_CAP, c.credit + c.policy.floor * cost - cost)
        c.tag += cost / c.policy.weight
        c.stats.granted_bytes += nbytes
        if w.admitted >= w.nbytes:
            w.granted = True
            self.in_flight += 1
            c.stats.granted_requests += 1
            c.stats.wait.observe(now - w.enqueued_at)
