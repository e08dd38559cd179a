"""Which markers of an ending transaction are written, which to retry, and when to give up.

Kafka's TransactionMarkerRequestCompletionHandler, per partition answer: NONE is
written; a partition that is gone, or whose log cannot hold a marker, needs none
(Kafka removes it: the producer could not have written there either); leadership
and storage errors are retried against the partition's leader of the moment;
INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED mean a newer producer or
coordinator owns the transaction now, so this coordinator stops writing its
markers; anything else (a corrupt or oversized marker) is a bug. When no partition
is left, the coordinator role writes `Markers.complete`.
"""

from __future__ import annotations

import enum

from kio.schema.errors import ErrorCode

from zonegate.transactions.decisions import Markers
from zonegate.transactions.metadata import TopicPartition
from zonegate.transactions.states import IllegalTransition

E = ErrorCode


class MarkerOutcome(enum.Enum):
    WRITTEN = "written"
    NOT_NEEDED = "not needed"
    RETRY = "retry"
    STOP = "stop"


_OUTCOMES = {
    E.none: MarkerOutcome.WRITTEN,
    E.unknown_topic_or_partition: MarkerOutcome.RETRY,  # unless deleted: `gone`
    E.not_leader_or_follower: MarkerOutcome.RETRY,
    E.not_enough_replicas: MarkerOutcome.RETRY,
    E.not_enough_replicas_after_append: MarkerOutcome.RETRY,
    E.request_timed_out: MarkerOutcome.RETRY,
    E.kafka_storage_error: MarkerOutcome.RETRY,
    E.fenced_leader_epoch: MarkerOutcome.RETRY,  # ours: the leader moved mid-call
    E.invalid_producer_epoch: MarkerOutcome.STOP,
    E.transaction_coordinator_fenced: MarkerOutcome.STOP,
    E.unsupported_for_message_format: MarkerOutcome.NOT_NEEDED,
    E.unsupported_version: MarkerOutcome.NOT_NEEDED,
}


def classify(error: ErrorCode) -> MarkerOutcome:
    """What one partition's answer to a marker means; an answer Kafka treats as fatal
    (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, ...) or never expects is a bug here too."""
    outcome = _OUTCOMES.get(error)
    if outcome is None:
        raise IllegalTransition(f"unexpected answer {error.name} to a transaction marker")
    return outcome


class MarkerProgress:
    """The partitions of one `Markers` still waiting for their marker."""

    def __init__(self, markers: Markers) -> None:
        self.markers = markers
        self.waiting: set[TopicPartition] = set(markers.partitions)
        self.stopped = False

    def answered(self, partition: TopicPartition, error: ErrorCode) -> MarkerOutcome:
        outcome = classify(error)
        if outcome in (MarkerOutcome.WRITTEN, MarkerOutcome.NOT_NEEDED):
            self.waiting.discard(partition)
        elif outcome == MarkerOutcome.STOP:
            self.stopped = True
        return outcome

    def gone(self, partition: TopicPartition) -> None:
        """The partition was deleted before its marker was written: it needs none."""
        self.waiting.discard(partition)

    @property
    def to_send(self) -> set[TopicPartition]:
        return set() if self.stopped else set(self.waiting)

    @property
    def complete(self) -> bool:
        """Every partition has its marker: write `markers.complete` now."""
        return not self.stopped and not self.waiting
