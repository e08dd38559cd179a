"""Marker answers, partition by partition, as Kafka's marker completion handler takes them."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from zonegate.transactions.coordinator_core import CoordinatorConfig, TransactionShard
from zonegate.transactions.marker_progress import MarkerOutcome, MarkerProgress, classify
from zonegate.transactions.metadata import TransactionMetadata
from zonegate.transactions.states import IllegalTransition, TxnState

pytestmark = pytest.mark.unit

P0, P1, P2 = ("t", 0), ("t", 1), ("u", 0)


def progress() -> MarkerProgress:
    meta = TransactionMetadata(
        "tx", 5, producer_epoch=1, state=TxnState.PREPARE_COMMIT, partitions={P0, P1, P2},
        txn_start_ms=1,
    )  # fmt: skip
    shard = TransactionShard(4, CoordinatorConfig(), lambda: 9, [meta])
    (markers,) = shard.loaded(10)
    return MarkerProgress(markers)


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (E.none, MarkerOutcome.WRITTEN),
        (E.not_leader_or_follower, MarkerOutcome.RETRY),
        (E.request_timed_out, MarkerOutcome.RETRY),
        (E.kafka_storage_error, MarkerOutcome.RETRY),
        (E.unknown_topic_or_partition, MarkerOutcome.RETRY),
        (E.invalid_producer_epoch, MarkerOutcome.STOP),
        (E.transaction_coordinator_fenced, MarkerOutcome.STOP),
        (E.unsupported_for_message_format, MarkerOutcome.NOT_NEEDED),
    ],
)
def test_classify(error: E, outcome: MarkerOutcome) -> None:
    assert classify(error) == outcome


@pytest.mark.parametrize("error", [E.corrupt_message, E.message_too_large, E.invalid_request])
def test_fatal_answers_are_bugs(error: E) -> None:
    with pytest.raises(IllegalTransition):
        classify(error)


def test_complete_once_every_partition_is_written_or_needs_none() -> None:
    p = progress()
    assert p.to_send == {P0, P1, P2}
    p.answered(P0, E.none)
    p.answered(P1, E.not_leader_or_follower)
    assert p.to_send == {P1, P2} and not p.complete
    p.gone(P2)
    p.answered(P1, E.none)
    assert p.complete and p.to_send == set()
    assert p.markers.complete.transit.state == TxnState.COMPLETE_COMMIT


def test_a_fenced_answer_stops_the_markers_for_good() -> None:
    p = progress()
    p.answered(P0, E.none)
    assert p.answered(P1, E.transaction_coordinator_fenced) == MarkerOutcome.STOP
    p.answered(P2, E.none)
    assert not p.complete and p.to_send == set()
