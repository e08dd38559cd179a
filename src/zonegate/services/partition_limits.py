"""How many partitions one CreateTopics or CreatePartitions request may make: Kafka's limit.

A topic has no partition cap of its own, in Kafka or here. Apache Kafka's
controller (4.3.1, KRaft) caps what one request may make instead: CreateTopics
refuses a request whose topics ask for more than 10,000 partitions in all
(`ReplicationControlManager.validateTotalNumberOfPartitions`, POLICY_VIOLATION
"Excessively large number of partitions per request."), and no user operation
may write more than 10,000 metadata records (`QuorumController.MAX_RECORDS_PER_USER_OP`),
so CreatePartitions can add at most 10,000 partitions per request ("Unable to
perform excessively large batch operation."). A topic grows past 10,000 by
further CreatePartitions requests. The same bound keeps each of our metadata-store
transactions, and the catalog change every node reloads after it, to 10,000 rows.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_TO_CREATE = "Excessively large number of partitions per request."
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."


def requested_partitions(counts: Iterable[int], default_partitions: int) -> int:
    """The partitions a CreateTopics request asks for in all, counted as Kafka does:
    -1 (the broker's default) counts `default_partitions`, other counts below 1 nothing
    (those topics fail on their own with INVALID_PARTITIONS)."""
    total = 0
    for count in counts:
        if count == -1:
            total += default_partitions
        elif count > 0:
            total += count
    return total


def too_many(total: int) -> bool:
    """Whether one request making `total` partitions is over Kafka's limit."""
    return total > MAX_PARTITIONS_PER_REQUEST
