"""A failed verification's answer to the producer, as Kafka translates it."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from zonegate.transactions.verification import produce_error

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("verification", "version", "answer"),
    [
        (E.producer_fenced, 11, E.invalid_producer_epoch),
        (E.transaction_abortable, 11, E.transaction_abortable),
        (E.transaction_abortable, 12, E.transaction_abortable),
        (E.transaction_abortable, 10, E.invalid_txn_state),
        (E.invalid_txn_state, 9, E.invalid_txn_state),
        (E.cluster_authorization_failed, 11, E.invalid_txn_state),
        (E.concurrent_transactions, 11, E.not_enough_replicas),
        (E.coordinator_not_available, 3, E.not_enough_replicas),
        (E.coordinator_load_in_progress, 11, E.not_enough_replicas),
        (E.not_coordinator, 11, E.not_enough_replicas),
        (E.invalid_producer_id_mapping, 11, E.invalid_producer_id_mapping),
    ],
)
def test_produce_error(verification: E, version: int, answer: E) -> None:
    assert produce_error(verification, version)[0] == answer


def test_messages_say_why() -> None:
    assert produce_error(E.invalid_txn_state, 11)[1] == "Partition was not added to the transaction"
    msg = produce_error(E.concurrent_transactions, 11)[1]
    assert msg is not None and msg.endswith("Underlying error: CONCURRENT_TRANSACTIONS")
