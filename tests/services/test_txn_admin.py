"""The transaction admin service (services/txn_admin.py) over stand-ins of the cluster
view, the routed coordinator calls and the leaders: which shards a node lists (those
FindCoordinator names it for, to a client of the given zone), how a listing's errors
reach the admin client, and how a partition's producers are asked of its leader."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.messages import ActiveProducer
from zonegate.metastore.models import NodeRecord, PartitionInfo, TopicInfo
from zonegate.services.txn_admin import TxnAdminService
from zonegate.storage.index import UnknownStream
from zonegate.transactions.coordinator_core import TxnListing

pytestmark = pytest.mark.unit

E = ErrorCode


class _Cluster:
    """Shard s is answered by node 1 for zone-a clients when s is even, else node 2."""

    node_id = 1

    def txn_coordinator_for(
        self, shard: int, zone: str, listener: str | None = None
    ) -> NodeRecord | None:
        if zone != "zone-a":
            return None
        node = 1 if shard % 2 == 0 else 2
        return NodeRecord(node, zone, "h", 9092 + node, "h", 0)


class _Txns:
    def __init__(self, answer: tuple[ErrorCode, list[TxnListing], list[str]]) -> None:
        self.answer = answer
        self.asked: list[tuple[Any, ...]] = []

    async def describe(self, transactional_id: str) -> Any:
        raise AssertionError("not asked")

    async def list_transactions(
        self,
        shards: Iterable[int],
        producer_ids: Iterable[int],
        state_names: Iterable[str],
        min_duration_ms: int,
    ) -> tuple[ErrorCode, list[TxnListing], list[str]]:
        self.asked.append((list(shards), list(producer_ids), list(state_names), min_duration_ms))
        return self.answer


class _Catalog:
    def __init__(self) -> None:
        tid = uuid.uuid4()
        self.topic = TopicInfo(
            tid,
            "t",
            tuple(
                PartitionInfo(tid, "t", i, stream_id=10 + i, leader_node=1, leader_epoch=1)
                for i in range(3)
            ),
        )

    def get(self, name: str) -> TopicInfo | None:
        return self.topic if name == "t" else None


class _Leaders:
    async def producers(self, stream_id: int) -> list[ActiveProducer]:
        if stream_id == 11:
            raise LeaderUnavailable("out of reach", unreachable=True)
        if stream_id == 12:
            raise UnknownStream(stream_id)
        return [ActiveProducer(1, 0, 4, 99, -1, -1)]


class _Markers:
    async def write(self, *args: Any) -> Any:
        raise AssertionError("not asked")


def _service(txns: _Txns) -> TxnAdminService:
    return TxnAdminService(txns, _Cluster(), 7, _Catalog(), _Leaders(), _Markers())


def test_a_node_lists_the_shards_findcoordinator_names_it_for() -> None:
    listing = [TxnListing("a", 1, "Ongoing")]
    txns = _Txns((E.none, listing, ["Bogus"]))
    svc = _service(txns)
    assert svc.shards_answered("zone-a", "PLAINTEXT") == [0, 2, 4, 6]
    assert svc.shards_answered("zone-b", "PLAINTEXT") == []
    got = asyncio.run(svc.list_transactions("zone-a", None, [1], ["Ongoing", "Bogus"], 50))
    assert got == (E.none, listing, ["Bogus"])
    assert txns.asked == [([0, 2, 4, 6], [1], ["Ongoing", "Bogus"], 50)]


@pytest.mark.parametrize(
    ("error", "answered"),
    [
        # An owner out of reach: the one error Kafka's admin client retries.
        (E.not_coordinator, E.coordinator_load_in_progress),
        (E.coordinator_load_in_progress, E.coordinator_load_in_progress),
    ],
)
def test_a_listing_error_answers_no_listing(error: ErrorCode, answered: ErrorCode) -> None:
    svc = _service(_Txns((error, [TxnListing("a", 1, "Ongoing")], [])))
    assert asyncio.run(svc.list_transactions("zone-a", None, [], [], -1)) == (answered, [], [])


def test_producers_are_asked_of_the_partitions_leader() -> None:
    svc = _service(_Txns((E.none, [], [])))

    async def body() -> None:
        assert await svc.producers("t", 0) == (E.none, [ActiveProducer(1, 0, 4, 99, -1, -1)])
        assert await svc.producers("t", 1) == (E.not_leader_or_follower, [])
        assert await svc.producers("t", 2) == (E.unknown_topic_or_partition, [])
        assert await svc.producers("t", 3) == (E.unknown_topic_or_partition, [])
        assert await svc.producers("u", 0) == (E.unknown_topic_or_partition, [])

    asyncio.run(body())
