"""One KIP-848 consumer (confluent-kafka, `group.protocol=consumer`) in its own process.

    python -m tests.e2e.kip848_worker BOOTSTRAP GROUP TOPIC[,TOPIC...|^REGEX]
        [--assignor uniform|range] [--instance-id ID]

Speaks the same stdout protocol as tests/e2e/group_worker.py, so the helpers
of tests/e2e/group_harness.py read it: one JSON line per event, `t` on
CLOCK_MONOTONIC; "assigned" (the whole assignment now, after each
incremental change), "rec" (a record handed to the application, with its
topic), "commit" (offsets acknowledged). It commits, synchronously, what it
printed of the partitions it still owns. SIGTERM closes the consumer (it
leaves the group) and exits.
"""

from __future__ import annotations

import argparse
import signal
from typing import Any

from tests.e2e import group_worker as worker
from tests.e2e.group_worker import emit


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("group")
    p.add_argument("topics")
    p.add_argument("--assignor", default="")
    p.add_argument("--instance-id", default="")
    p.add_argument("--client-id", default="kip848")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, worker._on_term)
    emit("start")

    from confluent_kafka import Consumer, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "group.protocol": "consumer",
        "client.id": args.client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if args.assignor:
        conf["group.remote.assignor"] = args.assignor
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    owned: set[tuple[str, int]] = set()

    def report() -> None:
        emit("assigned", parts=sorted(p for _, p in owned), tps=sorted(owned))

    def on_assign(c: Any, parts: list[Any]) -> None:
        owned.update((tp.topic, tp.partition) for tp in parts)
        c.incremental_assign(parts)
        report()

    def on_revoke(c: Any, parts: list[Any]) -> None:
        owned.difference_update((tp.topic, tp.partition) for tp in parts)
        c.incremental_unassign(parts)
        report()

    consumer.subscribe(
        args.topics.split(","), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke
    )
    while not worker.stop:
        msgs = consumer.consume(num_messages=200, timeout=0.2)
        last: dict[tuple[str, int], int] = {}
        for m in msgs:
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            if m.error() is not None or topic is None or partition is None or offset is None:
                continue
            emit(
                "rec",
                topic=topic,
                p=partition,
                o=offset,
                v=(m.value() or b"").decode(),
            )
            last[(topic, partition)] = offset
        last = {tp: o for tp, o in last.items() if tp in owned}
        if last:
            offsets = [TopicPartition(t, p, o + 1) for (t, p), o in last.items()]
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except Exception as e:  # e.g. STALE_MEMBER_EPOCH during a rebalance
                emit("commit_failed", error=str(e))
                continue
            emit("commit", offs={str(p): o + 1 for (_, p), o in last.items()})
    consumer.close()
    emit("stopped")


if __name__ == "__main__":
    main()
