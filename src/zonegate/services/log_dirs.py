"""What DescribeLogDirs reports of a node: one log directory and the partitions it leads.

Kafka reports each replica's log directory and the bytes of its segments. A
zonegate partition has one replica, its leader, and its data lives in the
object store, shared by every node: so each node reports one log directory
(the object store's location, as the node names it) holding the partitions
the asking client is told it leads (Metadata's leaders for the client's zone:
the admin client asks only the brokers it is told of, so together they cover
every partition), each sized by the bytes of its stored batches as the index
counts them: the partition's leader's count when this node is it, else the
stored index's. There is no follower to lag and no future replica (no
AlterReplicaLogDirs), so the offset lag is 0 and no log is a future one
(docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from zonegate.metastore.models import PartitionInfo
from zonegate.storage.index import IndexEntry, UnknownStream


@dataclass(frozen=True, slots=True)
class PartitionSize:
    topic: str
    partition: int
    size_bytes: int


class LogDirService:
    def __init__(
        self,
        log_dir: str,
        node_id: int,
        partitions: Callable[[], Sequence[PartitionInfo]],
        leader_for: Callable[[PartitionInfo, str], int],
        led_size: Callable[[int], Awaitable[int]],
        indexed: Callable[[int], Awaitable[Sequence[IndexEntry]]],
    ) -> None:
        """`partitions`: every partition of the catalog now; `leader_for`: the leader a
        client of a zone is told of; `led_size`: stream id -> the stored bytes of a
        partition this node leads (its leader's count); `indexed`: a partition's
        stored index entries, for one another node leads."""
        self._log_dir = log_dir
        self._me = node_id
        self._partitions = partitions
        self._leader_for = leader_for
        self._led_size = led_size
        self._indexed = indexed

    @property
    def log_dir(self) -> str:
        return self._log_dir

    async def sizes(
        self, wanted: Mapping[str, Sequence[int]] | None, zone: str
    ) -> list[PartitionSize]:
        """The partitions a client of `zone` is told this node leads (of `wanted`, topic
        -> partitions; all when None), in topic and partition order; one deleted
        meanwhile is left out."""
        led = sorted(
            (p for p in self._partitions() if self._leader_for(p, zone) == self._me),
            key=lambda p: (p.topic, p.partition),
        )
        out = []
        for p in led:
            if wanted is not None and p.partition not in wanted.get(p.topic, ()):
                continue
            try:
                size = await self._size(p)
            except UnknownStream:
                continue
            out.append(PartitionSize(p.topic, p.partition, size))
        return out

    async def _size(self, p: PartitionInfo) -> int:
        if p.leader_node == self._me:
            return await self._led_size(p.stream_id)
        return sum(e.length for e in await self._indexed(p.stream_id))
