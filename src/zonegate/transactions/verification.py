"""What a producer is answered when KIP-890's verification of its batch fails.

The leader asks the transaction coordinator whether a partition is in the producer's
transaction before it takes the transaction's first batch there; the coordinator's
answer is not an error every produce version may carry. Kafka translates it in two
places (AddPartitionsToTxnManager, then ReplicaManager's post-verification callback),
and so do we, in one function:

- PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (a produce error clients know);
- TRANSACTION_ABORTABLE stays for Produce v11 and later (clients that handle it, KIP-890)
  and is INVALID_TXN_STATE before;
- INVALID_TXN_STATE says the partition was not added to the transaction;
- the coordinator's retriable answers (CONCURRENT_TRANSACTIONS while the last
  transaction's markers are written, a coordinator moving or loading, the network)
  become NOT_ENOUGH_REPLICAS, which every producer retries without refreshing metadata.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

E = ErrorCode
_RETRIED = frozenset(
    {
        E.concurrent_transactions,
        E.network_exception,
        E.coordinator_load_in_progress,
        E.coordinator_not_available,
        E.not_coordinator,
    }
)


def produce_error(verification: ErrorCode, produce_version: int) -> tuple[ErrorCode, str | None]:
    """The produce answer for a batch whose verification answered `verification` (not
    NONE), with Kafka's message where Kafka sets one."""
    error = verification
    if error == E.producer_fenced:
        error = E.invalid_producer_epoch
    elif error == E.transaction_abortable and produce_version <= 10:
        error = E.invalid_txn_state
    elif error == E.cluster_authorization_failed:
        error = E.invalid_txn_state
    if error == E.invalid_txn_state:
        return error, "Partition was not added to the transaction"
    if error in _RETRIED:
        return E.not_enough_replicas, (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {verification.name.upper()}"
        )
    return error, None
