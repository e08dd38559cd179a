"""The partition leader's transaction settings in force on a node, dynamic ones included.

Kafka 4.3 lets AlterConfigs on a broker resource change two transaction settings at run
time (DynamicBrokerConfig's DynamicProducerStateManagerConfig): `producer.id.expiration.ms`
and `transaction.partition.verification.enable`. The other transaction settings are
static in Kafka, and refused dynamically as Kafka refuses them (kafka_static_configs.py).
A value is resolved as Kafka resolves it: the node's own dynamic value (the broker
resource named by its id), else the cluster's dynamic default (resource ""), else the
node's command line, which is Kafka's default when not given.

The dynamic values are the catalog's (`Catalog.defaults`: this node's scope over the
cluster's), the path the topic defaults take: read at each use, so a change made through
any node is in force here from this node's next catalog refresh, and at once on the
node that made it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

PRODUCER_ID_EXPIRATION_MS = "producer.id.expiration.ms"
TRANSACTION_PARTITION_VERIFICATION_ENABLE = "transaction.partition.verification.enable"


class LeaderTxnSettings:
    """`producer.id.expiration.ms` and `transaction.partition.verification.enable` as in
    force now: `dynamic` gives the dynamic broker configs in force on this node (its own
    over the cluster's defaults), the keyword arguments the node's static values."""

    def __init__(
        self,
        dynamic: Callable[[], Mapping[str, str]],
        *,
        producer_id_expiration_ms: int,
        verification: bool,
    ) -> None:
        self._dynamic = dynamic
        self._expiration_ms = producer_id_expiration_ms
        self._verification = verification

    def producer_id_expiration_ms(self) -> int:
        value = self._dynamic().get(PRODUCER_ID_EXPIRATION_MS)
        if value is not None:
            try:
                return int(value.strip())
            except ValueError:  # checked when set (broker_configs.py): not expected
                pass
        return self._expiration_ms

    def verification_enabled(self) -> bool:
        value = self._dynamic().get(TRANSACTION_PARTITION_VERIFICATION_ENABLE)
        if value is not None and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"  # Kafka's BOOLEAN: either case
        return self._verification
