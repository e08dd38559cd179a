"""DescribeTransactions, ListTransactions, DescribeProducers and WriteTxnMarkers (KIP-664)
as bytes: each request encoded as Kafka's admin client sends it, decoded as the node does,
handled, and the answer read back. Every version Kafka 3.9 accepts; the filters passed
through as asked (v1's duration filter, -1 at v0); Kafka 4's ACL checks by the real
authorizer over ACLs in a SQLite metadata store. No network, no sleeps: the transaction
service is a small stand-in recording what it was asked (services/txn_admin.py has its
own tests, and the in-process node's test runs the real one)."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_producers.v0 import request as dp
from kio.schema.describe_transactions.v0 import request as dt
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v0 import request as lt0
from kio.schema.list_transactions.v1 import request as lt1
from kio.schema.write_txn_markers.v1 import request as wm1

from zonegate.leader_forwarder.messages import ActiveProducer
from zonegate.metastore.api import open_metastore
from zonegate.metastore.models import (
    AclBinding,
    AclOperation,
    AclPermission,
    PartitionInfo,
    PatternType,
    ResourceType,
    TopicInfo,
)
from zonegate.proxy.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    response_type,
)
from zonegate.proxy.context import ClientInfo, RequestContext
from zonegate.proxy.handlers import (
    describe_producers,
    describe_transactions,
    list_transactions,
    write_txn_markers,
)
from zonegate.proxy.legacy_schema import payload_module
from zonegate.proxy.registry import REGISTRY
from zonegate.runtime.clock import ManualClock
from zonegate.services.authorizer import AuthorizerService
from zonegate.transactions.coordinator_core import TxnDescription, TxnListing

pytestmark = pytest.mark.unit

E = ErrorCode
HANDLERS = {
    27: write_txn_markers.handle,
    61: describe_producers.handle,
    65: describe_transactions.handle,
    66: list_transactions.handle,
}


def _topic(name: str, partitions: int) -> TopicInfo:
    tid = uuid.uuid5(uuid.NAMESPACE_DNS, name)
    return TopicInfo(
        tid,
        name,
        tuple(
            PartitionInfo(tid, name, i, stream_id=i, leader_node=1, leader_epoch=1)
            for i in range(partitions)
        ),
    )


class _Topics:
    def __init__(self, *topics: TopicInfo) -> None:
        self._by_name = {t.name: t for t in topics}

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)


class _TxnAdmin:
    """What the handlers ask of the transaction service, and canned answers."""

    def __init__(self) -> None:
        self.asked: list[tuple[Any, ...]] = []
        self.listing: tuple[ErrorCode, list[TxnListing], list[str]] = (E.none, [], [])

    async def describe(self, transactional_id: str) -> TxnDescription:
        self.asked.append(("describe", transactional_id))
        if transactional_id != "app":
            return TxnDescription(transactional_id, E.transactional_id_not_found)
        return TxnDescription(
            "app",
            E.none,
            "Ongoing",
            42,
            3,
            60000,
            1_700_000_000_123,
            frozenset({("orders", 1), ("orders", 0), ("secret", 0)}),
        )

    async def list_transactions(
        self,
        zone: str,
        listener: str | None,
        producer_ids: list[int],
        state_names: list[str],
        min_duration_ms: int,
    ) -> tuple[ErrorCode, list[TxnListing], list[str]]:
        self.asked.append(("list", zone, listener, producer_ids, state_names, min_duration_ms))
        return self.listing

    async def producers(self, topic: str, partition: int) -> tuple[ErrorCode, list[Any]]:
        self.asked.append(("producers", topic, partition))
        if partition == 9:
            return E.not_leader_or_follower, []
        return E.none, [ActiveProducer(42, 3, 17, 1_700_000_000_000, 5, 120)]

    async def abort(
        self, producer_id: int, epoch: int, coordinator_epoch: int, parts: list[Any]
    ) -> dict[Any, ErrorCode]:
        self.asked.append(("abort", producer_id, epoch, coordinator_epoch, list(parts)))
        return {tp: E.invalid_producer_epoch if tp[1] == 1 else E.none for tp in parts}


class _Services:
    def __init__(self, authorizer: AuthorizerService) -> None:
        self.topics = _Topics(_topic("orders", 3), _topic("secret", 1))
        self.authorizer = authorizer
        self.txn_admin = _TxnAdmin()


def _open() -> _Services:
    return _Services(AuthorizerService(None, ManualClock(), enabled=False))


async def _exchange(services: _Services, request: Any, principal: str = "User:ANONYMOUS") -> Any:
    frame = encode_request(9, "t", request)[4:]
    header, offset = peek_header(frame)
    decoded = decode_request(frame, header, offset)
    ctx = RequestContext(
        services=services,  # type: ignore[arg-type]
        principal=principal,
        listener="PLAINTEXT",
        client=ClientInfo("127.0.0.1", 1, 1),
        client_zone="zone-a",
        api_key=header.api_key,
        api_version=header.api_version,
        correlation_id=9,
        client_id="t",
        request_bytes=len(frame),
    )
    answer = await HANDLERS[header.api_key](ctx, decoded.body)
    out = encode_response(9, header.api_key, answer)[4:]
    _, back = decode_response(out, response_type(header.api_key, header.api_version))
    return back


def _run(services: _Services, request: Any, principal: str = "User:ANONYMOUS") -> Any:
    return asyncio.run(_exchange(services, request, principal))


def test_every_version_kafka_3_9_accepts_is_served() -> None:
    served = {k: REGISTRY.lookup(k) for k in HANDLERS}
    assert {k: (r.min_version, r.max_version) for k, r in served.items() if r} == {
        27: (0, 1),
        61: (0, 0),
        65: (0, 0),
        66: (0, 1),
    }


def test_describe_transactions_answers_the_coordinators_state() -> None:
    s = _open()
    answer = _run(s, dt.DescribeTransactionsRequest(transactional_ids=("app", "gone")))  # type: ignore[arg-type]
    app, gone = answer.transaction_states
    assert (app.error_code, app.transactional_id, app.transaction_state) == (
        E.none,
        "app",
        "Ongoing",
    )
    assert (app.producer_id, app.producer_epoch) == (42, 3)
    assert app.transaction_timeout == datetime.timedelta(milliseconds=60000)
    assert app.transaction_start_time == datetime.datetime.fromtimestamp(
        1_700_000_000.123, datetime.UTC
    )
    assert [(t.topic, list(t.partitions)) for t in app.topics] == [
        ("orders", [0, 1]),
        ("secret", [0]),
    ]
    # An unknown id: Kafka's defaults for the rest of the entry.
    assert (gone.error_code, gone.transaction_state, gone.producer_id) == (
        E.transactional_id_not_found,
        "",
        0,
    )
    assert gone.transaction_start_time == datetime.datetime.fromtimestamp(0, datetime.UTC)
    assert s.txn_admin.asked == [("describe", "app"), ("describe", "gone")]


def test_an_empty_transactions_start_time_of_minus_one_is_kept() -> None:
    """An id with no transaction open answers Kafka's txnStartTimestamp -1."""
    t = describe_transactions.start_time(-1)
    assert round(t.timestamp() * 1000) == -1


def test_list_transactions_passes_the_filters_v0_without_a_duration() -> None:
    s = _open()
    s.txn_admin.listing = (E.none, [TxnListing("app", 42, "Ongoing")], ["Bogus"])
    v0 = _run(
        s,
        lt0.ListTransactionsRequest(state_filters=("Ongoing", "Bogus"), producer_id_filters=(42,)),  # type: ignore[arg-type]
    )
    assert v0.error_code == E.none and list(v0.unknown_state_filters) == ["Bogus"]
    assert [
        (t.transactional_id, t.producer_id, t.transaction_state) for t in v0.transaction_states
    ] == [("app", 42, "Ongoing")]
    v1 = _run(s, lt1.ListTransactionsRequest(duration_filter=5000))  # type: ignore[arg-type]
    assert len(v1.transaction_states) == 1
    assert s.txn_admin.asked == [
        ("list", "zone-a", "PLAINTEXT", [42], ["Ongoing", "Bogus"], -1),
        ("list", "zone-a", "PLAINTEXT", [], [], 5000),
    ]


def test_list_transactions_error_is_answered_as_is() -> None:
    s = _open()
    s.txn_admin.listing = (E.coordinator_load_in_progress, [], [])
    answer = _run(s, lt1.ListTransactionsRequest())
    assert answer.error_code == E.coordinator_load_in_progress
    assert answer.transaction_states == ()


def test_describe_producers_per_partition() -> None:
    s = _open()
    answer = _run(
        s,
        dp.DescribeProducersRequest(
            topics=(
                dp.TopicRequest(name="orders", partition_indexes=(0, 9)),  # type: ignore[arg-type]
                dp.TopicRequest(name="nope", partition_indexes=(0,)),  # type: ignore[arg-type]
                dp.TopicRequest(name="bad/name", partition_indexes=(1, 2)),  # type: ignore[arg-type]
            )
        ),
    )
    orders, nope, bad = answer.topics
    ok, moved = orders.partitions
    assert (ok.partition_index, ok.error_code) == (0, E.none)
    (p,) = ok.active_producers
    assert (
        p.producer_id,
        p.producer_epoch,
        p.last_sequence,
        p.last_timestamp,
        p.coordinator_epoch,
        p.current_txn_start_offset,
    ) == (42, 3, 17, 1_700_000_000_000, 5, 120)
    assert (moved.partition_index, moved.error_code, moved.active_producers) == (
        9,
        E.not_leader_or_follower,
        (),
    )
    assert [(x.partition_index, x.error_code) for x in nope.partitions] == [
        (0, E.unknown_topic_or_partition)
    ]
    assert [(x.partition_index, x.error_code) for x in bad.partitions] == [
        (1, E.invalid_topic_exception),
        (2, E.invalid_topic_exception),
    ]
    assert bad.partitions[0].error_message
    assert s.txn_admin.asked == [("producers", "orders", 0), ("producers", "orders", 9)]


def _markers(version: int, *markers: tuple[int, int, bool, dict[str, tuple[int, ...]], int]) -> Any:
    m: Any = wm1 if version == 1 else payload_module(27, 0)
    return m.WriteTxnMarkersRequest(
        markers=tuple(
            m.WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=tuple(
                    m.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in topics.items()
                ),
                coordinator_epoch=ce,
            )
            for pid, epoch, commit, topics, ce in markers
        )
    )


def _results(answer: Any) -> dict[int, dict[tuple[str, int], ErrorCode]]:
    return {
        m.producer_id: {
            (t.name, p.partition_index): p.error_code for t in m.topics for p in t.partitions
        }
        for m in answer.markers
    }


@pytest.mark.parametrize("version", [0, 1])
def test_write_txn_markers_aborts_and_refuses_a_commit(version: int) -> None:
    s = _open()
    answer = _run(
        s,
        _markers(
            version,
            (42, 3, False, {"orders": (0, 1)}, 5),
            (7, 0, True, {"orders": (2,)}, 0),
        ),
    )
    assert _results(answer) == {
        42: {("orders", 0): E.none, ("orders", 1): E.invalid_producer_epoch},
        7: {("orders", 2): E.invalid_request},
    }
    assert s.txn_admin.asked == [("abort", 42, 3, 5, [("orders", 0), ("orders", 1)])]


def test_kafka_4s_acl_checks(tmp_path: Path) -> None:
    """DESCRIBE on a transactional id (Describe/ListTransactions, the transaction's topics
    filtered by DESCRIBE), READ on a topic (DescribeProducers), ALTER or CLUSTER_ACTION on
    the cluster (WriteTxnMarkers), as Kafka 4's KafkaApis."""

    def allow(rtype: ResourceType, name: str, op: AclOperation, who: str) -> AclBinding:
        return AclBinding(rtype, name, PatternType.LITERAL, who, "*", op, AclPermission.ALLOW)

    async def body() -> None:
        store = open_metastore(f"sqlite:///{tmp_path / 'meta.db'}")
        try:
            authorizer = AuthorizerService(store, ManualClock(), enabled=True)
            await authorizer.create_acls(
                [
                    allow(ResourceType.TRANSACTIONAL_ID, "app", AclOperation.DESCRIBE, "User:ops"),
                    allow(ResourceType.TOPIC, "orders", AclOperation.READ, "User:ops"),
                    allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER, "User:admin"),
                    allow(
                        ResourceType.CLUSTER,
                        "kafka-cluster",
                        AclOperation.CLUSTER_ACTION,
                        "User:broker",
                    ),
                ]
            )
            s = _Services(authorizer)
            s.txn_admin.listing = (
                E.none,
                [TxnListing("app", 42, "Ongoing"), TxnListing("other", 43, "Empty")],
                [],
            )
            described = await _exchange(
                s,
                dt.DescribeTransactionsRequest(transactional_ids=("app", "other")),  # type: ignore[arg-type]
                "User:ops",
            )
            app, other = described.transaction_states
            # READ on orders implies DESCRIBE; secret is left out of the transaction's topics.
            assert [t.topic for t in app.topics] == ["orders"]
            assert other.error_code == E.transactional_id_authorization_failed
            listed = await _exchange(s, lt1.ListTransactionsRequest(), "User:ops")
            assert [t.transactional_id for t in listed.transaction_states] == ["app"]
            producers = await _exchange(
                s,
                dp.DescribeProducersRequest(
                    topics=(
                        dp.TopicRequest(name="orders", partition_indexes=(0,)),  # type: ignore[arg-type]
                        dp.TopicRequest(name="secret", partition_indexes=(0,)),  # type: ignore[arg-type]
                    )
                ),
                "User:ops",
            )
            assert [t.partitions[0].error_code for t in producers.topics] == [
                E.none,
                E.topic_authorization_failed,
            ]
            abort = _markers(1, (42, 3, False, {"orders": (0,)}, 5))
            refused = await _exchange(s, abort, "User:ops")
            assert _results(refused) == {42: {("orders", 0): E.cluster_authorization_failed}}
            for who in ("User:admin", "User:broker"):
                assert _results(await _exchange(s, abort, who)) == {42: {("orders", 0): E.none}}
            assert [a[0] for a in s.txn_admin.asked].count("abort") == 2
        finally:
            await store.close()

    asyncio.run(body())
