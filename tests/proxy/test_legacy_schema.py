"""The generated legacy schemas (proxy/legacy_schema) against an independent codec.

Every request and response class of a version Kafka 4.0 removed is checked
against kafka-python's own implementation of that version: a message written
by kio's writer from our class is read by kafka-python and written back by it
byte for byte, and our decoder reads kafka-python's bytes back to the same
message. A field missing, misplaced or of the wrong width fails here.
"""

from __future__ import annotations

import importlib
import io
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreateAclsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import Records

from zonegate.proxy.decoder import message_reader
from zonegate.proxy.legacy_schema import MODULES, payload_class

pytestmark = pytest.mark.unit

KAFKA_PYTHON: dict[int, tuple[Any, Any]] = {
    0: (ProduceRequest, ProduceResponse),
    1: (FetchRequest, FetchResponse),
    2: (ListOffsetsRequest, ListOffsetsResponse),
    8: (OffsetCommitRequest, OffsetCommitResponse),
    9: (OffsetFetchRequest, OffsetFetchResponse),
    19: (CreateTopicsRequest, CreateTopicsResponse),
    20: (DeleteTopicsRequest, DeleteTopicsResponse),
    23: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    29: (DescribeAclsRequest, DescribeAclsResponse),
    30: (CreateAclsRequest, CreateAclsResponse),
    31: (DeleteAclsRequest, DeleteAclsResponse),
    32: (DescribeConfigsRequest, DescribeConfigsResponse),
    35: (DescribeLogDirsRequest, DescribeLogDirsResponse),
}
# kafka-python has no WriteTxnMarkers v0 (its schemas start at v1, as Kafka 4's): that
# version is checked below against bytes written by hand from Kafka 3.9's definition.
BY_HAND = {27}
CASES = [
    (api_key, version, entity)
    for (api_key, version) in sorted(MODULES)
    if api_key not in BY_HAND
    for entity in (EntityType.request, EntityType.response)
]


def _encode(msg: object) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(msg))(buf, msg)
    return buf.getvalue()


def test_every_legacy_api_is_checked() -> None:
    assert {api_key for api_key, _ in MODULES} == set(KAFKA_PYTHON) | BY_HAND


@pytest.mark.parametrize(("api_key", "version", "entity"), CASES)
def test_same_bytes_as_kafka_python(api_key: int, version: int, entity: EntityType) -> None:
    ours = payload_class(api_key, version, entity)
    assert ours is not None and ours.__version__ == version and not ours.__flexible__
    theirs = KAFKA_PYTHON[api_key][0 if entity is EntityType.request else 1]
    reader = message_reader(ours)
    # kafka-python decodes whole messages, header included: a v1 request header, or a v0
    # response header (the correlation id), as these versions use.
    if entity is EntityType.request:
        header = struct.pack(">hhih", api_key, version, 7, 4) + b"test"
    else:
        header = struct.pack(">i", 7)

    @settings(
        max_examples=15,
        suppress_health_check=list(HealthCheck),
        deadline=None,
        database=None,
        derandomize=True,
    )
    @given(st.from_type(ours))
    def check(msg: object) -> None:
        data = _encode(msg)
        decoded = theirs.decode(header + data, version=version, header=True)
        assert decoded.API_VERSION == version
        assert bytes(decoded.encode(header=True)) == header + data
        back, end = reader(data, 0)
        assert end == len(data)
        assert back == msg

    # Records are opaque here; kafka-python would try to parse random bytes as a batch.
    with _no_records():
        check()


class _no_records:
    """Makes hypothesis generate null record sets (kafka-python parses record bytes)."""

    def __enter__(self) -> None:
        st.register_type_strategy(Records, st.just(None))  # type: ignore[arg-type]

    def __exit__(self, *exc: object) -> None:
        st.register_type_strategy(Records, st.binary(max_size=64))


def test_api_versions_advertise_kafka_3_9_lower_bounds() -> None:
    """Every served API starts at Kafka 3.9's lowest version (0 for all of them), but
    Produce and Fetch, whose v0-2 / v0-3 carry message formats v0-1: refused, not
    advertised."""
    import zonegate.proxy.handlers  # noqa: F401  (registers the handlers)
    from zonegate.proxy.registry import REGISTRY

    lowest = {reg.api_key: reg.min_version for reg in REGISTRY}
    assert lowest.pop(0) == 3 and lowest.pop(1) == 4
    assert set(lowest.values()) == {0}
    refused = {(r.api_key, r.min_version, r.max_version) for r in REGISTRY.refused()}
    assert refused == {(0, 0, 2), (1, 0, 3)}


def _str(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_write_txn_markers_v0_against_kafka_3_9_layout() -> None:
    """WriteTxnMarkers v0 (non-flexible): request markers [producer id int64, epoch int16,
    result bool, topics [name, partitions [int32]], coordinator epoch int32]; response
    markers [producer id int64, topics [name, partitions [index int32, error int16]]]."""
    req_cls = payload_class(27, 0, EntityType.request)
    resp_cls = payload_class(27, 0, EntityType.response)
    assert req_cls is not None and resp_cls is not None
    mod = importlib.import_module(req_cls.__module__)
    request = req_cls(
        markers=(
            mod.WritableTxnMarker(
                producer_id=7,
                producer_epoch=3,
                transaction_result=False,
                topics=(mod.WritableTxnMarkerTopic(name="t", partition_indexes=(0, 2)),),
                coordinator_epoch=5,
            ),
        )
    )
    expected = (
        struct.pack(">iqh?", 1, 7, 3, False)
        + struct.pack(">i", 1)
        + _str("t")
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">i", 5)
    )
    assert _encode(request) == expected
    assert message_reader(req_cls)(expected, 0) == (request, len(expected))
    rmod = importlib.import_module(resp_cls.__module__)
    response = resp_cls(
        markers=(
            rmod.WritableTxnMarkerResult(
                producer_id=7,
                topics=(
                    rmod.WritableTxnMarkerTopicResult(
                        name="t",
                        partitions=(
                            rmod.WritableTxnMarkerPartitionResult(
                                partition_index=2, error_code=ErrorCode.invalid_producer_epoch
                            ),
                        ),
                    ),
                ),
            ),
        )
    )
    expected = (
        struct.pack(">iq", 1, 7)
        + struct.pack(">i", 1)
        + _str("t")
        + struct.pack(">iih", 1, 2, int(ErrorCode.invalid_producer_epoch))
    )
    assert _encode(response) == expected
    assert message_reader(resp_cls)(expected, 0) == (response, len(expected))
