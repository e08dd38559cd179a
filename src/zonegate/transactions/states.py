"""The transaction states, the moves between them, and the constants of the protocol.

One table, Kafka 4's (`TransactionState.validPreviousStates`, in
transaction-coordinator/.../TransactionState.java): a state lists the
states it may be entered from, and any other move is refused as a bug
(`IllegalTransition`), never answered to a client. The state ids are Kafka's,
so a snapshot written by one release is read by the next and DescribeTransactions
names states as Kafka does.
"""

from __future__ import annotations

import enum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue: the epoch field is an int16


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions answer (Kafka's `name`)."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        """The state ListTransactions' state filter names, or None for a name Kafka does not
        know (Kafka's filter then matches nothing for it)."""
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

S = TxnState
# The table: the states each state may be entered from.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # Under transaction version 2 a client unsure of the server's state may abort with
    # no transaction open (Kafka 4): from Empty and both completions.
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

# States whose transactional id may expire (transactional.id.expiration.ms): no
# transaction is open, so forgetting the id loses nothing but its epoch.
EXPIRATION_ALLOWED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})

# States in which a transaction is open: a producer id cannot be rotated under them.
PENDING_TRANSACTION = frozenset({S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT})


def may_move(src: TxnState, dst: TxnState) -> bool:
    return src in VALID_PREVIOUS[dst]


class TransactionVersion(enum.IntEnum):
    """The `transaction.version` feature level (KIP-890): 2 is the epoch bump at every
    EndTxn and the implicit AddPartitionsToTxn of produce and TxnOffsetCommit."""

    TV_0 = 0
    TV_1 = 1
    TV_2 = 2

    @property
    def supports_epoch_bump(self) -> bool:
        return self >= TransactionVersion.TV_2


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka never hands a client MAX_EPOCH, so the coordinator can always fence one more
    time; at MAX_EPOCH - 1 a new producer id is taken instead of a bump."""
    return epoch >= MAX_EPOCH - 1


class IllegalTransition(Exception):
    """A move the table does not allow, or a completion that does not match what was
    prepared: a bug in the coordinator, never a client's error (Kafka's
    IllegalStateException in the same places)."""


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapping at 32 bits."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def shard_for(key: str, shards: int) -> int:
    """The shard of a transactional id (or the `__consumer_offsets` partition of a group),
    as Kafka's partitionFor computes it, so DescribeTransactions names the partitions
    Kafka would: Utils.abs(key.hashCode) % shards, where abs(MIN_VALUE) is 0."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % shards
