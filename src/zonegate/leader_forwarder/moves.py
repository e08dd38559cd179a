"""What this node's leader keeps of its partitions' state when the catalog moves them.

The leader caches each partition's state (sequence numbers, offsets) loaded at
a leader epoch. When the catalog changes, the state of a partition deleted,
moved to another node, or led elsewhere at a new epoch is dropped; a partition
moved to this node is kept only if already loaded at its new epoch (its first
append may come before the catalog says so). Dropped state is reloaded at next use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from zonegate.metastore.models import PartitionInfo


class PartitionStates(Protocol):
    def forget(self, stream_ids: Iterable[int]) -> None: ...

    def forget_unless_at(self, epochs: Mapping[int, int]) -> None: ...


def forget_moved(
    leader: PartitionStates, me: int, partition_of: Callable[[int], PartitionInfo | None]
) -> Callable[[Mapping[int, PartitionInfo]], None]:
    """A catalog listener for node `me`'s leader; `partition_of` says what a stream's
    partition is now, the listener is given what each was before the change."""

    def on_catalog_change(old: Mapping[int, PartitionInfo]) -> None:
        stale = []
        led: dict[int, int] = {}  # moved to this node: stream id -> its new epoch
        for sid, before in old.items():
            now = partition_of(sid)
            if now is None or (before.leader_node == me and now.leader_node != me):
                stale.append(sid)
            elif now.leader_epoch != before.leader_epoch:
                if now.leader_node == me:
                    led[sid] = now.leader_epoch
                else:
                    stale.append(sid)
        leader.forget(stale)
        leader.forget_unless_at(led)

    return on_catalog_change
