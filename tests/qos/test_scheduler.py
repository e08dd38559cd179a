"""The token buckets and the weighted scheduler with floors, over simulated minutes.

A lane is driven directly (it has no I/O and no clock of its own): each class
has clients that keep requests queued (or one at a time, closed loop), each
granted request stays in flight for a service time, and time moves in steps of
a few ms. What is asserted is what an operator would see over those minutes:
the bytes each class got.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import pytest

from zonegate.qos.buckets import TokenBucket
from zonegate.qos.scheduler import DEFAULT_POLICIES, Budget, ClassPolicy, Lane, Waiter
from zonegate.runtime.io_class import IO_CLASSES

pytestmark = pytest.mark.unit

MB = 1_000_000
STEP_S = 0.002


def simulate(
    lane: Lane,
    demand: Mapping[str, tuple[int, int]],
    seconds: float,
    *,
    service_s: float = 0.02,
    step_s: float = STEP_S,
    start: float = 0.0,
) -> dict[str, int]:
    """Runs `lane` for `seconds`: each class of `demand` keeps (requests waiting or in
    flight, bytes each) outstanding. Returns the bytes granted per class."""
    now = start
    outstanding = {c: 0 for c in demand}
    in_flight: list[tuple[float, Waiter]] = []
    got = {c: 0 for c in IO_CLASSES}
    end = start + seconds
    while now < end:
        done = [w for t, w in in_flight if t <= now]
        in_flight = [(t, w) for t, w in in_flight if t > now]
        for w in done:
            lane.release(w, w.nbytes)
            outstanding[w.io_class] -= 1
        granted: list[Waiter] = []
        for c, (depth, size) in demand.items():
            while outstanding[c] < depth:
                outstanding[c] += 1
                w = lane.request(c, size, now)
                if w.granted:
                    granted.append(w)
        granted += lane.dispatch(now)
        for w in granted:
            got[w.io_class] += w.nbytes
            in_flight.append((now + service_s, w))
        now += step_s
    return got


def shares(got: Mapping[str, int]) -> dict[str, float]:
    total = sum(got.values())
    return {c: n / total for c, n in got.items()}


def test_bucket_rate_is_exact_over_time_even_for_requests_above_the_burst() -> None:
    bucket = TokenBucket(rate=1 * MB, burst=100_000, now=0.0)
    taken, now = 0, 0.0
    while now < 60.0:
        while bucket.ready(now):
            bucket.take(300_000)  # three bursts at a time: debt, paid back by waiting
            taken += 300_000
        now += bucket.seconds_until_ready(now)
    assert 59 * MB <= taken <= 61 * MB


def test_unlimited_bucket_is_always_ready() -> None:
    bucket = TokenBucket(0, 0, now=0.0)
    bucket.take(10**12)
    assert bucket.ready(0.0) and bucket.seconds_until_ready(0.0) == 0.0


def test_all_classes_busy_get_their_weights_and_at_least_their_floors() -> None:
    lane = Lane(Budget(bytes_per_s=20 * MB, requests_per_s=400), 0.0)
    demand = {c: (8, 256 * 1024) for c in IO_CLASSES}
    got = simulate(lane, demand, 120.0)
    total = sum(got.values())
    assert 0.97 * 120 * 20 * MB <= total + 8 * MB  # the budget is spent: nothing idles
    assert total <= 1.01 * 120 * 20 * MB
    s = shares(got)
    weights = sum(p.weight for p in DEFAULT_POLICIES.values())
    for c, p in DEFAULT_POLICIES.items():
        expected = max(p.floor, p.weight / weights)
        assert s[c] >= p.floor - 0.01, (c, s)
        assert s[c] == pytest.approx(expected, abs=0.04), (c, s)
    # produce > tail fetch > catch-up > compaction > housekeeping
    order = [s[c] for c in IO_CLASSES]
    assert order == sorted(order, reverse=True)


@pytest.mark.parametrize("size", [4 * 1024, 1024 * 1024])
def test_every_mix_of_classes_spends_the_budget_and_starves_no_one(size: int) -> None:
    budget = Budget(bytes_per_s=10 * MB, requests_per_s=400)
    for n in range(1, len(IO_CLASSES) + 1):
        for mix in itertools.combinations(IO_CLASSES, n):
            lane = Lane(budget, 0.0)
            got = simulate(lane, {c: (64, size) for c in mix}, 30.0, step_s=0.005)
            total = sum(got.values())
            # Work-conserving: the classes present share the whole budget (bytes, or
            # requests for small ones).
            limit = min(10 * MB, 400 * size) * 30
            assert total >= 0.95 * limit, (mix, total, limit)
            s = shares(got)
            weights = sum(DEFAULT_POLICIES[c].weight for c in mix)
            for c in mix:
                p = DEFAULT_POLICIES[c]
                assert s[c] >= max(p.floor, p.weight / weights) - 0.03, (mix, c, s)
            for c in set(IO_CLASSES) - set(mix):
                assert got[c] == 0


def test_an_idle_classs_share_goes_to_the_others() -> None:
    lane = Lane(Budget(bytes_per_s=10 * MB), 0.0)
    got = simulate(lane, {"catch_up_fetch": (8, 512 * 1024), "compaction": (8, 512 * 1024)}, 90.0)
    s = shares(got)
    # 12 : 8 by weight, nothing held back for the idle produce and tail reads.
    assert s["catch_up_fetch"] == pytest.approx(0.6, abs=0.03)
    assert sum(got.values()) >= 0.97 * 90 * 10 * MB


def test_a_floor_holds_where_weights_alone_would_starve_a_class() -> None:
    policies = dict(DEFAULT_POLICIES)
    policies["produce"] = ClassPolicy(1000, 0.3)
    policies["compaction"] = ClassPolicy(1, 0.2)
    lane = Lane(Budget(bytes_per_s=10 * MB), 0.0, policies)
    got = simulate(lane, {"produce": (16, 1024 * 1024), "compaction": (16, 1024 * 1024)}, 120.0)
    s = shares(got)
    assert 0.19 <= s["compaction"] <= 0.23  # the weight alone would give 0.1%


def test_floors_hold_with_a_lopsided_mix_of_request_sizes() -> None:
    # Small produce PUTs against 16 MiB compaction uploads and 8 MiB catch-up reads.
    lane = Lane(Budget(bytes_per_s=50 * MB, requests_per_s=3500), 0.0)
    demand = {
        "produce": (32, 64 * 1024),
        "catch_up_fetch": (4, 8 * 1024 * 1024),
        "compaction": (2, 16 * 1024 * 1024),
        "housekeeping": (1, 1024),
    }
    got = simulate(lane, demand, 180.0, service_s=0.05)
    s = shares(got)
    for c in demand:
        assert got[c] > 0
        if c != "housekeeping":  # its one tiny request at a time cannot use its floor
            assert s[c] >= DEFAULT_POLICIES[c].floor - 0.02, (c, s)


def test_a_closed_loop_class_is_served_ahead_of_a_flood_of_lower_classes() -> None:
    """Produce with one request at a time among floods of background requests waits
    about one grant, not behind the queues."""
    lane = Lane(Budget(bytes_per_s=20 * MB, requests_per_s=1000), 0.0)
    demand = {
        "produce": (1, 256 * 1024),
        "catch_up_fetch": (64, 1024 * 1024),
        "compaction": (64, 1024 * 1024),
    }
    simulate(lane, demand, 60.0)
    wait = lane.stats("produce").wait
    # 99% of produce's grants within 25 ms, while background requests wait seconds.
    within = sum(n for bound, n in zip(wait.bounds, wait.counts, strict=False) if bound <= 0.025)
    assert within >= 0.99 * wait.count
    assert lane.stats("compaction").wait.sum / lane.stats("compaction").wait.count > 0.5


def test_in_flight_cap_alone_orders_by_weight() -> None:
    lane = Lane(Budget(max_in_flight=8), 0.0)
    demand = {c: (16, 1024 * 1024) for c in ("produce", "tail_fetch", "catch_up_fetch")}
    got = simulate(lane, demand, 30.0)
    assert lane.in_flight <= 8
    s = shares(got)
    assert s["produce"] > s["tail_fetch"] > s["catch_up_fetch"] >= 0.1 - 0.02


def test_cancelled_waiters_leave_the_queue_and_grants_are_given_back() -> None:
    lane = Lane(Budget(max_in_flight=1), 0.0)
    first = lane.request("produce", 10, 0.0)
    assert first.granted
    queued = lane.request("compaction", 10, 0.0)
    gone = lane.request("produce", 10, 0.0)
    assert not queued.granted and lane.queue_depth("produce") == 1
    lane.cancel(gone)
    assert lane.queue_depth("produce") == 0 and lane.waiting == 1
    lane.release(first, 10)
    assert lane.dispatch(0.0) == [queued]
    lane.cancel(queued)  # granted, then its task was cancelled: the slot comes back
    assert lane.in_flight == 0


def test_whole_object_gets_are_charged_when_their_size_is_known() -> None:
    lane = Lane(Budget(bytes_per_s=1 * MB, burst_s=1.0), 0.0)
    w = lane.request("catch_up_fetch", 0, 0.0)
    lane.release(w, 3 * MB)  # a GET of a whole 3 MB object
    assert lane.stats("catch_up_fetch").granted_bytes == 3 * MB
    later = lane.request("catch_up_fetch", 0, 0.5)
    assert not later.granted  # 2 MB in debt: about 2 s to wait
    assert lane.next_ready_in(0.5) == pytest.approx(1.5, abs=0.01)


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        ({**DEFAULT_POLICIES, "produce": ClassPolicy(50, 0.9)}, "add up to"),
        ({**DEFAULT_POLICIES, "compaction": ClassPolicy(0, 0.1)}, "weight must be > 0"),
        ({**DEFAULT_POLICIES, "compaction": ClassPolicy(1, -0.1)}, "within 0..1"),
        ({k: v for k, v in DEFAULT_POLICIES.items() if k != "compaction"}, "exactly"),
    ],
)
def test_policies_a_lane_cannot_honour_are_refused(
    policies: dict[str, ClassPolicy], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Lane(Budget(), 0.0, policies)
