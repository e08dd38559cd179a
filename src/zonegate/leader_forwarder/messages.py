"""What crosses between a proxy and a partition's leader: batch summaries, never record data.

These are the in-process shapes of the contract (leader_forwarder/api.py) that
the gRPC service carries between nodes (docs/leader-protocol.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.storage.index import IndexEntry

ANY_EPOCH = -1


@dataclass(frozen=True, slots=True)
class AppendBatch:
    """One stored batch: where it is in a WAL object and what the leader must check."""

    stream_id: int
    leader_epoch: int  # the epoch the proxy believes current; ANY_EPOCH skips the check
    object_key: str
    position: int
    length: int
    record_count: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    # Transactions: the batch's transactional bit; a marker is a control batch (CONTROL_*)
    # with the coordinator epoch it carries (docs/transactions.md "Markers are data").
    transactional: bool = False
    control: int = 0
    coordinator_epoch: int = -1
    # A transactional data batch: its producer's transactional id and the Produce version
    # (KIP-890's verification at the leader; v12 on, the implicit add of TV2).
    transactional_id: str = ""
    produce_version: int = -1


CONTROL_NONE, CONTROL_ABORT, CONTROL_COMMIT = 0, 1, 2


@dataclass(frozen=True, slots=True)
class AppendResult:
    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class ReadIndexResult:
    error: ErrorCode
    entries: tuple[IndexEntry, ...]
    high_watermark: int
    log_start_offset: int
    leader_epoch: int
    # The last stable offset (transactions: docs/transactions.md), and for a
    # read_committed read the aborted transactions of the range answered, as
    # (producer id, first offset).
    last_stable_offset: int = -1
    aborted: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """One producer a partition's leader remembers (DescribeProducers, as Kafka's
    ProducerStateManager.activeProducers): -1 for what it does not know."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int  # the first offset of its transaction open here, -1: none
