"""A transaction whose coordinator's node, or a partition leader's, dies (kill -9) while it
is open: three nodes in three zones, separate processes. The producer (confluent-kafka,
through a node of its own zone) commits once the dead node's shards or partitions have
moved to a live node; whatever the client is told, the transaction is then all there or
not at all for read_committed, and the last stable offset moves on (the reader reaches
the end), as issue 27 asks.
"""

from __future__ import annotations

import sqlite3
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


def _leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    """Each partition's leading node, as the metadata store has it (a client is told a
    node of its own zone instead)."""
    with sqlite3.connect(cluster.root / "meta.db") as db:
        rows = db.execute(
            "SELECT p.partition, p.leader_node FROM partitions p JOIN topics t "
            "ON t.topic_id = p.topic_id WHERE t.name = ?",
            (topic,),
        ).fetchall()
    return {int(p): int(n) for p, n in rows}


@pytest.mark.parametrize("victim", ["coordinator", "leader"])
def test_node_killed_mid_transaction(cluster: Cluster, victim: str) -> None:
    from confluent_kafka import KafkaException

    ids = [n.node_id for n in cluster.nodes]
    first = cluster.in_zone("zone-a")[0]
    bootstrap, topic = first.bootstrap, f"txn-failover-{victim}"
    clients.ck_create_topic(bootstrap, topic, 3)
    if victim == "coordinator":
        dead = cluster.in_zone("zone-c")[0].node_id
    else:  # a partition led by another node than the client's
        dead = next(n for n in sorted(_leaders(cluster, topic).values()) if n != first.node_id)
    # The id's shard is coordinated by the node killed, or (leader) by neither that node
    # nor the client's; the client talks to zone-a's node.
    others = [i for i in ids if i not in (dead, first.node_id)]
    coordinator = dead if victim == "coordinator" else others[0]
    tid = next(
        t
        for t in (f"failover-{i}" for i in range(1000))
        if choose_node(TXN_STATE, shard_for(t, 50), ids) == coordinator
    )
    p = _producer(bootstrap, tid, **{"transaction.timeout.ms": 60000})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, value=b"a%d" % i, partition=i % 3)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, value=b"b%d" % i, partition=i % 3)
    p.flush(60)
    next(n for n in cluster.nodes if n.node_id == dead).kill9()
    committed: bool
    try:
        p.commit_transaction(90)
        committed = True
    except KafkaException as exc:
        error: Any = exc.args[0]
        assert not error.fatal(), error
        p.abort_transaction(90)
        committed = False
    first_txn = [b"a%d" % i for i in range(12)]
    second_txn = [b"b%d" % i for i in range(12)]
    expected = sorted(first_txn + (second_txn if committed else []))
    # All or nothing, and the reader reaches the end: the LSO moved past the transaction.
    assert _values(_read(bootstrap, topic, 3, "read_committed", until=len(expected))) == expected
    # The producer goes on with a new transaction, through the moved coordinator.
    p.begin_transaction()
    p.produce(topic, value=b"c", partition=0)
    p.commit_transaction(60)
    assert _values(_read(bootstrap, topic, 3, "read_committed", until=len(expected) + 1)) == sorted(
        [*expected, b"c"]
    )
