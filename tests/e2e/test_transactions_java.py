"""Transactions with Apache Kafka 4.3.1's Java client (tests/java/src/.../TxnDriver.java).

The Java client reads the `transaction.version` feature zonegate finalizes at 2 and so
speaks KIP-890 part 2: EndTxn v5 (the epoch bumped at every transaction), Produce v12
and TxnOffsetCommit v5 (partitions added by the broker for it, no AddOffsetsToTxn).
Shown: consume-transform-produce with offsets sent to the transaction (committed,
aborted, committed again), read back with read_committed by librdkafka too, and a zombie
fenced by a new producer of its transactional id, the zombie's error the one Apache
Kafka 4.3.1 gives (tests/apache_kafka.py's broker is the oracle).
"""

from __future__ import annotations

import pytest

from tests import java_peer
from tests.apache_kafka import ApacheKafkaBroker
from tests.e2e import clients
from tests.e2e.test_transactions import _group_offsets, _read, _values
from tests.node_harness import RunningNode

pytestmark = pytest.mark.e2e


def test_java_consume_transform_produce(session_node: RunningNode) -> None:
    bootstrap = session_node.bootstrap
    source, sink, group = "jtxn-in", "jtxn-out", "jtxn-group"
    clients.ck_create_topic(bootstrap, source, 1)
    clients.ck_create_topic(bootstrap, sink, 1)
    feed = [(None, b"r%d" % i) for i in range(10)]
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for key, value in feed:
        p.produce(source, key=key, value=value, partition=0)
    p.flush(30)
    proc = java_peer.run_class(
        "zonegate.javapeer.TxnDriver", ["txn", bootstrap, source, sink, group, "jtxn-id"],
        check=True,
    )  # fmt: skip
    lines = java_peer.json_lines(proc.stdout)
    assert lines == [
        {"op": "commit", "offset": 5},
        {"op": "abort", "offset": 10},
        {"op": "commit", "offset": 10},
        {"op": "committed", "offset": 10},
    ]
    clients.wait_until(
        "the committed offset", lambda: _group_offsets(bootstrap, group, source) == 10
    )
    assert _values(_read(bootstrap, sink, 1, "read_committed", until=10)) == sorted(
        b"out-r%d" % i for i in range(10)
    )
    # The aborted five are in the log; read_uncommitted sees them.
    assert len(_read(bootstrap, sink, 1, "read_uncommitted", until=15)) == 15


def _fence(bootstrap: str) -> list[dict[str, object]]:
    topic = "jtxn-fence"
    clients.ck_create_topic(bootstrap, topic, 1)
    proc = java_peer.run_class(
        "zonegate.javapeer.TxnDriver", ["fence", bootstrap, topic, "jtxn-fence-id"], check=True
    )
    assert _values(_read(bootstrap, topic, 1, "read_committed", until=1)) == [b"fresh"]
    return java_peer.json_lines(proc.stdout)


def test_java_zombie_is_fenced_as_by_kafka(
    session_node: RunningNode, apache_kafka: ApacheKafkaBroker
) -> None:
    """The zombie's next write is refused (its epoch is older than the abort marker's),
    and its transaction cannot commit; Apache Kafka 4.3.1 answers the same."""
    ours, kafka = _fence(session_node.bootstrap), _fence(apache_kafka.bootstrap)
    assert ours[0] == {"op": "fresh", "ok": True}
    assert ours[1]["op"] == "zombie" and ours[1]["ok"] is False
    assert ours == kafka
