"""The safety checker of the network-fault tests, in the style of Jepsen's Kafka
workload: given what producers were told and what consumers read, which anomalies
happened.

A history is pure data, no clients: each producer writes unique values
`PRODUCER:SEQ` (SEQ counting up from 0 in send order); an acknowledgement names the
partition and offset the broker gave the value; after the faults heal, one reader
reads every partition from its start to its end offset, and a consumer group's
reads during the run are kept with the group's final positions. The anomalies:

- lost: a value acknowledged but absent from the final read of its partition, the
  read having reached the partition's end offset (or absent from every read);
- unfinished: a partition the final read never reached the end offset of (the
  reader stuck: its values are not called lost unless no read has them);
- duplicated: a value present at more than one offset;
- reordered: within a partition, a producer's values out of the order it sent them
  (an idempotent producer keeps its order per partition), or a reader's offsets
  going backwards;
- double-assigned offsets: one (partition, offset) holding two different values
  across acknowledgements and reads (two leaders both committing, or a read that
  disagrees with an acknowledgement);
- stuck: a partition whose group position never reached its end offset;
- unknown: a value read that no producer sent.

Values whose delivery failed or was never reported are indeterminate: they may be
present (once) or absent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Ack:
    value: str
    partition: int
    # None: the client reported the write delivered without its offset (librdkafka
    # does for a retry it judges already persisted); checked for loss, not placement.
    offset: int | None


@dataclass(frozen=True, slots=True)
class Read:
    partition: int
    offset: int
    value: str


@dataclass
class History:
    sent: set[str] = field(default_factory=set)  # every value handed to a producer
    acks: list[Ack] = field(default_factory=list)
    final: list[Read] = field(default_factory=list)  # every partition, start to end, as read
    group: list[Read] = field(default_factory=list)  # the consumer group's reads, in order
    end_offsets: dict[int, int] = field(default_factory=dict)  # partition -> end offset
    group_positions: dict[int, int] = field(default_factory=dict)  # partition -> next offset


@dataclass
class Report:
    acknowledged: int = 0
    read: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    double_assigned: list[str] = field(default_factory=list)
    stuck: list[int] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "reordered": len(self.reordered),
            "double_assigned": len(self.double_assigned),
            "stuck": len(self.stuck),
            "unfinished": len(self.unfinished),
            "unknown": len(self.unknown),
        }

    @property
    def ok(self) -> bool:
        return not any(self.counts().values())

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items())
        return f"acknowledged {self.acknowledged}, read {self.read}: {counts}"

    def examples(self, n: int = 5) -> dict[str, list[object]]:
        """A few of each anomaly found, for an assertion's message."""
        found: dict[str, list[object]] = {}
        for name in self.counts():
            items: list[object] = list(getattr(self, name))[:n]
            if items:
                found[name] = items
        return found


def _producer_seq(value: str) -> tuple[str, int] | None:
    producer, sep, seq = value.rpartition(":")
    return (producer, int(seq)) if sep and seq.isdigit() else None


def _reorders(reads: Iterable[Read], what: str) -> list[str]:
    """Per partition: offsets not increasing, or one producer's values out of its order."""
    out: list[str] = []
    last_offset: dict[int, int] = {}
    last_seq: dict[tuple[int, str], tuple[int, int]] = {}  # (partition, producer) -> (seq, o)
    for r in reads:
        prev = last_offset.get(r.partition)
        if prev is not None and r.offset <= prev:
            out.append(f"{what}: partition {r.partition} offset {r.offset} after {prev}")
            continue  # one anomaly, not also its values' order
        last_offset[r.partition] = r.offset
        ps = _producer_seq(r.value)
        if ps is None:
            continue
        key = (r.partition, ps[0])
        before = last_seq.get(key)
        if before is not None and ps[1] < before[0]:
            out.append(
                f"{what}: partition {r.partition}: {r.value} at offset {r.offset} after "
                f"{ps[0]}:{before[0]} at offset {before[1]}"
            )
        last_seq[key] = (ps[1], r.offset)
    return out


def _group_rereads_removed(reads: Sequence[Read]) -> list[Read]:
    """The group's reads with re-deliveries dropped: after a rebalance a member may
    read again from the last committed offset (at-least-once), which is no anomaly."""
    seen: set[tuple[int, int]] = set()
    out = []
    for r in reads:
        if (r.partition, r.offset) not in seen:
            seen.add((r.partition, r.offset))
            out.append(r)
    return out


def check(history: History) -> Report:
    report = Report(acknowledged=len(history.acks), read=len(history.final))
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for r in history.final:
        where[r.value].add((r.partition, r.offset))
    reached = positions(history.final)
    report.unfinished = sorted(
        p for p, end in history.end_offsets.items() if reached.get(p, 0) < end
    )
    seen_by_group = {r.value for r in history.group}
    for ack in history.acks:
        if ack.value in where:
            continue
        if ack.partition not in report.unfinished or ack.value not in seen_by_group:
            report.lost.append(ack.value)
    report.duplicated = sorted(v for v, places in where.items() if len(places) > 1)
    report.unknown = sorted(v for v in where if v not in history.sent)

    held: dict[tuple[int, int], set[str]] = defaultdict(set)
    for ack in history.acks:
        if ack.offset is not None:
            held[(ack.partition, ack.offset)].add(ack.value)
    for r in (*history.final, *history.group):
        held[(r.partition, r.offset)].add(r.value)
    report.double_assigned = [
        f"partition {p} offset {o}: {sorted(values)}"
        for (p, o), values in sorted(held.items())
        if len(values) > 1
    ]

    report.reordered = _reorders(history.final, "final read") + _reorders(
        _group_rereads_removed(history.group), "group"
    )
    report.stuck = sorted(
        p
        for p, end in history.end_offsets.items()
        if end > 0 and history.group_positions.get(p, 0) < end
    )
    return report


def positions(reads: Iterable[Read]) -> Mapping[int, int]:
    """Each partition's next offset after the highest one read."""
    out: dict[int, int] = {}
    for r in reads:
        out[r.partition] = max(out.get(r.partition, 0), r.offset + 1)
    return out
