"""The transaction coordinator as a running node wires it (broker/node.py), with Kafka's
transaction settings honoured: each node takes over the shards `txn_shard_owner` gives
it, a call made on one node is served by the owner over TxnCall, and a committed
transaction's markers go through the owner's WAL and the partitions' leaders, landing as
one-record control batches.

Two real nodes (zones a and b) in the test's process; no Kafka client yet: the
handlers are a later step, so the nodes' services are called directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from kio.schema.errors import ErrorCode

from tests.inprocess import start_inprocess_node
from zonegate.broker.metrics import node_registry
from zonegate.broker.node import Node
from zonegate.coordinator.service import OffsetToCommit
from zonegate.transactions.markers import decode_marker
from zonegate.transactions.states import TransactionVersion, shard_for

pytestmark = pytest.mark.integration

E = ErrorCode
TV2 = TransactionVersion.TV_2


def _until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout} s: {what}")
        time.sleep(0.1)


def _owned_as_told(a: Node, b: Node) -> bool:
    nodes = {a.config.node_id: a, b.config.node_id: b}
    for shard in range(a.txn_coordinator.config.shards):
        owner = a.cluster.txn_shard_owner(shard)
        if owner != b.cluster.txn_shard_owner(shard):
            return False
        for n in nodes.values():
            if (shard in n.txn_coordinator.hosts) != (n is nodes[owner]):
                return False
    return True


def test_a_node_takes_its_shards_and_a_commit_writes_markers_through_the_owners_wal(
    tmp_path: Path,
) -> None:
    node = start_inprocess_node(
        tmp_path / "data",
        [
            "--zones", "zone-a,zone-b",
            "--transaction-state-log-num-partitions", "7",
            "--transaction-max-timeout-ms", "90000",
            "--transaction-abort-timed-out-transaction-cleanup-interval-ms", "2000",
        ],
    )  # fmt: skip
    try:
        a, b = node.nodes
        _until(lambda: _owned_as_told(a, b), "every shard held by its owner alone")
        held = [len(n.txn_coordinator.hosts) for n in (a, b)]
        assert sum(held) == 7 and min(held) > 0, held
        assert a.txn_coordinator.config.abort_interval_ms == 2000
        # FindCoordinator for a transactional id names a node of the client's own zone,
        # which passes the calls on to the shard's owner.
        for shard in range(7):
            for zone, n in (("zone-a", a), ("zone-b", b)):
                found = a.cluster.txn_coordinator_for(shard, zone)
                assert found is not None and found.node_id == n.config.node_id
        # An id whose shard node b owns, asked on node a.
        tid = next(
            f"app-{i}"
            for i in range(1000)
            if a.cluster.txn_shard_owner(a.txn_coordinator.shard_of(f"app-{i}")) == b.config.node_id
        )
        topic = node.call(a.catalog.create("orders", 2, {}))
        node.call(b.catalog.refresh(force=True))

        async def transaction() -> tuple[int, int]:
            # transaction.max.timeout.ms caps what a producer may ask for.
            too_long = await a.txns.init_producer_id(tid, 90001, None)
            assert too_long.error == E.invalid_transaction_timeout, too_long
            init = await a.txns.init_producer_id(tid, 60000, None)
            assert init.error == E.none, init
            added = await a.txns.add_partitions(
                tid, init.producer_id, init.producer_epoch, [("orders", 0), ("orders", 1)], TV2
            )
            assert added.error == E.none, added
            ended = await a.txns.end_txn(tid, init.producer_id, init.producer_epoch, True, TV2)
            assert ended.error == E.none, ended
            return init.producer_id, ended.producer_epoch

        pid, epoch = node.call(transaction())

        def completed() -> bool:
            return b.txn_coordinator.describe(tid).state == "CompleteCommit"

        _until(completed, "the commit's markers written and the transaction completed")
        described = node.call(a.txns.describe(tid))
        assert (described.error, described.state) == (E.none, "CompleteCommit")
        for p in topic.partitions:
            idx = node.call(a.leader.read_index(p.stream_id, 0, 1 << 20))
            assert idx.high_watermark == 1, "the marker took one offset"
            e = idx.entries[0]
            data = node.call(a.store.get_range(e.object_key, e.position, e.length))
            m = decode_marker(data)
            assert (m.commit, m.producer_id, m.producer_epoch) == (True, pid, epoch)
            assert e.object_key.startswith(f"wal/{b.config.node_id}/"), "b's own WAL"
    finally:
        node.stop()


def test_a_read_committed_consumer_waits_out_an_offset_pending_in_a_transaction(
    tmp_path: Path,
) -> None:
    """OffsetFetch's require_stable (KIP-447), as librdkafka sends it under
    isolation.level=read_committed: UNSTABLE_OFFSET_COMMIT (which it retries) while the
    group's offset is pending in a transaction; the offset once the transaction commits.
    The offset is committed through the node's group service (no TxnOffsetCommit
    handler yet), its completion as the coordinator role writes it."""
    node = start_inprocess_node(tmp_path / "data")
    try:
        a = node.nodes[0]
        node.call(a.catalog.create("orders", 1, {}))
        errors = node.call(
            a.groups.txn_commit_offsets(
                "billing", 77, shard_for("billing", 50), -1, "", None,
                [OffsetToCommit("orders", 0, 7, -1, None)],
            )
        )  # fmt: skip
        assert errors == [E.none]

        def committed(isolation: str, timeout: float) -> int:
            c = Consumer(
                {
                    "bootstrap.servers": node.bootstrap,
                    "group.id": "billing",
                    "isolation.level": isolation,
                    "enable.auto.commit": False,
                }
            )
            try:
                (tp,) = c.committed([TopicPartition("orders", 0)], timeout=timeout)
                return int(tp.offset)
            finally:
                c.close()

        # read_uncommitted does not ask for stable offsets: none committed yet.
        assert committed("read_uncommitted", 20) < 0
        with pytest.raises(KafkaException):
            committed("read_committed", 3)  # UNSTABLE_OFFSET_COMMIT until it gives up
        node.call(a.meta.complete_txn_offsets(shard_for("billing", 50), 77, True))
        assert committed("read_committed", 20) == 7
    finally:
        node.stop()


def test_a_stopped_nodes_shards_move_to_the_live_node_with_their_transactions(
    tmp_path: Path,
) -> None:
    """A node that stops hands its shards over: the other takes them over by epoch at its
    next rebalance and loads their transactions, which it then serves."""
    node = start_inprocess_node(
        tmp_path / "data",
        ["--zones", "zone-a,zone-b", "--transaction-state-log-num-partitions", "7"],
    )
    try:
        a, b = node.nodes
        _until(lambda: _owned_as_told(a, b), "every shard held by its owner alone")
        tid = next(
            f"app-{i}"
            for i in range(1000)
            if a.cluster.txn_shard_owner(a.txn_coordinator.shard_of(f"app-{i}")) == b.config.node_id
        )
        node.call(a.catalog.create("orders", 1, {}))

        async def begin() -> int:
            init = await a.txns.init_producer_id(tid, 60000, None)
            added = await a.txns.add_partitions(
                tid, init.producer_id, init.producer_epoch, [("orders", 0)], TV2
            )
            assert added.error == E.none, added
            return init.producer_id

        pid = node.call(begin())
        shard = a.txn_coordinator.shard_of(tid)
        epoch = b.txn_coordinator.hosts[shard].epoch
        node.call(b.stop())
        _until(lambda: len(a.txn_coordinator.hosts) == 7, "the stopped node's shards taken over")
        assert a.txn_coordinator.hosts[shard].epoch > epoch

        async def scrape() -> dict[str, list[float]]:
            # On the node's loop: its collector reads state the loop changes.
            return {f.name: [s.value for s in f.samples] for f in node_registry(a).collect()}

        metrics = node.call(scrape())
        assert metrics["zonegate_txn_shards_held"] == [7]
        assert metrics["zonegate_txn_open_transactions"] == [1]
        described = node.call(a.txns.describe(tid))
        assert (described.error, described.state, described.producer_id) == (
            E.none, "Ongoing", pid,
        )  # fmt: skip
    finally:
        node.stop()
