"""Kafka's transaction-coordinator settings (settings.py adds these rows to SETTINGS),
honoured by each node's coordinator role (txn_coordinator/role.py, docs/transactions.md).

`transaction.state.log.num.partitions` is the number of coordinator shards transactional
ids hash into, as Kafka's partitions of `__transaction_state`: every node of a cluster
must use the same value, and it must not change once a cluster has transactions (an id
would hash to another shard than the one holding its state), as in Kafka.

The partition leaders honour the last three: producer ids idle past
`producer.id.expiration.ms` are forgotten by each leader (Kafka's ProducerStateManager),
looked for every `producer.id.expiration.check.interval.ms`, and
`transaction.partition.verification.enable` turns KIP-890's verification off for
Produce v11 and older (leader_forwarder/txn_verify.py). AlterConfigs on a broker
resource may change `producer.id.expiration.ms` and
`transaction.partition.verification.enable` at run time, as in Kafka 4.3: the values
here are then the static layer under the dynamic ones (services/leader_txn_settings.py);
the others are static, as in Kafka.
"""

from __future__ import annotations

from zonegate.broker.setting_types import MS_POSITIVE, ON_OFF, Setting, is_true
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
    Setting(
        "--producer-id-expiration-ms",
        "producer.id.expiration.ms",
        86_400_000,
        "producer.id.expiration.ms: a partition's leader forgets a producer id with no "
        "transaction open there and no write this long (default {default}, 1 day; "
        "AlterConfigs on a broker resource may change it at run time)",
        **MS_POSITIVE,
    ),
    Setting(
        "--producer-id-expiration-check-interval-ms",
        "producer.id.expiration.check.interval.ms",
        600_000,
        "producer.id.expiration.check.interval.ms: how often leaders look for expired "
        "producer ids (default {default})",
        **MS_POSITIVE,
    ),
    Setting(
        "--transaction-partition-verification-enable",
        "transaction.partition.verification.enable",
        "true",
        "transaction.partition.verification.enable: a transaction's first batch at a "
        "partition is taken only once its coordinator confirms the partition is in the "
        "transaction (KIP-890); false skips that for Produce v11 and older, as Kafka "
        "(default {default}; AlterConfigs on a broker resource may change it at run time)",
        choices=ON_OFF,
        convert=is_true,
    ),
)
