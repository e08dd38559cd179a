"""What the coordinator's pure core answers: values the coordinator role acts on.

An `Answer` goes to the client now; a `Write` is a prepared move the role makes
durable and reports back (`TransactionShard.written` or `write_failed`); `Markers`
are what the role writes to the partitions of an ending transaction before it
writes their `complete` move.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.transactions.metadata import TopicPartition, TxnTransit
from zonegate.transactions.states import NO_PRODUCER_EPOCH, NO_PRODUCER_ID


class ProducerIdsUnavailable(Exception):
    """No producer id at hand (the next block is being fetched): the client retries
    (Kafka answers COORDINATOR_LOAD_IN_PROGRESS while its block is not there)."""


class After(enum.Enum):
    """What a write was for, so `written` knows whom to answer and what follows."""

    INIT_PRODUCER_ID = "init"
    ADD_PARTITIONS = "add"
    END_TXN = "end"
    FENCE_ABORT = "fence"  # InitProducerId during a transaction: abort, answer a retry
    TIMEOUT_ABORT = "timeout"  # the coordinator's own abort: nobody to answer
    COMPLETE = "complete"  # markers written: the transaction is over
    EXPIRE = "expire"  # the id is forgotten


@dataclass(frozen=True, slots=True)
class Answer:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class Write:
    transactional_id: str
    transit: TxnTransit
    after: After


@dataclass(frozen=True, slots=True)
class Markers:
    """Commit or abort markers for every partition of a transaction, written by each
    partition's leader with this shard's coordinator epoch; then `complete` is written."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]
    complete: Write


@dataclass(frozen=True, slots=True)
class Written:
    answer: Answer | None
    markers: Markers | None = None
