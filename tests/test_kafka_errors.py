"""The Kafka error table (zonegate/kafka_errors.py): a row for every code kio knows,
Kafka's retriable flags, and the answers zonegate picks for a passing condition are
ones a client retries."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from zonegate.kafka_errors import (
    KAFKA_ERRORS,
    LEADER_MOVED,
    OUTCOME_UNKNOWN,
    error_info,
    is_retriable,
)

pytestmark = pytest.mark.unit

# Read off Kafka 4.0's Errors.java: the exception class each code maps to, and whether
# that class extends RetriableException (directly or through InvalidMetadataException).
KAFKA_RETRIABLE = {
    -1: ("UNKNOWN_SERVER_ERROR", False),  # UnknownServerException extends ApiException
    1: ("OFFSET_OUT_OF_RANGE", False),  # OffsetOutOfRangeException < InvalidOffsetException
    2: ("CORRUPT_MESSAGE", True),  # CorruptRecordException extends RetriableException
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True),  # < InvalidMetadataException < Retriable
    5: ("LEADER_NOT_AVAILABLE", True),  # < InvalidMetadataException
    6: ("NOT_LEADER_OR_FOLLOWER", True),  # < NotLeaderForPartitionException < InvalidMetadata
    7: ("REQUEST_TIMED_OUT", True),  # TimeoutException extends RetriableException
    8: ("BROKER_NOT_AVAILABLE", False),
    10: ("MESSAGE_TOO_LARGE", False),  # RecordTooLargeException extends ApiException
    13: ("NETWORK_EXCEPTION", True),  # < InvalidMetadataException
    14: ("COORDINATOR_LOAD_IN_PROGRESS", True),
    15: ("COORDINATOR_NOT_AVAILABLE", True),
    16: ("NOT_COORDINATOR", True),
    19: ("NOT_ENOUGH_REPLICAS", True),
    25: ("UNKNOWN_MEMBER_ID", False),
    27: ("REBALANCE_IN_PROGRESS", False),
    29: ("TOPIC_AUTHORIZATION_FAILED", False),  # < AuthorizationException
    32: ("INVALID_TIMESTAMP", False),
    35: ("UNSUPPORTED_VERSION", False),
    41: ("NOT_CONTROLLER", True),
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    47: ("INVALID_PRODUCER_EPOCH", False),
    48: ("INVALID_TXN_STATE", False),
    51: ("CONCURRENT_TRANSACTIONS", True),
    56: ("KAFKA_STORAGE_ERROR", True),  # KafkaStorageException < InvalidMetadataException
    59: ("UNKNOWN_PRODUCER_ID", False),  # < OutOfOrderSequenceException
    69: ("GROUP_ID_NOT_FOUND", False),
    70: ("FETCH_SESSION_ID_NOT_FOUND", True),
    74: ("FENCED_LEADER_EPOCH", True),  # < InvalidMetadataException
    75: ("UNKNOWN_LEADER_EPOCH", True),  # extends RetriableException
    78: ("OFFSET_NOT_AVAILABLE", True),
    84: ("ELECTION_NOT_NEEDED", True),  # < InvalidMetadataException
    87: ("INVALID_RECORD", False),
    88: ("UNSTABLE_OFFSET_COMMIT", True),
    89: ("THROTTLING_QUOTA_EXCEEDED", True),
    90: ("PRODUCER_FENCED", False),  # ProducerFencedException extends ApiException
    100: ("UNKNOWN_TOPIC_ID", True),  # < InvalidMetadataException
    110: ("FENCED_MEMBER_EPOCH", False),
    120: ("TRANSACTION_ABORTABLE", False),
    129: ("REBOOTSTRAP_REQUIRED", False),  # RebootstrapRequiredException extends ApiException
    133: ("SHARE_SESSION_LIMIT_REACHED", True),  # extends RetriableException
}


def test_every_error_code_has_its_row() -> None:
    assert set(KAFKA_ERRORS) == set(ErrorCode)
    for code, info in KAFKA_ERRORS.items():
        assert info.code is code
        assert info.description or code is ErrorCode.none, code


@pytest.mark.parametrize("value", sorted(KAFKA_RETRIABLE))
def test_names_and_flags_are_kafkas(value: int) -> None:
    name, retriable = KAFKA_RETRIABLE[value]
    info = error_info(ErrorCode(value))
    assert (info.name, info.retriable) == (name, retriable)
    assert is_retriable(ErrorCode(value)) is retriable


def test_flags_agree_with_kio() -> None:
    """kio carries Kafka's flags too: two readings of Kafka that must agree."""
    assert [c for c in ErrorCode if is_retriable(c) != c.retriable] == []


def test_the_answers_for_a_passing_condition_are_retried_by_clients() -> None:
    # A batch the directory resends may also reach the client with these answers (its
    # retries ran out), and a write of unknown outcome must be retried, not dropped.
    assert all(is_retriable(c) for c in LEADER_MOVED)
    assert is_retriable(OUTCOME_UNKNOWN)
    assert OUTCOME_UNKNOWN not in LEADER_MOVED
