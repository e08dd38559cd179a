"""DescribeTopicPartitions (key 75) as bytes: each request encoded as Kafka's admin client
sends it, decoded as the node does, handled, and the answer read back: pages cut by
`response_partition_limit` and resumed at the cursor as Kafka's KRaftMetadataCache cuts
them, every topic or the named ones, unknown and invalid names, refused cursors, and
TOPIC DESCRIBE checked by the real authorizer over ACLs in a SQLite metadata store
(refused names answered, refused topics hidden from a listing). No network, no sleeps:
the catalog and the cluster view are small stand-ins (one node leads everything)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

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
from zonegate.proxy.handlers import describe_topic_partitions
from zonegate.proxy.registry import REGISTRY
from zonegate.runtime.clock import ManualClock
from zonegate.services.acl_engine import all_operations, bit_field
from zonegate.services.authorizer import AuthorizerService

pytestmark = pytest.mark.unit

ZERO = None  # the zero topic id, as kio reads it
TOPIC_OPS = all_operations(ResourceType.TOPIC)


def _topic(name: str, partitions: int) -> TopicInfo:
    tid = uuid.uuid5(uuid.NAMESPACE_DNS, name)
    return TopicInfo(
        tid,
        name,
        tuple(
            PartitionInfo(tid, name, i, stream_id=i, leader_node=100 + i, leader_epoch=7)
            for i in range(partitions)
        ),
    )


class _Catalog:
    def __init__(self, *topics: TopicInfo) -> None:
        self._by_name = {t.name: t for t in topics}

    def topics(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    async def lookup(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)


class _Cluster:
    """Routing off: the real leaders, as a one-zone cluster answers."""

    def rewrites(self, zone: str, listener: str | None = None) -> bool:
        return False

    async def check_zone(self, zone: str) -> None:
        """One zone: no other zone's nodes to probe."""

    def leader_for(self, p: PartitionInfo, zone: str, listener: str | None = None) -> int:
        return p.leader_node

    def leaders_for(self, zone: str, listener: str | None = None) -> Callable[[PartitionInfo], int]:
        return lambda p: p.leader_node


Nodes = tuple[int, ...]


class _Leadership:
    def replicas(self, p: PartitionInfo) -> tuple[Nodes, Nodes, Nodes]:
        return (p.leader_node,), (p.leader_node,), ()


class _Services:
    def __init__(self, catalog: _Catalog, authorizer: AuthorizerService) -> None:
        self.topics = catalog
        self.cluster = _Cluster()
        self.leadership = _Leadership()
        self.authorizer = authorizer


CATALOG = _Catalog(_topic("a", 3), _topic("b", 2), _topic("c", 1))


def _open() -> AuthorizerService:
    return AuthorizerService(None, ManualClock(), enabled=False)


async def _exchange(services: _Services, request: Any, principal: str = "User:ANONYMOUS") -> Any:
    """The request through the codec, the handler and back, as a client reads it."""
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
    answer = await describe_topic_partitions.handle(ctx, decoded.body)
    out = encode_response(9, header.api_key, answer)[4:]
    _, back = decode_response(out, response_type(header.api_key, header.api_version))
    return back


def _ask(
    names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> DescribeTopicPartitionsRequest:
    return DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=n) for n in names),  # type: ignore[arg-type]
        response_partition_limit=i32(limit),
        cursor=None
        if cursor is None
        else Cursor(topic_name=cursor[0], partition_index=i32(cursor[1])),  # type: ignore[arg-type]
    )


def _page(answer: Any) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    """(name, error, partition indexes) per topic, and the next cursor."""
    topics = [
        (t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in answer.topics
    ]
    c = answer.next_cursor
    return topics, None if c is None else (c.topic_name, c.partition_index)


def _run(services: _Services, request: Any, principal: str = "User:ANONYMOUS") -> Any:
    return asyncio.run(_exchange(services, request, principal))


OK = ErrorCode.none


def test_served_and_advertised_at_v0_only() -> None:
    reg = REGISTRY.lookup(75)
    assert reg is not None and (reg.min_version, reg.max_version) == (0, 0)


def test_pages_follow_the_cursor_as_kafka_cuts_them() -> None:
    services = _Services(CATALOG, _open())
    # The admin client sorts its names; the node sorts them too.
    assert _page(_run(services, _ask(["c", "a", "b"], limit=2))) == ([("a", OK, [0, 1])], ("a", 2))
    assert _page(_run(services, _ask(["a", "b", "c"], limit=2, cursor=("a", 2)))) == (
        [("a", OK, [2]), ("b", OK, [0])],
        ("b", 1),
    )
    # The last page: the limit used up by the last partition, nothing after it: no cursor.
    assert _page(_run(services, _ask(["b", "c"], limit=2, cursor=("b", 1)))) == (
        [("b", OK, [1]), ("c", OK, [0])],
        None,
    )
    # The limit used up exactly by a topic: the next one is not answered, the cursor
    # points at its partition 0.
    assert _page(_run(services, _ask(["a", "b"], limit=3))) == ([("a", OK, [0, 1, 2])], ("b", 0))
    # A limit below 1 counts as 1; a cursor past a topic's end answers it without partitions.
    assert _page(_run(services, _ask(["b"], limit=0))) == ([("b", OK, [0])], ("b", 1))
    assert _page(_run(services, _ask(["b", "c"], cursor=("b", 9)))) == (
        [("b", OK, []), ("c", OK, [0])],
        None,
    )


def test_every_topic_from_the_cursor_on_when_none_is_named() -> None:
    services = _Services(CATALOG, _open())
    assert _page(_run(services, _ask([]))) == (
        [("a", OK, [0, 1, 2]), ("b", OK, [0, 1]), ("c", OK, [0])],
        None,
    )
    assert _page(_run(services, _ask([], limit=2, cursor=("b", 1)))) == (
        [("b", OK, [1]), ("c", OK, [0])],
        None,
    )
    # A cursor at a topic that does not exist: the listing starts after it by name.
    assert _page(_run(services, _ask([], cursor=("bb", 0)))) == ([("c", OK, [0])], None)


def test_the_answer_carries_the_partition_and_its_authorized_operations() -> None:
    services = _Services(CATALOG, _open())
    (topic,) = _run(services, _ask(["b"])).topics
    assert topic.topic_id == uuid.uuid5(uuid.NAMESPACE_DNS, "b")
    assert not topic.is_internal
    assert topic.topic_authorized_operations == TOPIC_OPS  # no authorizer: all eight
    first = topic.partitions[0]
    assert (first.leader_id, first.leader_epoch, first.replica_nodes, first.isr_nodes) == (
        100,
        7,
        (100,),
        (100,),
    )
    # Empty, not null: Kafka's admin client reads them as lists.
    assert first.eligible_leader_replicas == () and first.last_known_elr == ()
    assert first.offline_replicas == ()


def test_unknown_and_invalid_names_and_refused_cursors() -> None:
    services = _Services(CATALOG, _open())
    answer = _run(services, _ask(["a", "no-such", "bad/name"], limit=3))
    # The limit used up by a: the unknown names after it are left to the next page.
    assert _page(answer) == ([("a", OK, [0, 1, 2])], ("bad/name", 0))
    answer = _run(services, _ask(["no-such", "bad/name", "a"]))
    by_name = {t.name: t for t in answer.topics}
    assert by_name["no-such"].error_code == ErrorCode.unknown_topic_or_partition
    assert by_name["bad/name"].error_code == ErrorCode.invalid_topic_exception
    assert by_name["no-such"].topic_id == ZERO
    # Kafka fills in the operations of every topic in its answer, unknown ones too.
    assert by_name["no-such"].topic_authorized_operations == TOPIC_OPS
    # The cursor's topic must be among those named, and its partition not negative:
    # the whole request refused, each named topic with INVALID_REQUEST.
    for bad in (_ask(["b", "c"], cursor=("a", 0)), _ask(["a"], cursor=("a", -1))):
        answer = _run(services, bad)
        assert answer.next_cursor is None
        assert {(t.name, t.error_code, t.partitions) for t in answer.topics} == {
            (t.name, ErrorCode.invalid_request, ()) for t in bad.topics
        }
    # The cursor before the named topics: those before it by name are left out.
    assert _page(_run(services, _ask(["a", "b", "c"], cursor=("b", 0)))) == (
        [("b", OK, [0, 1]), ("c", OK, [0])],
        None,
    )


def test_the_limit_is_at_most_kafkas_2000_partitions() -> None:
    services = _Services(_Catalog(_topic("big", 2500)), _open())
    answer = _run(services, _ask(["big"], limit=100_000))
    assert len(answer.topics[0].partitions) == 2000
    assert _page(answer)[1] == ("big", 2000)


def test_describe_is_checked_before_existence(tmp_path: Path) -> None:
    async def body() -> None:
        store = open_metastore(f"sqlite:///{tmp_path / 'meta.db'}")
        try:
            authorizer = AuthorizerService(store, ManualClock(), enabled=True)
            grants = [
                AclBinding(
                    ResourceType.TOPIC,
                    "a",
                    PatternType.PREFIXED,
                    "User:alice",
                    "*",
                    AclOperation.READ,
                    AclPermission.ALLOW,
                ),
                AclBinding(
                    ResourceType.TOPIC,
                    "no-",
                    PatternType.PREFIXED,
                    "User:alice",
                    "*",
                    AclOperation.DESCRIBE,
                    AclPermission.ALLOW,
                ),
            ]
            await authorizer.create_acls(grants)
            services = _Services(CATALOG, authorizer)
            named = await _exchange(services, _ask(["b", "a", "zz", "no-such"]), "User:alice")
            assert _page(named) == (
                [
                    ("a", OK, [0, 1, 2]),
                    ("no-such", ErrorCode.unknown_topic_or_partition, []),
                    # Refused: after the others, never said to exist or not.
                    ("b", ErrorCode.topic_authorization_failed, []),
                    ("zz", ErrorCode.topic_authorization_failed, []),
                ],
                None,
            )
            by_name = {t.name: t for t in named.topics}
            assert by_name["b"].topic_id == ZERO
            assert by_name["b"].topic_authorized_operations == -(2**31)
            # READ implies DESCRIBE; her operations on a: READ and DESCRIBE.
            assert by_name["a"].topic_authorized_operations == bit_field(
                [AclOperation.READ, AclOperation.DESCRIBE]
            )
            assert by_name["no-such"].topic_authorized_operations == bit_field(
                [AclOperation.DESCRIBE]
            )
            # Listing: b and c hidden.
            every = await _exchange(services, _ask([]), "User:alice")
            assert _page(every) == ([("a", OK, [0, 1, 2])], None)
        finally:
            await store.close()

    asyncio.run(body())
