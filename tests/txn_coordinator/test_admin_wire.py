"""Operating transactions over the Kafka protocol (KIP-664), on two running nodes (zones a
and b, in the test's process), as `kafka-transactions` does it: DescribeTransactions and
ListTransactions (state, producer id and duration filters; each node lists the shards
FindCoordinator sends its zone's clients to, so a zone's clients see each transaction
once), DescribeProducers (answered by the partition's real leader, over the leader RPC
when the client reached the other node), and WriteTxnMarkers' abort of a hanging
transaction, after which the last stable offset moves on.

The transactions are opened through the nodes' services (the client handlers are
another branch's), the hanging one as a producer of Produce v11 makes it with
`transaction.partition.verification.enable=false`: a transactional batch the
coordinator never heard of. Raw Kafka requests, read back as a client reads them.
Also: `producer.id.expiration.ms` honoured by a running node's leader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_producers.v0 import request as dp
from kio.schema.describe_transactions.v0 import request as dt
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v1 import request as lt
from kio.schema.write_txn_markers.v1 import request as wm

from tests.inprocess import start_inprocess_node
from tests.kafka_raw import RawConnection
from tests.txn_coordinator.test_node_wiring import _owned_as_told, _until
from zonegate.broker.node import Node
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.records.build import build_batch
from zonegate.transactions.states import TransactionVersion

pytestmark = pytest.mark.integration

E = ErrorCode
TV0 = TransactionVersion.TV_0


async def _hanging_batch(node: Node, stream_id: int, pid: int, epoch: int, ts: int) -> int:
    """A transactional batch of two records appended as the write path appends one (its
    bytes staged in the node's WAL, its summary to the leader), at Produce v11 with no
    transactional id to verify against: its offset."""
    data = build_batch(
        [(None, b"x", (), ts), (None, b"y", (), ts)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    loc = await node.wal.append(stream_id, data)
    (result,) = await node.leader.append(
        [
            AppendBatch(
                stream_id, ANY_EPOCH, loc.object_key, loc.position, loc.length, 2, ts,
                pid, epoch, 0, transactional=True, produce_version=11,
            )
        ]
    )  # fmt: skip
    assert result.error == E.none, result
    return result.base_offset


def _markers(pid: int, epoch: int, commit: bool, parts: dict[str, tuple[int, ...]]) -> Any:
    return wm.WriteTxnMarkersRequest(
        markers=(
            wm.WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=tuple(
                    wm.WritableTxnMarkerTopic(name=t, partition_indexes=ps)  # type: ignore[arg-type]
                    for t, ps in parts.items()
                ),
                coordinator_epoch=0,
            ),
        )
    )


def test_kafka_transactions_operations_over_the_wire(tmp_path: Path) -> None:
    node = start_inprocess_node(
        tmp_path / "data",
        [
            "--zones", "zone-a,zone-b",
            "--transaction-state-log-num-partitions", "5",
            "--transaction-partition-verification-enable", "false",
        ],
    )  # fmt: skip
    conns: list[RawConnection] = []
    try:
        a, b = node.nodes
        assert a.config.transaction_partition_verification_enable is False
        _until(lambda: _owned_as_told(a, b), "every shard held by its owner alone")
        topic = node.call(a.catalog.create("orders", 2, {}))
        node.call(b.catalog.refresh(force=True))
        leaders = {p.partition: p.leader_node for p in topic.partitions}
        assert set(leaders.values()) == {a.config.node_id, b.config.node_id}, leaders

        # An ongoing transaction the coordinator knows (through node a's services).
        async def ongoing() -> tuple[int, int]:
            init = await a.txns.init_producer_id("app", 60000, None)
            added = await a.txns.add_partitions(
                "app", init.producer_id, init.producer_epoch, [("orders", 0)], TV0
            )
            assert (init.error, added.error) == (E.none, E.none)
            return init.producer_id, init.producer_epoch

        pid, epoch = node.call(ongoing())
        to_a = RawConnection(a.port)
        to_b = RawConnection(b.port)
        conns += [to_a, to_b]

        described = to_a.request(
            dt.DescribeTransactionsRequest(transactional_ids=("app", "nobody"))  # type: ignore[arg-type]
        ).transaction_states
        app, nobody = described
        assert (app.error_code, app.transaction_state, app.producer_id, app.producer_epoch) == (
            E.none,
            "Ongoing",
            pid,
            epoch,
        )
        assert [(t.topic, list(t.partitions)) for t in app.topics] == [("orders", [0])]
        assert nobody.error_code == E.transactional_id_not_found

        def listed(conn: RawConnection, client_id: str, **filters: Any) -> list[tuple[str, str]]:
            answer = conn.request(lt.ListTransactionsRequest(**filters), client_id=client_id)
            assert answer.error_code == E.none, answer
            return [(t.transactional_id, t.transaction_state) for t in answer.transaction_states]

        # A zone-a client: node a lists every shard, node b none (FindCoordinator sends
        # zone-a clients to a); a zone-b client the other way round.
        za, zb = "admin,zonegate_az=zone-a", "admin,zonegate_az=zone-b"
        assert listed(to_a, za) == [("app", "Ongoing")] and listed(to_b, za) == []
        assert listed(to_b, zb) == [("app", "Ongoing")] and listed(to_a, zb) == []
        assert listed(to_a, za, state_filters=("Ongoing",), producer_id_filters=(pid,)) == [
            ("app", "Ongoing")
        ]
        assert listed(to_a, za, state_filters=("Empty",)) == []
        assert listed(to_a, za, producer_id_filters=(pid + 1,)) == []
        assert listed(to_a, za, duration_filter=3_600_000) == []

        # A hanging transaction at both partitions: a producer the coordinator never
        # heard of, at Produce v11 with verification off.
        ts = a.clock.wall_ms() - 20 * 60_000
        init = node.call(a.txns.init_producer_id(None, 60000, None))
        hung_pid, hung_epoch = init.producer_id, init.producer_epoch
        firsts = {
            p.partition: node.call(_hanging_batch(a, p.stream_id, hung_pid, hung_epoch, ts))
            for p in topic.partitions
        }
        sids = {p.partition: p.stream_id for p in topic.partitions}
        for i, sid in sids.items():
            assert node.call(a.leader.stable_offset(sid)) == firsts[i], "the LSO is held"

        # DescribeProducers, to node a for both partitions: one led by b is read there.
        answer = to_a.request(
            dp.DescribeProducersRequest(
                topics=(dp.TopicRequest(name="orders", partition_indexes=(0, 1)),)  # type: ignore[arg-type]
            )
        )
        for part in answer.topics[0].partitions:
            assert part.error_code == E.none, part
            (hung,) = [s for s in part.active_producers if s.producer_id == hung_pid]
            assert (
                hung.producer_epoch,
                hung.last_sequence,
                hung.last_timestamp,
                hung.coordinator_epoch,
                hung.current_txn_start_offset,
            ) == (hung_epoch, 1, ts, -1, firsts[part.partition_index])
        # The id is no transactional id's: find-hanging's ListTransactions finds none.
        assert listed(to_a, za, producer_id_filters=(hung_pid,)) == []

        # A client's commit marker is refused; the admin's abort is written at each
        # partition, through the node reached, and the LSO moves on.
        refused = to_a.request(_markers(hung_pid, hung_epoch, True, {"orders": (0, 1)}))
        assert [p.error_code for p in refused.markers[0].topics[0].partitions] == [
            E.invalid_request
        ] * 2
        aborted = to_b.request(_markers(hung_pid, hung_epoch, False, {"orders": (0, 1)}))
        (result,) = aborted.markers
        assert result.producer_id == hung_pid
        assert {(p.partition_index, p.error_code) for p in result.topics[0].partitions} == {
            (0, E.none),
            (1, E.none),
        }
        ends = {i: node.call(a.leader.offsets(sid))[1] for i, sid in sids.items()}
        for i, sid in sids.items():
            assert ends[i] == firsts[i] + 3, "two records and the marker"
            assert node.call(a.leader.stable_offset(sid)) == ends[i], "the LSO moved on"
        # Asked again, nothing is open any more: nothing written, NONE.
        again = to_a.request(_markers(hung_pid, hung_epoch, False, {"orders": (0,)}))
        assert again.markers[0].topics[0].partitions[0].error_code == E.none
        assert node.call(a.leader.offsets(sids[0]))[1] == ends[0]
    finally:
        for c in conns:
            c.close()
        node.stop()


def test_producer_ids_expire_at_the_leader_as_set(tmp_path: Path) -> None:
    """producer.id.expiration.ms and its check interval, honoured by a running node: an
    idle idempotent producer leaves DescribeProducers' answer; a producer with a
    transaction open stays."""
    node = start_inprocess_node(
        tmp_path / "data",
        [
            "--producer-id-expiration-ms", "1500",
            "--producer-id-expiration-check-interval-ms", "200",
            "--transaction-partition-verification-enable", "false",
        ],
    )  # fmt: skip
    conn = None
    try:
        a = node.nodes[0]
        topic = node.call(a.catalog.create("orders", 1, {}))
        sid = topic.partitions[0].stream_id
        idle = node.call(a.txns.init_producer_id(None, 60000, None)).producer_id
        hung = node.call(a.txns.init_producer_id(None, 60000, None)).producer_id
        now = a.clock.wall_ms()

        async def append(pid: int, transactional: bool) -> None:
            data = build_batch(
                [(None, b"x", (), now)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=transactional,
            )
            loc = await a.wal.append(sid, data)
            (r,) = await a.leader.append(
                [
                    AppendBatch(
                        sid, ANY_EPOCH, loc.object_key, loc.position, loc.length, 1, now,
                        pid, 0, 0, transactional=transactional, produce_version=11,
                    )
                ]
            )  # fmt: skip
            assert r.error == E.none, r

        node.call(append(idle, False))
        node.call(append(hung, True))
        conn = RawConnection(a.port)

        def producers() -> set[int]:
            answer = conn.request(
                dp.DescribeProducersRequest(
                    topics=(dp.TopicRequest(name="orders", partition_indexes=(0,)),)  # type: ignore[arg-type]
                )
            )
            part = answer.topics[0].partitions[0]
            assert part.error_code == E.none, part
            return {p.producer_id for p in part.active_producers}

        assert producers() == {idle, hung}
        _until(lambda: producers() == {hung}, "the idle producer id expired", timeout=20)
    finally:
        if conn is not None:
            conn.close()
        node.stop()
