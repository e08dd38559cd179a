"""One consumer-group member in its own process, so tests can stop it cleanly or kill -9 it.

    python -m tests.e2e.group_worker CLIENT BOOTSTRAP GROUP TOPIC [--assignor A]
        [--session-ms N] [--instance-id ID]

CLIENT is ck (confluent-kafka), kp (kafka-python) or aio (aiokafka). The member
consumes, prints every record, then commits what it printed synchronously (so
a record is printed before its commit: a member killed in between leaves it to
be read again, which is the "at least once, exactly once between commits" the
tests check). Each stdout line is JSON with `t` (CLOCK_MONOTONIC, shared by
every process on the machine):
    {"e": "assigned", "parts": [0, 1]}      the member's whole assignment now
    {"e": "rec", "p": 0, "o": 5, "v": "..."} a record handed to the application
    {"e": "commit", "offs": {"0": 6}}      a commit acknowledged by the coordinator
SIGTERM closes the consumer (a clean leave) and exits. The client library logs to stderr
(the member's log file) at INFO, or at the level ZG_WORKER_LOG names; at DEBUG
confluent-kafka also logs its group, fetch and metadata handling.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Any

stop = False
LOG_LEVEL = os.environ.get("ZG_WORKER_LOG", "INFO").upper()


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"e": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def emit_records(batches: dict[Any, list[Any]]) -> dict[int, int]:
    """Emits the records of a kafka-python/aiokafka poll; the last offset per partition."""
    last: dict[int, int] = {}
    for tp, msgs in batches.items():
        for m in msgs:
            emit("rec", p=tp.partition, o=m.offset, v=(m.value or b"").decode())
            last[tp.partition] = m.offset
    return last


def _on_term(*_: object) -> None:
    global stop
    stop = True


def run_ck(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": min(1000, args.session_ms // 3),
        "partition.assignment.strategy": args.assignor or "range",
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if LOG_LEVEL == "DEBUG":
        conf["debug"] = "cgrp,fetch,topic"
    consumer = Consumer(conf)
    owned: set[int] = set()
    cooperative = args.assignor == "cooperative-sticky"

    def on_assign(c: Any, parts: list[Any]) -> None:
        if cooperative:
            owned.update(p.partition for p in parts)
            c.incremental_assign(parts)
        else:
            owned.clear()
            owned.update(p.partition for p in parts)
            c.assign(parts)
        emit("assigned", parts=sorted(owned))

    def on_revoke(c: Any, parts: list[Any]) -> None:
        if cooperative:
            owned.difference_update(p.partition for p in parts)
            c.incremental_unassign(parts)
        else:
            owned.clear()
            c.unassign()
        emit("assigned", parts=sorted(owned))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while not stop:
        msgs = consumer.consume(num_messages=200, timeout=0.2)
        last: dict[int, int] = {}
        for m in msgs:
            if m.error() is not None:
                continue
            emit("rec", p=m.partition(), o=m.offset(), v=(m.value() or b"").decode())
            last[m.partition()] = m.offset()
        if last:
            offsets = [TopicPartition(args.topic, p, o + 1) for p, o in last.items()]
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except Exception as e:  # a rebalance took the partitions: not committed
                emit("commit_failed", error=str(e))
                continue
            emit("commit", offs={str(p): o + 1 for p, o in last.items()})
    consumer.close()


def run_kp(args: argparse.Namespace) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import OffsetAndMetadata

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=f"kp-{args.instance_id or 'dyn'}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=min(1000, args.session_ms // 3),
        partition_assignment_strategy=[assignors[args.assignor or "range"]],
        metadata_max_age_ms=1000,
        group_instance_id=args.instance_id or None,
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("assigned", parts=[])

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", parts=sorted(tp.partition for tp in assigned))

    consumer.subscribe([args.topic], listener=Listener())
    while not stop:
        batches = consumer.poll(timeout_ms=200, max_records=200)
        last = emit_records(batches)
        if last:
            try:
                consumer.commit(
                    {
                        TopicPartition(args.topic, p): OffsetAndMetadata(o + 1, "", -1)
                        for p, o in last.items()
                    }
                )
            except Exception as e:
                emit("commit_failed", error=str(e))
                continue
            emit("commit", offs={str(p): o + 1 for p, o in last.items()})
    consumer.close()


async def run_aio(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=min(1000, args.session_ms // 3),
        partition_assignment_strategy=[assignors[args.assignor or "range"]],
        metadata_max_age_ms=1000,
        group_instance_id=args.instance_id or None,
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("assigned", parts=[])

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", parts=sorted(tp.partition for tp in assigned))

    await consumer.start()
    consumer.subscribe([args.topic], listener=Listener())
    while not stop:
        batches = await consumer.getmany(timeout_ms=200, max_records=200)
        last = emit_records(batches)
        if last:
            try:
                await consumer.commit(
                    {TopicPartition(args.topic, p): o + 1 for p, o in last.items()}
                )
            except Exception as e:
                emit("commit_failed", error=str(e))
                continue
            emit("commit", offs={str(p): o + 1 for p, o in last.items()})
    await consumer.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("client", choices=["ck", "kp", "aio"])
    p.add_argument("bootstrap")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("--assignor", default="")
    p.add_argument("--session-ms", type=int, default=10000)
    p.add_argument("--instance-id", default="")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, _on_term)
    logging.basicConfig(
        level=LOG_LEVEL, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    emit("start")
    if args.client == "ck":
        run_ck(args)
    elif args.client == "kp":
        run_kp(args)
    else:
        asyncio.run(run_aio(args))
    emit("stopped")


if __name__ == "__main__":
    main()
