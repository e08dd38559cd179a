"""The workload of the network-fault tests, in Jepsen's Kafka style: one idempotent
producer per zone (acks=all) writing unique values `ZONE:SEQ`, a consumer group with
one member per zone reading throughout, and after the faults heal one reader of every
partition from its start to its end offset; together they make the checker's
history (tests/faults/checker.py).

Producers keep each acknowledgement's time, so a scenario can say how long any
producer went without one (its recovery time)."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from tests.faults.checker import Ack, History, Read, positions
from tests.faults.cluster import PARTITIONS, ZONES, ProxiedCluster


@dataclass
class ZoneProducer:
    zone: str
    bootstrap: str
    topic: str
    interval_s: float = 0.01
    sent: list[str] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)  # monotonic, by SEQ
    acks: list[tuple[Ack, float]] = field(default_factory=list)  # with the monotonic time
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.zone}")
        self._thread.start()

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        now = time.monotonic()
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                value = msg.value().decode()  # type: ignore[union-attr]
                self.acks.append((Ack(value, msg.partition(), msg.offset()), now))  # type: ignore[arg-type]

    def _run(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": f"producer-{self.zone},zonegate_az={self.zone}",
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                # A client whose zone is lost asks its bootstrap list (other zones'
                # nodes too) after 3 s without a reachable broker; librdkafka's default,
                # 300 s, left the lost zone's producer without a broker for the whole
                # outage (tests/faults/test_network_faults.py's zone lost).
                "metadata.recovery.rebootstrap.trigger.ms": 3000,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "log_level": 3,
            }
        )
        next_at = time.monotonic()
        while not self._stop.is_set():
            value = f"{self.zone}:{len(self.sent)}"
            self.sent.append(value)
            self.sent_at.append(time.monotonic())
            p.produce(self.topic, value.encode(), key=value.encode(), on_delivery=self._delivered)
            p.poll(0)
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()  # behind (a stall): no burst to catch up
        p.flush(150)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(180)

    def latencies(
        self, since: float, until: float, partitions: Collection[int] | None = None
    ) -> list[float]:
        """Seconds from send to acknowledgement of the values sent in [since, until] (to
        `partitions` only, if given)."""
        with self._lock:
            acks = list(self.acks)
        out = []
        for ack, at in acks:
            sent = self.sent_at[int(ack.value.rsplit(":", 1)[1])]
            if since <= sent <= until and (partitions is None or ack.partition in partitions):
                out.append(at - sent)
        return sorted(out)

    def ack_partitions(self) -> list[tuple[int, float]]:
        """Each acknowledgement's partition and time."""
        with self._lock:
            return [(ack.partition, at) for ack, at in self.acks]

    def ack_times(self) -> list[float]:
        with self._lock:
            return sorted(t for _, t in self.acks)


@dataclass
class Group:
    """One member per zone, subscribed, reading from the earliest offset."""

    cluster: ProxiedCluster
    topic: str
    group_id: str
    reads: list[Read] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for zone in ZONES:
            t = threading.Thread(target=self._member, args=(zone,), name=f"member-{zone}")
            t.start()
            self._threads.append(t)

    def _member(self, zone: str) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.cluster.bootstrap(zone),
                "group.id": self.group_id,
                "client.id": f"member-{zone},zonegate_az={zone}",
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 1000,
                "metadata.recovery.rebootstrap.trigger.ms": 3000,  # as the producers
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "log_level": 3,
            }
        )
        c.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                m = c.poll(0.5)
                if m is None or m.error() is not None:
                    continue
                with self._lock:
                    value = m.value().decode()  # type: ignore[union-attr]
                    self.reads.append(Read(m.partition(), m.offset(), value))  # type: ignore[arg-type]
        finally:
            c.close()

    def positions(self) -> dict[int, int]:
        with self._lock:
            return dict(positions(self.reads))

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)


def _end_offset(c: Consumer, tp: TopicPartition, attempts: int = 5) -> int:
    """The partition's end offset, asked again on a local error: librdkafka drops its
    bootstrap brokers' handles after the first Metadata, failing a request in flight on
    one (`_DESTROY_BROKER`, seen once under load)."""
    for attempt in range(attempts):
        try:
            return int(c.get_watermark_offsets(tp, timeout=30)[1])
        except KafkaException:
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


def final_read(
    bootstrap: str, topic: str, timeout_s: float = 60.0
) -> tuple[list[Read], dict[int, int]]:
    """Every partition from its start to its end offset, as read; the end offsets."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-audit",
            "enable.auto.commit": False,
            "client.id": "audit,zonegate_az=zone-a",
            "log_level": 3,
        }
    )
    try:
        ends = {p: _end_offset(c, TopicPartition(topic, p)) for p in range(PARTITIONS)}
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        reads: list[Read] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None or m.error() is not None:
                continue
            r = Read(m.partition(), m.offset(), m.value().decode())  # type: ignore[arg-type,union-attr]
            reads.append(r)
            if r.offset + 1 >= ends[r.partition]:
                done.add(r.partition)
        return reads, ends
    finally:
        c.close()


@dataclass
class Workload:
    cluster: ProxiedCluster
    topic: str
    producers: list[ZoneProducer] = field(default_factory=list)
    group: Group | None = None

    def start(self) -> None:
        for zone in ZONES:
            self.producers.append(ZoneProducer(zone, self.cluster.bootstrap(zone), self.topic))
        self.group = Group(self.cluster, self.topic, f"{self.topic}-group")
        for p in self.producers:
            p.start()
        self.group.start()

    def acked_since(self, since: float, producers: list[ZoneProducer] | None = None) -> bool:
        """Whether every producer (of `producers`) had an acknowledgement after `since`."""
        return all(p.ack_times()[-1:] > [since] for p in producers or self.producers)

    def longest_stall(
        self, since: float, until: float, producers: list[ZoneProducer] | None = None
    ) -> float:
        """The longest time in [since, until] any producer went without an ack."""
        worst = 0.0
        for p in producers or self.producers:
            times = [since, *(t for t in p.ack_times() if since <= t <= until), until]
            worst = max(worst, max(b - a for a, b in zip(times, times[1:], strict=False)))
        return worst

    def longest_partition_stall(
        self, since: float, until: float, producers: Sequence[ZoneProducer] | None = None
    ) -> float:
        """The longest time in [since, until] any partition went without an ack from
        any of `producers` (all by default): how long the partitions led by lost nodes
        were unavailable (a producer's own stall hides them while its other partitions
        are acknowledged). One producer in `producers`: that producer's stall."""
        by_partition: dict[int, list[float]] = {p: [] for p in range(PARTITIONS)}
        for p in self.producers if producers is None else producers:
            for partition, at in p.ack_partitions():
                if since <= at <= until:
                    by_partition[partition].append(at)
        worst = 0.0
        for times in by_partition.values():
            edges = [since, *sorted(times), until]
            worst = max(worst, max(b - a for a, b in zip(edges, edges[1:], strict=False)))
        return worst

    def finish(self, stuck_after_s: float = 60.0) -> History:
        """Stops the producers (each flushes), reads everything back, waits for the group
        to reach every end offset, and returns the history."""
        for p in self.producers:
            p.stop()
        assert self.group is not None
        final, ends = final_read(self.cluster.bootstrap("zone-a"), self.topic)
        deadline = time.monotonic() + stuck_after_s
        group = self.group
        while time.monotonic() < deadline and any(
            group.positions().get(p, 0) < end for p, end in ends.items()
        ):
            time.sleep(0.5)
        group.stop()
        return History(
            sent={v for p in self.producers for v in p.sent},
            acks=[a for p in self.producers for a, _ in p.acks],
            final=final,
            group=list(group.reads),
            end_offsets=ends,
            group_positions=group.positions(),
        )

    def errors(self) -> list[str]:
        return [e for p in self.producers for e in p.errors]
