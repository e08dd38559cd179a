"""Kafka's limit on the partitions one request may make, counted as its controller does."""

from __future__ import annotations

import pytest

from zonegate.services.partition_limits import (
    MAX_PARTITIONS_PER_REQUEST,
    requested_partitions,
    too_many,
)

pytestmark = pytest.mark.unit


def test_default_counts_for_minus_one_and_bad_counts_for_nothing() -> None:
    assert requested_partitions([3, -1, 0, -5], default_partitions=4) == 7


def test_the_limit_is_per_request_not_per_topic() -> None:
    assert MAX_PARTITIONS_PER_REQUEST == 10_000
    assert not too_many(requested_partitions([10_000], 1))
    assert too_many(requested_partitions([10_001], 1))
    assert too_many(requested_partitions([5_000, 5_001], 1))
    assert too_many(requested_partitions([100_000], 1))
