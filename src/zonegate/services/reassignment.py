"""Partition reassignment and leader election, as Kafka's controller answers them.

A partition has one replica here, its leader; Kafka's replica list maps to
its preferred node (the first replica, `PartitionInfo.preferred`) and the
node leading it now. Reassigning makes the first live node of the new list the
leader, the list's first node the preferred one: one metadata transaction, the
same move the controller makes on failover (a leader epoch bump fences the old
leader; no data is copied, the new leader loads the index from the store). So
a reassignment is done when it is answered, and none is ever in progress.
Any node serves these: the move goes through the metadata store, which every
node shares (as CreatePartitions does), and the others see it at their next
catalog refresh. Errors and their order follow Kafka's ReplicationControlManager.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.metastore.api import ClusterStore
from zonegate.metastore.models import PartitionInfo
from zonegate.router.membership import Membership
from zonegate.runtime.clock import SYSTEM_CLOCK
from zonegate.services.catalog import Catalog

log = logging.getLogger(__name__)
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Outcome:
    error: ErrorCode = ErrorCode.none
    message: str | None = None


NOT_NEEDED = Outcome(
    ErrorCode.election_not_needed, "Leader election not needed for topic partition."
)


class Reassignments:
    """The `Leadership` service the handlers call (services/api.py)."""

    def __init__(
        self,
        meta: ClusterStore,
        catalog: Catalog,
        membership: Membership,
        *,
        clock_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
    ) -> None:
        self._meta = meta
        self._catalog = catalog
        self._members = membership
        self._clock_ms = clock_ms

    def _live(self) -> set[int]:
        return {n.node_id for n in self._members.live_nodes()}

    def replicas(
        self, p: PartitionInfo
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Kafka's (replicas, isr, offline replicas) of a partition: its preferred node
        first, then its leader when another; a live one is in sync (any live node can
        lead it, losing nothing)."""
        live = self._live()
        replicas = tuple(dict.fromkeys((p.preferred, p.leader_node)))
        isr = tuple(n for n in replicas if n in live)
        return replicas, isr, tuple(n for n in replicas if n not in live)

    async def _partition(self, topic: str, index: int) -> PartitionInfo | Outcome:
        t = await self._catalog.lookup(topic)
        if t is None:
            return Outcome(ErrorCode.unknown_topic_or_partition, f"Unable to find topic {topic}")
        if not 0 <= index < len(t.partitions):
            return Outcome(
                ErrorCode.unknown_topic_or_partition,
                f"Unable to find partition {topic}:{index}.",
            )
        return t.partitions[index]

    async def reassign(
        self,
        wanted: Mapping[TopicPartition, Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments: each partition's new replica list, None to cancel."""
        await self._catalog.refresh()
        nodes = await self._meta.list_nodes()
        registered = {n.node_id for n in nodes}
        # Read now, not the membership's last read: a node that joined a moment ago leads.
        now = self._clock_ms()
        live = self._live() | {n.node_id for n in nodes if n.live(now)}
        out: dict[TopicPartition, Outcome] = {}
        changes: list[tuple[int, int, int]] = []
        for (topic, index), replicas in wanted.items():
            found = await self._partition(topic, index)
            if isinstance(found, Outcome):
                out[(topic, index)] = found
                continue
            if replicas is None:
                # Nothing is ever in progress: a reassignment is done when answered.
                out[(topic, index)] = Outcome(
                    ErrorCode.no_reassignment_in_progress,
                    f"Unable to cancel reassignment for partition {topic}-{index}: "
                    "no reassignment is in progress.",
                )
                continue
            refused = _check_replicas(replicas, registered, allow_replication_factor_change)
            if refused is not None:
                out[(topic, index)] = refused
                continue
            # The first live node of the list leads (as Kafka elects from the new ISR);
            # with none live the leader stays and the preferred node leads once back.
            leader = next((n for n in replicas if n in live), found.leader_node)
            if (replicas[0], leader) != (found.preferred, found.leader_node):
                changes.append((found.stream_id, replicas[0], leader))
            out[(topic, index)] = Outcome()
        if changes:
            await self._meta.reassign_partitions(changes)
            await self._catalog.refresh()
            log.info(
                "node %d reassigned %d partitions (stream id, preferred, leader): %s",
                self._members.me.node_id,
                len(changes),
                changes[:20],
            )
        return out

    async def elect(
        self, election_type: int, wanted: Sequence[TopicPartition] | None
    ) -> list[tuple[TopicPartition, Outcome]]:
        """ElectLeaders: for every partition when `wanted` is None, leaving out those
        that need none (as Kafka does)."""
        await self._catalog.refresh()
        live = self._live()
        if wanted is None:
            targets: list[TopicPartition] = [
                (t.name, p.partition) for t in self._catalog.topics() for p in t.partitions
            ]
        else:
            targets = list(wanted)
        out: list[tuple[TopicPartition, Outcome]] = []
        moves: list[tuple[int, int]] = []
        for topic, index in targets:
            found = await self._partition(topic, index)
            if isinstance(found, Outcome):
                outcome = found
            elif election_type not in (PREFERRED, UNCLEAN):
                outcome = Outcome(
                    ErrorCode.invalid_request, f"Unknown election type {election_type}"
                )
            else:
                outcome, node = _elect(found, election_type, live)
                if node is not None:
                    moves.append((found.stream_id, node))
            if wanted is None and outcome.error is ErrorCode.election_not_needed:
                continue
            out.append(((topic, index), outcome))
        if moves:
            await self._meta.move_partitions(moves)
            await self._catalog.refresh()
            log.info(
                "node %d elected leaders of %d partitions (stream id, leader): %s",
                self._members.me.node_id,
                len(moves),
                moves[:20],
            )
        return out


def _check_replicas(
    replicas: Sequence[int], registered: set[int], allow_rf_change: bool
) -> Outcome | None:
    """Kafka's checks of a manual assignment, in its order; None if it passes."""
    bad = ErrorCode.invalid_replica_assignment
    if not replicas:
        return Outcome(bad, "The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for n in replicas:
        if n in seen:
            return Outcome(
                bad, f"The manual partition assignment includes the broker {n} more than once."
            )
        seen.add(n)
        if n not in registered:
            return Outcome(
                bad,
                f"The manual partition assignment includes broker {n}, but no such broker "
                "is registered.",
            )
    if not allow_rf_change and len(replicas) != 1:
        return Outcome(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from 1 to {len(replicas)}",
        )
    return None


def _elect(p: PartitionInfo, election_type: int, live: set[int]) -> tuple[Outcome, int | None]:
    """One partition's election: its outcome, and the node to move it to (None: none)."""
    if election_type == PREFERRED:
        if p.leader_node == p.preferred:
            return NOT_NEEDED, None
        if p.preferred not in live:
            return Outcome(
                ErrorCode.preferred_leader_not_available,
                f"Failed to elect leader for partition {p.topic}-{p.partition} under strategy "
                "PreferredReplicaPartitionLeaderElectionStrategy",
            ), None
        return Outcome(), p.preferred
    if p.leader_node in live:
        return NOT_NEEDED, None
    if p.preferred not in live:
        return Outcome(
            ErrorCode.eligible_leaders_not_available,
            f"Failed to elect leader for partition {p.topic}-{p.partition} under strategy "
            "UncleanLeaderElection",
        ), None
    return Outcome(), p.preferred
