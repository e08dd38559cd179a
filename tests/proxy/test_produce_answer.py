"""The hand-encoded Produce answer is byte for byte what kio writes, at every version."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from zonegate.proxy.codec import decode_response, encode_response
from zonegate.proxy.handlers.common import NO_THROTTLE
from zonegate.proxy.handlers.produce import _encode_answer
from zonegate.proxy.schema import make, response_class
from zonegate.proxy.throttling import with_throttle
from zonegate.services.api import ProducedPartition

pytestmark = pytest.mark.unit


def _kio_answer(version: int, works: list[ProducedPartition]) -> Any:
    """The answer built from kio's dataclasses, as the handler did before."""

    def cls(name: str) -> type[Any]:
        return response_class(0, version, name)

    by_topic: dict[str, list[Any]] = {}
    for w in works:
        by_topic.setdefault(w.topic, []).append(
            make(
                cls("PartitionProduceResponse"),
                index=w.partition,
                error_code=w.error,
                base_offset=w.base_offset,
                log_append_time=datetime.datetime.fromtimestamp(
                    w.log_append_time / 1000, datetime.UTC
                )
                if w.log_append_time >= 0
                else None,
                log_start_offset=w.log_start_offset,
                record_errors=tuple(
                    make(
                        cls("BatchIndexAndErrorMessage"), batch_index=i, batch_index_error_message=m
                    )
                    for i, m in w.record_errors
                )
                if version >= 8
                else (),
                error_message=w.message,
                current_leader=make(cls("LeaderIdAndEpoch")) if version >= 10 else None,
            )
        )
    return make(
        cls("ProduceResponse"),
        responses=tuple(
            make(cls("TopicProduceResponse"), name=t, partition_responses=tuple(p))
            for t, p in by_topic.items()
        ),
        throttle_time=NO_THROTTLE,
        node_endpoints=(),
    )


def _works() -> list[ProducedPartition]:
    ok = ProducedPartition("orders", 0, base_offset=1234567890123, log_start_offset=7)
    ok2 = ProducedPartition("orders", 3, base_offset=0, log_start_offset=0)
    corrupt = ProducedPartition(
        "t\u00e9l\u00e9", 1, ErrorCode.corrupt_message, "CRC32C mismatch: stored 1, computed 2"
    )
    unknown = ProducedPartition("missing", 9, ErrorCode.unknown_topic_or_partition)
    # An error from the leader: answered as an error, no offsets.
    fenced = ProducedPartition("orders", 1, ErrorCode.not_leader_or_follower)
    long_name = ProducedPartition("x" * 300, 2, base_offset=5, log_start_offset=1)
    # A LogAppendTime topic's answer carries the append time.
    stamped = ProducedPartition("logs", 4, base_offset=9, log_append_time=1_700_000_000_123)
    # KIP-467: the records of a batch refused for their timestamps, by index.
    refused = ProducedPartition(
        "orders",
        5,
        ErrorCode.invalid_timestamp,
        "2 record(s) have timestamps outside the window",
        record_errors=((0, "timestamp 1 of record 0 is too old"), (3, None)),
    )
    return [ok, corrupt, ok2, unknown, fenced, long_name, stamped, refused]


@pytest.mark.parametrize("version", range(3, 13))
def test_hand_encoded_answer_matches_kio(version: int) -> None:
    works = _works()
    expected = encode_response(77, 0, _kio_answer(version, works))
    got = encode_response(77, 0, _encode_answer(version, works))
    assert got == expected
    cid, back = decode_response(got[4:], response_class(0, version, "ProduceResponse"))
    assert cid == 77
    assert [p.index for t in back.responses for p in t.partition_responses] == [
        0,
        3,
        1,
        5,
        1,
        9,
        2,
        4,
    ]


@pytest.mark.parametrize("version", [3, 8, 9, 11, 12])
def test_empty_answer_matches_kio(version: int) -> None:
    expected = encode_response(1, 0, _kio_answer(version, []))
    assert encode_response(1, 0, _encode_answer(version, [])) == expected


@pytest.mark.parametrize("version", [3, 8, 9, 11, 12])
def test_a_throttle_time_lands_where_kio_writes_it(version: int) -> None:
    works = _works()
    throttled = dataclasses.replace(
        _kio_answer(version, works), throttle_time=datetime.timedelta(milliseconds=1234)
    )
    got = encode_response(5, 0, with_throttle(_encode_answer(version, works), 1234))
    assert got == encode_response(5, 0, throttled)
