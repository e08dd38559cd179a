"""A transaction whose coordinator's node dies (kill -9) while it is open: three nodes in
three zones, separate processes. The producer (confluent-kafka, through a node of its own
zone) commits once its coordinator's shard has moved to a live node; whatever the client
is told, the transaction is then all there or not at all for read_committed, and the last
stable offset moves on (the reader reaches the end), as issue 27 asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster_harness import Cluster, start_cluster
from tests.e2e import clients
from tests.e2e.test_transactions import _producer, _read, _values
from zonegate.router.rendezvous import choose_node
from zonegate.services.cluster import TXN_STATE
from zonegate.transactions.states import shard_for

pytestmark = pytest.mark.e2e

ZONES = ["zone-a", "zone-b", "zone-c"]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = start_cluster(tmp_path / "cluster", ZONES, 1, ("--group-initial-rebalance-delay-ms", "0"))
    yield c
    c.stop()


def test_coordinator_killed_mid_transaction(cluster: Cluster) -> None:
    from confluent_kafka import KafkaException

    ids = [n.node_id for n in cluster.nodes]
    first = cluster.in_zone("zone-a")[0]
    # An id whose shard the zone-c node coordinates; the client talks to zone-a's node.
    tid = next(
        t
        for t in (f"failover-{i}" for i in range(1000))
        if choose_node(TXN_STATE, shard_for(t, 50), ids) == cluster.in_zone("zone-c")[0].node_id
    )
    bootstrap, topic = first.bootstrap, "txn-failover"
    clients.ck_create_topic(bootstrap, topic, 2)
    p = _producer(bootstrap, tid, **{"transaction.timeout.ms": 60000})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"a%d" % i, partition=i % 2)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"b%d" % i, partition=i % 2)
    p.flush(60)
    cluster.in_zone("zone-c")[0].kill9()
    committed: bool
    try:
        p.commit_transaction(90)
        committed = True
    except KafkaException as exc:
        error: Any = exc.args[0]
        assert not error.fatal(), error
        p.abort_transaction(90)
        committed = False
    first_txn = [b"a%d" % i for i in range(10)]
    second_txn = [b"b%d" % i for i in range(10)]
    expected = sorted(first_txn + (second_txn if committed else []))
    # All or nothing, and the reader reaches the end: the LSO moved past the transaction.
    assert _values(_read(bootstrap, topic, 2, "read_committed", until=len(expected))) == expected
    # The producer goes on with a new transaction, through the moved coordinator.
    p.begin_transaction()
    p.produce(topic, value=b"c", partition=0)
    p.commit_transaction(60)
    assert _values(_read(bootstrap, topic, 2, "read_committed", until=len(expected) + 1)) == sorted(
        [*expected, b"c"]
    )
