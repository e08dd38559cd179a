"""DescribeLogDirs over fakes: which partitions a node reports to a client of a zone,
each partition's size (its leader's count, or the stored index's), and the answer at
every version Kafka 3.9 accepts, encoded and read back. No network, no sleeps."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from zonegate.metastore.models import PartitionInfo
from zonegate.proxy.codec import decode_response, encode_response
from zonegate.proxy.context import ClientInfo, RequestContext
from zonegate.proxy.handlers import describe_log_dirs
from zonegate.proxy.legacy_schema import payload_class
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import response_class
from zonegate.runtime.clock import SYSTEM_CLOCK
from zonegate.services.authorizer import AuthorizerService
from zonegate.services.log_dirs import LogDirService, PartitionSize
from zonegate.storage.index import IndexEntry, UnknownStream

pytestmark = pytest.mark.unit
ME = 1
TID = uuid.uuid4()
# a-0 led here, a-1 by node 2, b-0 here but deleted meanwhile (its leader has no stream).
PARTS = [
    PartitionInfo(TID, "b", 0, 30, ME, 0),
    PartitionInfo(TID, "a", 1, 11, 2, 0),
    PartitionInfo(TID, "a", 0, 10, ME, 0),
]


def _entry(length: int) -> IndexEntry:
    return IndexEntry(0, 0, "k", 0, length, 0)


def _service(routed_here: bool) -> LogDirService:
    async def led_size(stream_id: int) -> int:
        if stream_id == 30:
            raise UnknownStream(stream_id)
        return {10: 500}[stream_id]

    async def indexed(stream_id: int) -> Sequence[IndexEntry]:
        return {11: [_entry(70), _entry(30)]}[stream_id]

    def leader_for(p: PartitionInfo, zone: str) -> int:
        # Zone routing names this node for every partition to its own zone's clients.
        return ME if routed_here and zone == "zone-a" else p.leader_node

    return LogDirService("file:///data/objects", ME, lambda: PARTS, leader_for, led_size, indexed)


def test_reports_the_partitions_the_clients_zone_is_told_this_node_leads() -> None:
    svc = _service(routed_here=True)
    assert asyncio.run(svc.sizes(None, "zone-a")) == [
        PartitionSize("a", 0, 500),
        PartitionSize("a", 1, 100),  # led by node 2: the stored index's bytes
    ]
    assert asyncio.run(svc.sizes(None, "zone-b")) == [PartitionSize("a", 0, 500)]
    assert asyncio.run(svc.sizes({"a": [1], "c": [0]}, "zone-a")) == [PartitionSize("a", 1, 100)]
    assert asyncio.run(svc.sizes({}, "zone-a")) == []
    assert svc.log_dir == "file:///data/objects"


class _Services:
    log_dirs = _service(routed_here=False)
    authorizer = AuthorizerService(None, SYSTEM_CLOCK, enabled=False)


def _ctx(version: int) -> RequestContext:
    return RequestContext(
        services=_Services(),  # type: ignore[arg-type]
        principal="User:ANONYMOUS",
        listener="PLAINTEXT",
        client=ClientInfo("127.0.0.1", 1, 1),
        client_zone="zone-a",
        api_key=describe_log_dirs.API_KEY,
        api_version=version,
        correlation_id=7,
        client_id="t",
        request_bytes=0,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_answer_at_every_version_kafka_3_9_accepts(version: int) -> None:
    reg = REGISTRY.lookup(describe_log_dirs.API_KEY)
    assert reg is not None and (reg.min_version, reg.max_version) == (0, 4)
    request: Any = type("Req", (), {"topics": None})()
    answer = asyncio.run(describe_log_dirs.handle(_ctx(version), request))
    answer_cls: Any = payload_class(35, version, answer.__type__) or response_class(
        35, version, "DescribeLogDirsResponse"
    )
    _, back = decode_response(encode_response(7, 35, answer)[4:], answer_cls)
    got: Any = back
    (result,) = got.results
    assert result.error_code == ErrorCode.none and result.log_dir == "file:///data/objects"
    assert [(t.name, [(p.partition_index, p.partition_size) for p in t.partitions])
            for t in result.topics] == [("a", [(0, 500)])]  # fmt: skip
    (p,) = result.topics[0].partitions
    assert (p.offset_lag, p.is_future_key) == (0, False)
    if version >= 4:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)
