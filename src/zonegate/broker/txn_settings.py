"""Kafka's transaction-coordinator settings (settings.py adds these rows to SETTINGS),
honoured by each node's coordinator role (txn_coordinator/role.py, docs/transactions.md).

`transaction.state.log.num.partitions` is the number of coordinator shards transactional
ids hash into, as Kafka's partitions of `__transaction_state`: every node of a cluster
must use the same value, and it must not change once a cluster has transactions (an id
would hash to another shard than the one holding its state), as in Kafka.
"""

from __future__ import annotations

from zonegate.broker.setting_types import MS_POSITIVE, Setting
from zonegate.runtime.units import at_least

TXN_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "--transaction-max-timeout-ms",
        "transaction.max.timeout.ms",
        900_000,
        "transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask "
        "for; InitProducerId with more is INVALID_TRANSACTION_TIMEOUT (default {default})",
        **MS_POSITIVE,
    ),
    Setting(
        "--transactional-id-expiration-ms",
        "transactional.id.expiration.ms",
        604_800_000,
        "transactional.id.expiration.ms: a transactional id with no transaction and no "
        "request this long is forgotten (default {default}, 7 days)",
        **MS_POSITIVE,
    ),
    Setting(
        "--transaction-state-log-num-partitions",
        "transaction.state.log.num.partitions",
        50,
        "transaction.state.log.num.partitions: the coordinator shards transactional ids "
        "hash into; the same on every node, and fixed once a cluster has transactions "
        "(default {default})",
        at_least(1, int),
        "N",
    ),
    Setting(
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10_000,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms: the longest a "
        "coordinator waits between looks for timed-out transactions to abort (it also "
        "wakes at the earliest timeout; default {default})",
        **MS_POSITIVE,
    ),
    Setting(
        "--transaction-remove-expired-transaction-cleanup-interval-ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        3_600_000,
        "transaction.remove.expired.transaction.cleanup.interval.ms: how often a "
        "coordinator forgets expired transactional ids (default {default})",
        **MS_POSITIVE,
    ),
)
