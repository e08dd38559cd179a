"""Captures the golden transaction log of tests/transactions/golden/ from a real Apache Kafka.

Run by hand (`python -m tests.transactions.capture_golden`) when the pinned Kafka version
changes: it starts Apache Kafka (tests/apache_kafka.py), writes with confluent-kafka's
transactional producer one committed transaction of two records, one aborted of one
record, and a third committed one, then fetches the partition's raw bytes with
read_uncommitted and read_committed and stores the records blob and what each fetch
answered (LSO, aborted transactions). A second topic gets three transactions of
Kafka's own Java producer (kafka-producer-perf-test with a transactional id), which
speaks transaction.version 2: its markers carry the epoch bumped at each EndTxn.
tests/transactions/test_markers.py reads them.
"""

from __future__ import annotations

import datetime
import json
import tempfile
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.static.primitive import i8, i32, i32Timedelta, i64

from tests.apache_kafka import ApacheKafkaBroker
from tests.java_peer import KAFKA_VERSION, TOOLS, run_class
from tests.kafka_raw import RawConnection

GOLDEN = Path(__file__).resolve().parent / "golden"
TOPIC = "txn-golden"
JAVA_TOPIC = "txn-golden-java"


def _fetch(port: int, isolation: int, topic: str = TOPIC) -> Any:
    conn = RawConnection(port)
    try:
        req = FetchRequest(
            replica_id=i32(-1),  # type: ignore[arg-type]
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
            min_bytes=i32(1),
            max_bytes=i32(1 << 20),
            isolation_level=i8(isolation),
            session_id=i32(0),
            session_epoch=i32(-1),
            topics=(
                FetchTopic(
                    topic=topic,  # type: ignore[arg-type]
                    partitions=(
                        FetchPartition(
                            partition=i32(0),
                            current_leader_epoch=i32(-1),
                            fetch_offset=i64(0),
                            log_start_offset=i64(-1),
                            partition_max_bytes=i32(1 << 20),
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        return conn.request(req).responses[0].partitions[0]
    finally:
        conn.close()


def capture(broker: ApacheKafkaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "golden-tx"})
    p.init_transactions(30)
    for values, commit in (((b"a", b"b"), True), ((b"x",), False), ((b"c",), True)):
        p.begin_transaction()
        for v in values:
            p.produce(TOPIC, key=b"k", value=v)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    uncommitted, committed = _fetch(broker.port, 0), _fetch(broker.port, 1)
    GOLDEN.mkdir(exist_ok=True)
    (GOLDEN / "txn-log.bin").write_bytes(bytes(uncommitted.records))
    answers = {
        "kafka_version": KAFKA_VERSION,
        "high_watermark": uncommitted.high_watermark,
        "last_stable_offset": committed.last_stable_offset,
        "aborted_transactions": [
            [a.producer_id, a.first_offset] for a in committed.aborted_transactions
        ],
    }
    (GOLDEN / "txn-log.json").write_text(json.dumps(answers, indent=1) + "\n")
    admin.create_topics([NewTopic(JAVA_TOPIC, 1, 1)])[JAVA_TOPIC].result(30)
    perf = [
        "--topic", JAVA_TOPIC, "--num-records", "3", "--record-size", "8",
        "--throughput", "1", "--transactional-id", "golden-java",
        "--transaction-duration-ms", "1",
        "--producer-props", f"bootstrap.servers={broker.bootstrap}",
    ]  # fmt: skip
    run_class(TOOLS["kafka-producer-perf-test"], perf, check=True)
    java = _fetch(broker.port, 0, JAVA_TOPIC)
    (GOLDEN / "txn-log-java.bin").write_bytes(bytes(java.records))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = ApacheKafkaBroker(Path(tmp)).start()
        try:
            capture(broker)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
