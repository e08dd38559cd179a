"""Kafka's rules for a manual replica assignment and for an election, without a cluster."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from zonegate.metastore.models import PartitionInfo
from zonegate.services.reassignment import PREFERRED, UNCLEAN, _check_replicas, _elect

pytestmark = pytest.mark.unit


def _p(leader: int, preferred: int) -> PartitionInfo:
    return PartitionInfo(uuid.UUID(int=1), "t", 0, 7, leader, 3, preferred)


@pytest.mark.parametrize(
    ("replicas", "allow", "error"),
    [
        ([2], True, None),
        ([2, 3], True, None),
        ([2], False, None),
        ([], True, ErrorCode.invalid_replica_assignment),
        ([2, 2], True, ErrorCode.invalid_replica_assignment),
        ([2, 99], True, ErrorCode.invalid_replica_assignment),
        ([2, 3], False, ErrorCode.invalid_replication_factor),
        ([99, 99], False, ErrorCode.invalid_replica_assignment),  # Kafka checks nodes first
    ],
)
def test_manual_assignment_checks(
    replicas: list[int], allow: bool, error: ErrorCode | None
) -> None:
    outcome = _check_replicas(replicas, {1, 2, 3}, allow)
    assert (outcome.error if outcome else None) == error


def test_preferred_election() -> None:
    assert _elect(_p(1, 1), PREFERRED, {1, 2})[0].error is ErrorCode.election_not_needed
    back = _elect(_p(2, 1), PREFERRED, {1, 2})
    assert back[0].error is ErrorCode.none and back[1] == 1
    gone = _elect(_p(2, 1), PREFERRED, {2})
    assert gone[0].error is ErrorCode.preferred_leader_not_available and gone[1] is None


def test_unclean_election() -> None:
    assert _elect(_p(2, 1), UNCLEAN, {1, 2})[0].error is ErrorCode.election_not_needed
    assert _elect(_p(2, 1), UNCLEAN, {1})[1] == 1  # leader gone, preferred live
    none_left = _elect(_p(2, 1), UNCLEAN, {3})
    assert none_left[0].error is ErrorCode.eligible_leaders_not_available and none_left[1] is None
