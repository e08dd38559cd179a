"""Reassigning 1,000 partitions between nodes while a producer produces: how long until done.

Three node processes, one per zone (tests/cluster_harness.py), a topic of
`--partitions` partitions, an idempotent confluent-kafka producer writing to all
of them throughout. Each round moves every partition to the next node with one
AlterPartitionReassignments (kafka-python's admin client, as
kafka-reassign-partitions sends it) and times from the request until the tools
show it done everywhere: ListPartitionReassignments lists nothing in progress,
and Metadata from every node names the new leader of every partition (asked as
a client of a zone with no node, which is told the real leaders). Moves copy no
data, so this is metadata only: one transaction, then each node's next catalog
refresh. The producer must see no error; the figure is the median round. The
last line is exactly `reassign N partitions: X ms`.

    python benchmarks/reassign.py [--partitions 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOPIC = "reassign-bench"


def _leaders(conn: Any, partitions: int) -> dict[int, int]:
    """Each partition's leader in one node's Metadata answer (that node alone)."""
    import uuid

    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=TOPIC),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    answer = conn.request(request, client_id="zonegate_az=nowhere")
    found = {int(p.partition_index): int(p.leader_id) for p in answer.topics[0].partitions}
    assert len(found) == partitions, f"{len(found)} partitions in Metadata, not {partitions}"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    from tests.cluster_harness import start_cluster, wait_until
    from tests.kafka_raw import RawConnection

    with tempfile.TemporaryDirectory(prefix="zonegate-reassign-") as tmp:
        cluster = start_cluster(Path(tmp), ["a", "b", "c"], 1, ["--auto-leader-rebalance", "false"])
        try:
            boots = [n.bootstrap for n in cluster.nodes]
            ids = [n.node_id for n in cluster.nodes]
            ck = AdminClient({"bootstrap.servers": boots[0]})
            # One connection per node: each node's own Metadata answer is read.
            readers = [RawConnection(n.port, timeout=30) for n in cluster.nodes]
            ck.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(60)
            admin = KafkaAdminClient(bootstrap_servers=boots[0], request_timeout_ms=60_000)

            producer = Producer(
                {"bootstrap.servers": boots[0], "enable.idempotence": True, "acks": "all"}
            )
            errors: list[str] = []
            sent = delivered = 0
            stop = threading.Event()

            def cb(err: Any, _msg: Any) -> None:
                nonlocal delivered
                if err is not None:
                    errors.append(str(err))
                else:
                    delivered += 1

            def produce() -> None:
                nonlocal sent
                while not stop.is_set():
                    try:
                        producer.produce(
                            TOPIC,
                            value=b"x" * 100,
                            partition=sent % args.partitions,
                            on_delivery=cb,
                        )
                    except BufferError:  # the client's queue is full: let it drain
                        producer.poll(0.05)
                        continue
                    sent += 1
                    producer.poll(0.0005)

            worker = threading.Thread(target=produce)
            worker.start()
            times: list[float] = []
            try:
                wait_until(lambda: delivered > 2000, timeout=60)
                for r in range(args.rounds):
                    now = _leaders(readers[0], args.partitions)
                    target = {p: ids[(ids.index(n) + 1) % len(ids)] for p, n in now.items()}
                    t0 = time.perf_counter()
                    answer = admin.alter_partition_reassignments(
                        {TopicPartition(TOPIC, p): [n] for p, n in target.items()}
                    )
                    refused = {tp: e for tp, e in answer.items() if e is not None}
                    assert not refused, list(refused.items())[:3]
                    answered = (time.perf_counter() - t0) * 1000
                    while admin.list_partition_reassignments():
                        time.sleep(0.01)
                    for reader in readers:
                        while _leaders(reader, args.partitions) != target:
                            time.sleep(0.01)
                    ms = (time.perf_counter() - t0) * 1000
                    times.append(ms)
                    print(
                        f"round {r + 1}: {args.partitions} partitions moved in {ms:.0f} ms "
                        f"(answered in {answered:.0f} ms; records delivered so far: {delivered})"
                    )
                    n = delivered
                    wait_until(lambda n=n: delivered > n + 1000, timeout=60)
            finally:
                stop.set()
                worker.join()
            left = producer.flush(60)
            admin.close()
            print(
                f"producer: {sent} records, {left} undelivered, {len(errors)} errors"
                + (f" (first: {errors[0]})" if errors else "")
            )
            if left or errors:
                raise SystemExit("the producer saw errors during the moves")
        finally:
            cluster.stop()
    print(f"reassign {args.partitions} partitions: {statistics.median(times):.0f} ms")


if __name__ == "__main__":
    main()
