"""The error codes an answer carries are counted however deep and however many: a
Metadata answer of many partitions, some with errors, counted in one walk."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

from zonegate.proxy.metrics import RequestMetrics, error_codes
from zonegate.proxy.schema import make

pytestmark = pytest.mark.unit


def _partition(i: int, code: ErrorCode) -> MetadataResponsePartition:
    return make(
        MetadataResponsePartition,
        error_code=code,
        partition_index=i,
        leader_id=1,
        leader_epoch=0,
        replica_nodes=(1,),
        isr_nodes=(1,),
        offline_replicas=(),
    )


def _topic(name: str, code: ErrorCode, parts: tuple[MetadataResponsePartition, ...]) -> object:
    return make(
        MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=uuid.UUID(int=0),
        is_internal=False,
        partitions=parts,
        topic_authorized_operations=-2147483648,
    )


def test_every_error_code_of_every_partition_and_topic_is_counted() -> None:
    parts = tuple(
        _partition(i, ErrorCode.leader_not_available if i % 100 == 0 else ErrorCode.none)
        for i in range(1000)
    )
    response = make(
        MetadataResponse,
        throttle_time=0,
        brokers=(),
        cluster_id="c",
        controller_id=1,
        topics=(
            _topic("big", ErrorCode.none, parts),
            _topic("gone", ErrorCode.unknown_topic_or_partition, ()),
            _topic("empty", ErrorCode.none, ()),
        ),
    )
    found: Counter[int] = Counter()
    error_codes(response, found)
    assert found == {
        int(ErrorCode.leader_not_available): 10,
        int(ErrorCode.unknown_topic_or_partition): 1,
    }
    metrics = RequestMetrics()
    metrics.answered(3, 0.0, response)
    metrics.answered(3, 0.0, response)
    assert metrics.errors == {
        (3, int(ErrorCode.leader_not_available)): 20,
        (3, int(ErrorCode.unknown_topic_or_partition)): 2,
    }
