"""Apache Kafka 4.3.1's `kafka-transactions.sh` (TransactionsCommand) against a zonegate
node, its output read as an operator reads it: `list`, `describe-producers`,
`find-hanging` and `abort --start-offset` of a hanging transaction, after which the
partition's last stable offset moves on and find-hanging finds nothing.

The hanging transaction is made as a Produce v11 producer makes one with
`transaction.partition.verification.enable=false`: a transactional batch its coordinator
never heard of, 20 minutes old (find-hanging's default bound is 15), appended through the
node's WAL and leader in the test's process. An ongoing transaction the coordinator knows
is opened through the node's services. (`describe` needs FindCoordinator for
transactional ids, which the client handlers bring.)
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests import java_peer
from tests.inprocess import start_inprocess_node
from tests.txn_coordinator.test_admin_wire import _hanging_batch
from zonegate.transactions.states import TransactionVersion

pytestmark = pytest.mark.e2e

E = ErrorCode


def _table(text: str) -> list[list[str]]:
    """A prettyPrintTable's rows (the header first), split on whitespace."""
    return [line.split() for line in text.splitlines() if line.strip()]


def test_list_describe_producers_find_hanging_and_abort(tmp_path: Path) -> None:
    node = start_inprocess_node(
        tmp_path / "data",
        [
            "--transaction-state-log-num-partitions", "5",
            "--transaction-partition-verification-enable", "false",
        ],
    )  # fmt: skip
    try:
        a = node.nodes[0]
        bootstrap = f"127.0.0.1:{a.port}"
        topic = node.call(a.catalog.create("orders", 1, {}))
        sid = topic.partitions[0].stream_id

        async def opened() -> tuple[int, int, int]:
            await a.txn_coordinator.rebalance()
            init = await a.txns.init_producer_id("app", 60000, None)
            added = await a.txns.add_partitions(
                "app",
                init.producer_id,
                init.producer_epoch,
                [("orders", 0)],
                TransactionVersion.TV_0,
            )
            assert (init.error, added.error) == (E.none, E.none)
            hung = await a.txns.init_producer_id(None, 60000, None)
            return init.producer_id, hung.producer_id, hung.producer_epoch

        app_pid, pid, epoch = node.call(opened())
        old = int(time.time() * 1000) - 20 * 60_000
        first = node.call(_hanging_batch(a, sid, pid, epoch, old))

        def tx(*args: str, check: bool = True) -> str:
            return java_peer.tool(
                "kafka-transactions", "--bootstrap-server", bootstrap, *args, check=check
            ).stdout

        listed = _table(tx("list"))
        assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        assert listed[1:] == [["app", str(a.config.node_id), str(app_pid), "Ongoing"]]

        described = _table(tx("describe", "--transactional-id", "app"))
        assert described[0][:4] == [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
        ], described
        assert described[1][:4] == [str(a.config.node_id), "app", str(app_pid), "0"], described
        assert "Ongoing" in described[1] and "orders-0" in described[1], described

        producers = _table(tx("describe-producers", "--topic", "orders", "--partition", "0"))
        assert producers[0] == [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ]
        assert [str(pid), str(epoch), "-1", "1", str(old), str(first)] in producers[1:]

        hanging = _table(tx("find-hanging", "--topic", "orders"))
        assert hanging[0][:3] == ["Topic", "Partition", "ProducerId"]
        assert [r[:6] for r in hanging[1:]] == [
            ["orders", "0", str(pid), str(epoch), "-1", str(first)]
        ]
        assert node.call(a.leader.stable_offset(sid)) == first, "the LSO is held"

        tx("abort", "--topic", "orders", "--partition", "0", "--start-offset", str(first))
        hwm = node.call(a.leader.offsets(sid))[1]
        assert hwm == first + 3, "two records and the abort marker"
        assert node.call(a.leader.stable_offset(sid)) == hwm, "the LSO moved on"
        assert _table(tx("find-hanging", "--topic", "orders"))[1:] == []
        # Nothing open at that offset any more: the tool says so and fails.
        again = java_peer.tool(
            "kafka-transactions",
            "--bootstrap-server", bootstrap,
            "abort", "--topic", "orders", "--partition", "0", "--start-offset", str(first),
            check=False,
        )  # fmt: skip
        assert again.returncode != 0
        assert "Could not find any open transactions starting at offset" in again.stderr
    finally:
        node.stop()
