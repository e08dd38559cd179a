"""The faults of issue 28, each injected into the shared proxied cluster
(tests/faults/cluster.py) under the running workload and healed before it returns:
its figures as lines, and the measures a test bounds or the benchmark
(benchmarks/faults.py) reports. The tests and the benchmark run the same code."""

from __future__ import annotations

import math
import os
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient

from tests.cluster_harness import wait_until
from tests.faults.cluster import PARTITIONS, ZONES, FaultNode, ProxiedCluster
from tests.faults.workload import Workload, ZoneProducer

LOST_ZONE = "zone-c"


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    measures: dict[str, float] = field(default_factory=dict)


Fault = Callable[[ProxiedCluster, Workload], Outcome]


def latency(latencies: list[float]) -> str:
    """p50 and p99 of acknowledgement latencies, in ms."""
    if not latencies:
        return "no acknowledgement"
    return f"p50 {1000 * _at(latencies, 0.5):.0f} ms, p99 {1000 * _at(latencies, 0.99):.0f} ms"


def _at(latencies: list[float], q: float) -> float:
    return latencies[min(len(latencies) - 1, int(q * len(latencies)))]


Stages = dict[tuple[str, str], tuple[float, float]]  # (zone, stage) -> (sum s, count)


def _stages(cluster: ProxiedCluster) -> Stages:
    """Every node's produce-stage histograms (seal wait, PUT, leaders' commit), summed
    per zone, from their /metrics."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for n in cluster.nodes:
        for name, labels, value in n.node.metrics():
            kind = name.removeprefix("zonegate_produce_stage_seconds_")
            if kind in ("sum", "count"):
                key = (n.zone, labels["stage"])
                total, count = out.get(key, (0.0, 0.0))
                out[key] = (total + value, count) if kind == "sum" else (total, count + value)
    return out


def _stage_lines(before: Stages, after: Stages, what: str) -> list[str]:
    """Each zone's mean time per produce stage between two readings."""
    lines = []
    for zone in sorted({z for z, _ in after}):
        parts = []
        for (z, stage), (total, count) in sorted(after.items()):
            t0, c0 = before.get((z, stage), (0.0, 0.0))
            if z == zone and count > c0:
                parts.append(f"{stage} {1000 * (total - t0) / (count - c0):.0f} ms")
        lines.append(f"{zone} nodes' mean produce stages {what}: {', '.join(parts)}")
    return lines


def _led(n: FaultNode) -> int:
    """How many partitions the node leads, as its catalog says (its /metrics)."""
    return int(sum(v for name, _, v in n.node.metrics() if name == "zonegate_partitions_led"))


def _settled(w: Workload) -> None:
    assert wait_until(lambda: w.acked_since(time.monotonic() - 0.5), 60), "producers resumed"


def zone_lost(cluster: ProxiedCluster, w: Workload) -> Outcome:
    """Every node of one zone killed -9 for two leases and a little more."""
    lease_s = cluster.lease_ms / 1000
    lost_at = time.monotonic()
    for n in cluster.in_zone(LOST_ZONE):
        n.node.kill9()
    # The proxies in front of the dead nodes refuse connections, as the hosts of dead
    # processes do (an open proxy would accept and then close them).
    for name in cluster.proxies_to(LOST_ZONE):
        cluster.toxi.set_enabled(name, False)
    time.sleep(2 * lease_s + 2)
    until = time.monotonic()
    others = w.longest_stall(lost_at, until, [p for p in w.producers if p.zone != LOST_ZONE])
    moved = w.longest_stall(lost_at, until, [p for p in w.producers if p.zone == LOST_ZONE])
    partitions = w.longest_partition_stall(lost_at, until)
    cluster.toxi.reset()
    for n in cluster.in_zone(LOST_ZONE):
        n.node.start()
    cluster.wait_ready()
    # Produce on while the controller's leader balance (every 10 s) moves partitions
    # back to the returned nodes: moves under load, with Appends in flight.
    time.sleep(12.0)
    return Outcome(
        [
            f"{LOST_ZONE}'s nodes killed -9: other zones' producers' longest stall "
            f"{others:.2f} s (lease {lease_s:.0f} s)",
            f"{LOST_ZONE}'s producer, through other zones' nodes: longest stall {moved:.2f} s",
            f"longest time a partition went without an acknowledgement {partitions:.2f} s",
        ],
        {
            "others": others,
            "moved": moved,
            "partitions": partitions,
            "recovery": max(others, moved),
        },
    )


def zone_silent(cluster: ProxiedCluster, w: Workload) -> Outcome:
    """A zone's power lost: its nodes frozen (SIGSTOP) and every link to and from them
    dropping packets with connections left open (timeout toxics both ways), for two
    leases and a little more; nothing refuses, so only the nodes' leases running out
    tell the others (operations.md). Then the frozen nodes are killed and started."""
    lease_s = cluster.lease_ms / 1000
    zone = cluster.in_zone(LOST_ZONE)
    others = [n for n in cluster.nodes if n.zone != LOST_ZONE]
    total = sum(_led(n) for n in cluster.nodes)
    links = {*cluster.proxies_to(LOST_ZONE), *cluster.rpc_proxies(LOST_ZONE)}
    links |= {f"pg-{LOST_ZONE}", f"s3-{LOST_ZONE}"}
    lost_at = time.monotonic()
    for name in sorted(links):
        for stream in ("upstream", "downstream"):
            cluster.toxi.add_toxic(name, f"dark-{stream}", "timeout", {"timeout": 0}, stream=stream)
    for n in zone:
        assert n.node.proc is not None
        os.kill(n.node.proc.pid, signal.SIGSTOP)
    # When the other zones' nodes lead every partition: the frozen nodes' leases ran
    # out and the controller moved their partitions.
    moved_s = float("nan")
    while time.monotonic() < lost_at + 2 * lease_s + 2:
        if math.isnan(moved_s) and sum(_led(n) for n in others) >= total:
            moved_s = time.monotonic() - lost_at
        time.sleep(0.25)
    until = time.monotonic()
    stall = w.longest_stall(lost_at, until, [p for p in w.producers if p.zone != LOST_ZONE])
    moved = w.longest_stall(lost_at, until, [p for p in w.producers if p.zone == LOST_ZONE])
    partitions = w.longest_partition_stall(lost_at, until)
    for n in zone:
        n.node.kill9()  # SIGKILL ends a stopped process too
    cluster.toxi.reset()
    for n in zone:
        n.node.start()
    cluster.wait_ready()
    return Outcome(
        [
            f"{LOST_ZONE} silent ({len(links)} links dropping packets, nodes frozen): "
            f"other zones' producers' longest stall {stall:.2f} s (lease {lease_s:.0f} s)",
            f"{LOST_ZONE}'s producer: longest stall {moved:.2f} s",
            f"longest time a partition went without an acknowledgement {partitions:.2f} s",
            f"every partition led by another zone's node {moved_s:.2f} s after the loss",
        ],
        {
            "others": stall,
            "moved": moved,
            "partitions": partitions,
            "moved_s": moved_s,
            "recovery": partitions,
        },
    )


def _metric(cluster: ProxiedCluster, name: str) -> dict[int, float]:
    """One metric of every running node, by node id (absent: 0)."""
    out = {}
    for n in cluster.nodes:
        if n.node.alive():
            out[n.node_id] = sum(v for m, _, v in n.node.metrics() if m == name)
    return out


def zone_cut(cluster: ProxiedCluster, w: Workload) -> Outcome:
    """One zone's nodes cut off from the other zones' nodes (packets dropped both ways,
    connections left open) for three leases and a little more, while they still reach S3
    and PostgreSQL: the controller holds them cut off and moves their partitions
    (router/reachability.py), and lets them go a lease after the link heals."""
    lease_s = cluster.lease_ms / 1000
    cut_s = 3 * lease_s + 2
    proxies = list(cluster.rpc_proxies(LOST_ZONE))
    cut_ids = sorted(n.node_id for n in cluster.in_zone(LOST_ZONE))
    fenced_before = sum(_metric(cluster, "zonegate_leader_fenced_commits_total").values())
    cut_at = time.monotonic()
    for name in proxies:
        for stream in ("upstream", "downstream"):
            cluster.toxi.add_toxic(name, f"cut-{stream}", "timeout", {"timeout": 0}, stream=stream)

    def held() -> list[int]:
        return sorted(n for n, v in _metric(cluster, "zonegate_node_cut_off").items() if v)

    held_within = -1.0
    while time.monotonic() < cut_at + cut_s:
        if held_within < 0 and held() == cut_ids:
            held_within = time.monotonic() - cut_at
        time.sleep(0.25)
    until = time.monotonic()
    held_at_heal = held()
    cluster.toxi.reset()
    healed_at = time.monotonic()
    let_go = wait_until(lambda: not held(), 4 * lease_s, step=0.25)
    released = time.monotonic() - healed_at if let_go else -1.0
    fenced = sum(_metric(cluster, "zonegate_leader_fenced_commits_total").values())
    # Each of the other zones' producers writes every partition: the worst of theirs.
    others = max(
        w.longest_partition_stall(cut_at, until, [p]) for p in w.producers if p.zone != LOST_ZONE
    )
    own = w.longest_stall(cut_at, until, [p for p in w.producers if p.zone == LOST_ZONE])
    return Outcome(
        [
            f"{LOST_ZONE} cut off from the other zones' nodes for {cut_s:.0f} s "
            f"({len(proxies)} links; lease {lease_s:.0f} s): nodes {cut_ids} held cut off "
            f"{held_within:.2f} s after the cut (still at the heal: {held_at_heal}), let go "
            f"{released:.2f} s after the heal",
            f"other zones' producers' longest stall on a partition {others:.2f} s; "
            f"{LOST_ZONE}'s producer (its nodes reach no leader during the cut) {own:.2f} s",
            f"commits fenced by a moved leader epoch: {fenced - fenced_before:.0f}",
        ],
        {
            "recovery": others,
            "own": own,
            "held_within": held_within,
            "held_at_heal": float(len(held_at_heal)),
            "released": released,
            "fenced": fenced - fenced_before,
        },
    )


def _add_stages(total: Stages, before: Stages, after: Stages) -> None:
    """Adds one window's stage sums and counts (after - before) into `total`."""
    for key, (t1, c1) in after.items():
        t0, c0 = before.get(key, (0.0, 0.0))
        t, c = total.get(key, (0.0, 0.0))
        total[key] = (t + t1 - t0, c + c1 - c0)


def _mean_ms(stages: Stages, zones: list[str], names: tuple[str, ...]) -> float:
    """The sum of the mean times of `names` stages over `zones`' nodes, in ms."""
    out = 0.0
    for stage in names:
        total = sum(stages.get((z, stage), (0.0, 0.0))[0] for z in zones)
        count = sum(stages.get((z, stage), (0.0, 0.0))[1] for z in zones)
        out += 1000 * total / count if count else math.nan
    return out


S3_DELAY_MS = 300  # in the alternating windows: well above the machine's own swings
_S3_ROUNDS, _S3_WINDOW_S = 5, 2.0
# After each switch, before a window: what was queued behind the other state (the
# producers' batches waiting for slow answers) drains first, or it is counted in the
# window after the delay is lifted and the comparison favours the delay.
_SETTLE_S = 1.5


Windows = dict[bool, list[tuple[float, float]]]  # with the delay or not -> (from, to)


def _alternate(
    cluster: ProxiedCluster, proxy: str, delay_ms: int, rounds: int, window_s: float
) -> tuple[Windows, dict[bool, Stages]]:
    """`rounds` times, a window without a latency toxic on `proxy` and one with
    `delay_ms` (in turn first), each begun `_SETTLE_S` after the switch: the windows'
    times, round by round, and every node's produce stages summed over each kind."""
    windows: Windows = {False: [], True: []}
    stages: dict[bool, Stages] = {False: {}, True: {}}
    for i in range(rounds):
        # Without, with; then with, without: a drift of the machine's load over the
        # rounds (it moved one test's comparison by +170 ms in CI) cancels out.
        for slow in (False, True) if i % 2 == 0 else (True, False):
            if slow:
                cluster.toxi.add_toxic(proxy, "slow", "latency", {"latency": delay_ms})
            time.sleep(_SETTLE_S)
            begin, first = time.monotonic(), _stages(cluster)
            time.sleep(window_s)
            end, last = time.monotonic(), _stages(cluster)
            windows[slow].append((begin, end))
            _add_stages(stages[slow], first, last)
            cluster.toxi.reset()
    return windows, stages


def _median_added_ms(
    p: ZoneProducer, windows: Windows, partitions: set[int] | None = None
) -> tuple[float, list[float]]:
    """Each round's p50 with the fault less the p50 of the round's window without it, for
    acknowledgements of `partitions` (all, if None): their median (one window's stall
    does not decide), and the rounds' figures, sorted."""
    added = []
    for (b0, e0), (b1, e1) in zip(windows[False], windows[True], strict=True):
        off, on = p.latencies(b0, e0, partitions), p.latencies(b1, e1, partitions)
        if off and on:
            added.append(1000 * (_at(on, 0.5) - _at(off, 0.5)))
    added.sort()
    return (statistics.median(added) if added else math.nan), added


def s3_links(cluster: ProxiedCluster, w: Workload) -> Outcome:
    """One zone's S3 link: 100 ms latency for 4 s (the benchmark's p99); then 300 ms on
    and off in 2 s windows, five times each (the machine's own swings drift over
    seconds, so alternating windows compare like with like); then reset for 3 s, then
    half-open (no answer, no close) for 5 s."""
    proxy, out = f"s3-{LOST_ZONE}", Outcome()
    cluster.toxi.add_toxic(proxy, "slow", "latency", {"latency": 100})
    slow_from = time.monotonic() + 0.5
    time.sleep(4.0)
    p99 = [p.latencies(slow_from, time.monotonic()) for p in w.producers if p.zone == LOST_ZONE]
    if p99 and p99[0]:
        out.measures["slow_p99_ms"] = 1000 * _at(p99[0], 0.99)
        out.lines.append(f"{LOST_ZONE} produce {latency(p99[0])} with 100 ms added")
    cluster.toxi.reset()
    windows, stages = _alternate(cluster, proxy, S3_DELAY_MS, _S3_ROUNDS, _S3_WINDOW_S)
    out.lines += _stage_lines({}, stages[False], "without the delay")
    out.lines += _stage_lines({}, stages[True], f"with {S3_DELAY_MS} ms added")
    wal = ("wal_seal_wait", "put")
    others = [z for z in ZONES if z != LOST_ZONE]
    for slow in (False, True):
        # The delayed zone's WAL stages against the others' in the same windows.
        excess = _mean_ms(stages[slow], [LOST_ZONE], wal) - _mean_ms(stages[slow], others, wal)
        out.measures["wal_excess_on_ms" if slow else "wal_excess_off_ms"] = excess
    out.lines.append(
        f"{LOST_ZONE}'s seal wait + PUT beyond the other zones': "
        f"{out.measures['wal_excess_off_ms']:.0f} ms without the delay, "
        f"{out.measures['wal_excess_on_ms']:.0f} ms with {S3_DELAY_MS} ms added"
    )
    for p in w.producers:
        median, added = _median_added_ms(p, windows)
        out.measures[f"{p.zone}_p50_added_ms"] = median
        out.lines.append(
            f"{p.zone} produce p50 with {S3_DELAY_MS} ms added to {LOST_ZONE}'s S3 link, "
            f"less without, by round: {', '.join(f'{x:+.0f}' for x in added)} ms"
        )
    reset_from = time.monotonic()
    cluster.toxi.add_toxic(proxy, "reset", "reset_peer", {"timeout": 0})
    time.sleep(3.0)
    cluster.toxi.reset()
    _settled(w)
    stall = w.longest_stall(reset_from, time.monotonic())
    out.lines.append(f"{LOST_ZONE}'s S3 connections reset for 3 s: longest stall {stall:.2f} s")
    half_from = time.monotonic()
    cluster.toxi.add_toxic(proxy, "half-open", "timeout", {"timeout": 0})
    time.sleep(5.0)
    cluster.toxi.reset()
    _settled(w)
    stall = w.longest_stall(half_from, time.monotonic())
    out.lines.append(f"{LOST_ZONE}'s S3 links half-open for 5 s: longest stall {stall:.2f} s")
    return out


def s3_bandwidth(cluster: ProxiedCluster, w: Workload, kib_s: int = 16) -> Outcome:
    """One zone's uploads to S3 limited to `kib_s` KiB/s per connection for 10 s
    (Toxiproxy's bandwidth toxic on what its nodes send): its PUTs take longer, every
    zone's produce latency printed before and during."""
    proxy, out = f"s3-{LOST_ZONE}", Outcome()
    base_from, base = time.monotonic(), _stages(cluster)
    time.sleep(4.0)
    slow_from, slow = time.monotonic(), _stages(cluster)
    cluster.toxi.add_toxic(proxy, "narrow", "bandwidth", {"rate": kib_s}, stream="upstream")
    time.sleep(10.0)
    slow_until = time.monotonic()
    cluster.toxi.reset()
    out.lines += _stage_lines(base, slow, "before")
    out.lines += _stage_lines(
        slow, _stages(cluster), f"with {LOST_ZONE}'s uploads at {kib_s} KiB/s"
    )
    for p in w.producers:
        during = p.latencies(slow_from + 1, slow_until - 1)
        out.lines.append(
            f"{p.zone} produce {latency(p.latencies(base_from, slow_from))} before, "
            f"{latency(during)} with {LOST_ZONE}'s uploads at {kib_s} KiB/s"
        )
        if during:
            out.measures[f"{p.zone}_p99_ms"] = 1000 * _at(during, 0.99)
    _settled(w)
    return out


PG_DELAY_MS = 200  # in the alternating windows, as for S3: well above the swings
_PG_ROUNDS, _PG_WINDOW_S = 4, 2.0


def _led_in(cluster: ProxiedCluster, topic: str, zone: str) -> set[int]:
    """The partitions of `topic` whose leader is a node of `zone`, as a client of no
    zone is told (docs/compatibility.md: `zonegate_az=admin` sees the real leaders)."""
    admin = AdminClient(
        {"bootstrap.servers": cluster.bootstrap("zone-b"), "client.id": "faults,zonegate_az=admin"}
    )
    zone_of = {n.node_id: n.zone for n in cluster.nodes}
    meta = admin.list_topics(topic, timeout=30).topics[topic]
    return {p for p, m in meta.partitions.items() if zone_of.get(m.leader) == zone}


def pg_link(cluster: ProxiedCluster, w: Workload) -> Outcome:
    """One zone's PostgreSQL link: 200 ms latency on and off in 2 s windows, four times
    each, then reset 1 s in every 2, four times. Produces to partitions led in that zone
    wait for their leaders' commits over it; the others must not notice."""
    proxy, slowed, out = "pg-zone-a", "zone-a", Outcome()
    led = _led_in(cluster, w.topic, slowed)
    windows, stages = _alternate(cluster, proxy, PG_DELAY_MS, _PG_ROUNDS, _PG_WINDOW_S)
    out.lines += _stage_lines({}, stages[False], "without the delay")
    out.lines += _stage_lines({}, stages[True], f"with {PG_DELAY_MS} ms added")
    flap_from = time.monotonic()
    for _ in range(4):
        cluster.toxi.add_toxic(proxy, "flap", "reset_peer", {"timeout": 0})
        time.sleep(1.0)
        cluster.toxi.remove_toxic(proxy, "flap")
        time.sleep(1.0)
    _settled(w)
    stall = w.longest_stall(flap_from, time.monotonic())
    out.lines.append(
        f"zone-a's PostgreSQL link reset 1 s in 2, 4 times: longest stall {stall:.2f} s"
    )
    _by_leader(cluster, w, out, windows, slowed, led)
    return out


def _by_leader(
    cluster: ProxiedCluster,
    w: Workload,
    out: Outcome,
    windows: Windows,
    zone: str,
    before: set[int],
) -> None:
    """Per producer, the growth of its produces to partitions led by `zone`'s nodes and
    to the others. The leaders are read before the windows and after the fault with the
    link healthy (under the delay, a loaded zone's nodes can look silent for a moment and
    a client of no zone be told -1); those led there both times count as led there."""
    after = _led_in(cluster, w.topic, zone)
    led, rest = before & after, set(range(PARTITIONS)) - before - after
    out.lines.append(f"partitions led by {zone}'s nodes: {sorted(led)}, by others: {sorted(rest)}")
    for p in w.producers:
        for which, parts in (("led_there", led), ("led_elsewhere", rest)):
            median, rounds = _median_added_ms(p, windows, parts)
            out.measures[f"{p.zone}_{which}_added_ms"] = median
            out.measures[f"{p.zone}_{which}_most_added_ms"] = max(rounds, default=math.nan)
            out.lines.append(
                f"{p.zone} produce p50 to partitions {which.replace('_', ' ')} with "
                f"{PG_DELAY_MS} ms added to {zone}'s PostgreSQL link, less without, by "
                f"round: {', '.join(f'{x:+.0f}' for x in rounds)} ms"
            )


def client_resets(cluster: ProxiedCluster, w: Workload) -> Outcome:
    """Half of the client connections reset 100 ms after opening, 1 s in every 2, four
    times."""
    proxies = [n.client_proxy.name for n in cluster.nodes]
    flap_from = time.monotonic()
    for _ in range(4):
        for name in proxies:
            cluster.toxi.add_toxic(name, "flap", "reset_peer", {"timeout": 100}, toxicity=0.5)
        time.sleep(1.0)
        for name in proxies:
            cluster.toxi.remove_toxic(name, "flap")
        time.sleep(1.0)
    stall = w.longest_stall(flap_from, time.monotonic())
    return Outcome(
        [f"client connections reset 1 s in 2, 4 times: longest stall {stall:.2f} s"],
        {"recovery": stall},
    )


FAULTS: dict[str, Fault] = {
    "zone-lost": zone_lost,
    "zone-silent": zone_silent,
    "zone-cut": zone_cut,
    "s3-links": s3_links,
    "s3-bandwidth": s3_bandwidth,
    "pg-link": pg_link,
    "client-resets": client_resets,
}
