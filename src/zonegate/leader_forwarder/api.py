"""The leader's contract: what a node asks of a partition's leader, wherever the leader
runs, and the errors it may answer with.

`LeaderService` (in this process), `RemoteLeader` (over gRPC) and
`LeaderDirectory` (whichever of them leads the partition) all satisfy `Leader`,
so the services never know whether the leader is local, nor how it is reached.
The values that cross are in leader_forwarder/messages.py; the wire form of
this contract is docs/leader-protocol.md.

Besides the error codes in its answers, a leader raises:
- `LeaderUnavailable` (below): it could not be reached, or failed, after the
  transport's retries;
- storage's `UnknownStream`: no partition has the stream id (never had, or its
  topic was deleted meanwhile). It stays storage's, where the stream store
  raises it; a remote leader raises the same one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.messages import (
    ActiveProducer,
    AppendBatch,
    AppendResult,
    ReadIndexResult,
)
from zonegate.storage.index import IndexEntry


class LeaderUnavailable(Exception):
    """The leader (or, for a group call, the coordinating node) could not serve the call:
    out of reach, too slow, or failing. The call may or may not have reached it."""

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        # The node could not be reached at all (down, refusing connections), as opposed
        # to reached and slow or failing: the caller may then try another node.
        self.unreachable = unreachable


class Leader(Protocol):
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]: ...

    async def read_index(
        self, stream_id: int, offset: int, max_bytes: int, read_committed: bool = False
    ) -> ReadIndexResult:
        """Entries from the one holding `offset`; with `read_committed`, only those below
        the last stable offset, and the aborted transactions of the range answered."""
        ...

    async def stable_offset(self, stream_id: int) -> int:
        """The last stable offset: the first offset of the earliest open transaction, else
        the high watermark (ListOffsets LATEST under read_committed)."""
        ...

    async def offsets(self, stream_id: int) -> tuple[int, int, int]:
        """(log start offset, high watermark, leader epoch)."""
        ...

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]: ...

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None: ...

    async def changed(self, stream_id: int) -> asyncio.Future[None]:
        """A future completed at the partition's next high-watermark change."""
        ...

    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        """Moves the log start offset up to `offset` (-1: the high watermark); (error,
        log start offset after). OFFSET_OUT_OF_RANGE past the high watermark."""
        ...

    async def producers(self, stream_id: int) -> list[ActiveProducer]:
        """The producers the partition's leader remembers (DescribeProducers)."""
        ...
