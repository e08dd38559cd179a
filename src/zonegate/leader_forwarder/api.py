"""What a node asks of a partition's leader, wherever the leader runs.

`LeaderService` (in this process) and `RemoteLeader` (over gRPC) both satisfy
it, so handlers never know whether the leader is local.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.messages import AppendBatch, AppendResult, ReadIndexResult
from zonegate.storage.index import IndexEntry


class Leader(Protocol):
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]: ...

    async def read_index(self, stream_id: int, offset: int, max_bytes: int) -> ReadIndexResult: ...

    async def offsets(self, stream_id: int) -> tuple[int, int, int]: ...

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]: ...

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None: ...

    async def changed(self, stream_id: int) -> asyncio.Future[None]: ...

    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        """Moves the log start offset up to `offset` (-1: the high watermark); (error,
        log start offset after). OFFSET_OUT_OF_RANGE past the high watermark."""
        ...
