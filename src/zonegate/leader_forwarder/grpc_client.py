"""A remote partition leader over gRPC, with deadlines, retries and high-watermark watches.

Only transient transport failures are retried (UNAVAILABLE, DEADLINE_EXCEEDED),
Appends included although whether the call reached the leader's handler is not
known, which is safe because the leader de-duplicates idempotent producers'
batches and fences stale leader epochs; past the retries the call raises the
contract's LeaderUnavailable (leader_forwarder/api.py). Answers naming a moved
partition (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH) go back to the caller,
which refreshes its view of leaders and tries the new one.

Over mutual TLS (rpc_tls.py) the channel presents this node's certificate; a call the
peer refuses for a certificate, or whose peer's certificate is refused here, is logged
as one WARNING naming the peer and the reason (at most every 30 s per peer), and fails
as any unreachable leader does: the node keeps running.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.messages import (
    ActiveProducer,
    AppendBatch,
    AppendResult,
    ReadIndexResult,
)
from zonegate.leader_forwarder.proto import leader_pb2 as pb
from zonegate.leader_forwarder.proto import leader_pb2_grpc as pb_grpc
from zonegate.leader_forwarder.rpc_tls import tls_failure
from zonegate.runtime.principal import ANONYMOUS, current_principal
from zonegate.storage.index import IndexEntry, UnknownStream, entry_values

log = logging.getLogger(__name__)
T = TypeVar("T")
TOKEN_HEADER = "zonegate-rpc-token"
_RETRIABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# An Append past its deadline is not sent to the same leader again: a frozen leader
# (a paused process, a zone dropping packets) would hold it for every attempt's
# deadline (40 s) though its partitions moved meanwhile. The caller
# (directory.py) re-reads the catalog and sends it to the leader named there.
_APPEND_RETRIABLE = frozenset({grpc.StatusCode.UNAVAILABLE})
_TLS_LOG_EVERY_S = 30.0
# The stream id no partition has: a probe's ReadIndex of it is answered as unknown.
_NO_STREAM = -1

# bytes_hook(bytes_out, bytes_in) counts what this node sends and receives.
BytesHook = Callable[[int, int], None]


def _certificate_refused(exc: grpc.aio.AioRpcError) -> bool:
    details = exc.details() or ""
    return any(
        sign in details
        for sign in ("CERTIFICATE_VERIFY_FAILED", "andshake failed", "Hostname Verification")
    )


def entry_from_pb(e: Any) -> IndexEntry:
    return IndexEntry(*entry_values(e))


class RemoteLeader:
    def __init__(
        self,
        target: str,
        *,
        from_node: int,
        token: str = "",
        deadline_s: float = 10.0,
        attempts: int = 4,
        bytes_hook: BytesHook | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] = (),
        name: str = "",
        tls_generation: int = 0,
    ) -> None:
        """`credentials`: mutual TLS (rpc_tls.RpcTls), with its `options`; None: plaintext.
        `name` names the peer in logs ("node 3"); `tls_generation`: of the certificates
        the channel was made with (LeaderPeers makes a new one when they change)."""
        self.target = target
        self.name = name or target
        self.tls_generation = tls_generation
        self._tls = credentials is not None
        self._tls_logged_at = -1e9
        # The cluster's RPC token (metastore `cluster_secret`): the leader refuses calls
        # without it, so only the cluster's own nodes can append to its partitions.
        self._metadata = ((TOKEN_HEADER, token),)
        self._from_node = from_node
        self._deadline = deadline_s
        self._attempts = attempts
        self._bytes_hook = bytes_hook
        opts = [("grpc.max_receive_message_length", 64 * 1024 * 1024), *options]
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(target, credentials, options=opts)
        else:
            self._channel = grpc.aio.insecure_channel(target, options=opts)
        self._stub = pb_grpc.LeaderStub(self._channel)  # type: ignore[no-untyped-call]
        self._watch_futures: dict[int, asyncio.Future[None]] = {}
        self._watch_tasks: dict[int, asyncio.Task[None]] = {}

    async def close(self) -> None:
        for t in self._watch_tasks.values():
            t.cancel()
        await self._channel.close()

    async def _call(
        self, fn: Callable[[], Awaitable[T]], retriable: frozenset[grpc.StatusCode] = _RETRIABLE
    ) -> T:
        delay = 0.05
        for attempt in range(self._attempts):
            try:
                return await fn()
            except grpc.aio.AioRpcError as exc:
                # A certificate refused is refused again: no retry. A connection closed in
                # the handshake may be a peer going down, too: retried, named if it lasts.
                last = attempt == self._attempts - 1 or _certificate_refused(exc)
                refused = self._tls_refusal(exc) if last else None
                if refused is not None:
                    raise LeaderUnavailable(
                        f"leader {self.name} at {self.target}: TLS: {refused}", unreachable=True
                    ) from exc
                if exc.code() not in retriable or last:
                    raise LeaderUnavailable(f"leader {self.target}: {exc.code().name}") from exc
                await asyncio.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")

    def _tls_refusal(self, exc: grpc.aio.AioRpcError) -> str | None:
        """Why the TLS handshake with the peer failed (logged), or None."""
        if not self._tls or exc.code() != grpc.StatusCode.UNAVAILABLE:
            return None
        reason = tls_failure(exc.details() or "")
        if reason is not None:
            now = time.monotonic()
            if now - self._tls_logged_at >= _TLS_LOG_EVERY_S:
                self._tls_logged_at = now
                log.warning("leader RPC with %s at %s refused: %s", self.name, self.target, reason)
        return reason

    async def probe(self) -> str | None:
        """One call, no retry: None if the peer answered it, else why not (a TLS
        refusal's reason, or the status). Asks for the offsets of a stream no partition
        has, which any node answers without touching its partitions."""
        request = pb.ReadIndexRequest(
            from_node=self._from_node, stream_id=_NO_STREAM, mode=pb.WATERMARKS
        )
        try:
            response = await self._stub.ReadIndex(
                request, timeout=self._deadline, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as exc:
            refused = self._tls_refusal(exc)
            return f"TLS: {refused}" if refused is not None else exc.code().name
        self._count(request, response)
        return None

    def _count(self, request: Any, response: Any) -> None:
        if self._bytes_hook is not None:
            self._bytes_hook(request.ByteSize(), response.ByteSize())

    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        keys: dict[str, int] = {}
        msgs = []
        for b in batches:
            idx = keys.setdefault(b.object_key, len(keys))
            msgs.append(
                pb.BatchSummary(
                    stream_id=b.stream_id,
                    leader_epoch=b.leader_epoch,
                    object_index=idx,
                    position=b.position,
                    length=b.length,
                    record_count=b.record_count,
                    max_timestamp=b.max_timestamp,
                    producer_id=b.producer_id,
                    producer_epoch=b.producer_epoch,
                    base_sequence=b.base_sequence,
                    transactional=b.transactional,
                    control=b.control,
                    coordinator_epoch=b.coordinator_epoch,
                    transactional_id=b.transactional_id,
                    produce_version=b.produce_version,
                )
            )
        request = pb.AppendRequest(object_keys=list(keys), batches=msgs, from_node=self._from_node)
        response = await self._call(
            lambda: self._stub.Append(request, timeout=self._deadline, metadata=self._metadata),
            _APPEND_RETRIABLE,
        )
        self._count(request, response)
        return [
            AppendResult(ErrorCode(r.error_code), r.base_offset, r.log_start_offset)
            for r in response.results
        ]

    async def _read(self, **fields: Any) -> Any:
        request = pb.ReadIndexRequest(from_node=self._from_node, **fields)
        response = await self._call(
            lambda: self._stub.ReadIndex(request, timeout=self._deadline, metadata=self._metadata)
        )
        self._count(request, response)
        if response.error_code == ErrorCode.unknown_topic_or_partition:
            raise UnknownStream(request.stream_id)  # as the local leader raises it
        if response.error_code == ErrorCode.not_leader_or_follower:
            # Not led there (at the epoch it holds): as the local leader raises it, so
            # that the directory refreshes the catalog and asks the leader it names.
            raise LeaderUnavailable(f"leader {self.target}: stream {request.stream_id} not led")
        return response

    async def read_index(
        self, stream_id: int, offset: int, max_bytes: int, read_committed: bool = False
    ) -> ReadIndexResult:
        r = await self._read(
            stream_id=stream_id,
            mode=pb.FROM_OFFSET,
            offset=offset,
            max_bytes=max_bytes,
            read_committed=read_committed,
        )
        return ReadIndexResult(
            ErrorCode(r.error_code),
            tuple(entry_from_pb(e) for e in r.entries),
            r.high_watermark,
            r.log_start_offset,
            r.leader_epoch,
            r.last_stable_offset,
            tuple((a.producer_id, a.first_offset) for a in r.aborted),
        )

    async def stable_offset(self, stream_id: int) -> int:
        r = await self._read(stream_id=stream_id, mode=pb.WATERMARKS)
        return int(r.last_stable_offset)

    async def offsets(self, stream_id: int) -> tuple[int, int, int]:
        r = await self._read(stream_id=stream_id, mode=pb.WATERMARKS)
        return r.log_start_offset, r.high_watermark, r.leader_epoch

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]:
        r = await self._read(stream_id=stream_id, mode=pb.FROM_TIMESTAMP, timestamp=timestamp)
        return [entry_from_pb(e) for e in r.entries]

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None:
        r = await self._read(stream_id=stream_id, mode=pb.MAX_TIMESTAMP)
        return entry_from_pb(r.entries[0]) if r.entries else None

    async def producers(self, stream_id: int) -> list[ActiveProducer]:
        r = await self._read(stream_id=stream_id, mode=pb.PRODUCERS)
        return [
            ActiveProducer(
                p.producer_id,
                p.epoch,
                p.last_sequence,
                p.last_timestamp,
                p.coordinator_epoch,
                p.txn_start_offset,
            )
            for p in r.producers
        ]

    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        request = pb.DeleteRecordsRequest(
            stream_id=stream_id,
            offset=offset,
            from_node=self._from_node,
            principal=current_principal() or ANONYMOUS,
        )
        response = await self._call(
            lambda: self._stub.DeleteRecords(
                request, timeout=self._deadline, metadata=self._metadata
            )
        )
        self._count(request, response)
        if response.error_code == ErrorCode.unknown_topic_or_partition:
            raise UnknownStream(stream_id)
        return ErrorCode(response.error_code), response.log_start_offset

    async def group_call(self, payload: bytes, *, timeout_s: float) -> bytes:
        """Passes a group call to the group's coordinator; its answer's payload.

        One attempt: a JoinGroup may wait a whole rebalance. The caller
        (services/groups.py) tries the next owner when this one is unreachable.
        """
        # The client's principal rides along, already checked here (docs/acls.md).
        request = pb.GroupCallRequest(
            from_node=self._from_node,
            payload=payload,
            principal=current_principal() or ANONYMOUS,
        )
        try:
            response = await self._stub.GroupCall(
                request, timeout=timeout_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as exc:
            self._tls_refusal(exc)
            # UNAVAILABLE: the node could not be reached (down, refusing connections),
            # as opposed to reached and slow (DEADLINE_EXCEEDED) or failing.
            raise LeaderUnavailable(
                f"coordinator {self.target}: {exc.code().name}",
                unreachable=exc.code() == grpc.StatusCode.UNAVAILABLE,
            ) from exc
        self._count(request, response)
        return bytes(response.payload)

    async def txn_call(self, payload: bytes, *, timeout_s: float) -> bytes:
        """Passes a transaction-coordinator call to the shard's owner; its answer's
        payload. One attempt, raising LeaderUnavailable as `group_call` does: the caller
        (services/txn_routing.py) decides whether another owner is coming."""
        request = pb.TxnCallRequest(
            from_node=self._from_node,
            payload=payload,
            principal=current_principal() or ANONYMOUS,
        )
        try:
            response = await self._stub.TxnCall(request, timeout=timeout_s, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            self._tls_refusal(exc)
            raise LeaderUnavailable(
                f"transaction coordinator {self.target}: {exc.code().name}",
                unreachable=exc.code() == grpc.StatusCode.UNAVAILABLE,
            ) from exc
        self._count(request, response)
        return bytes(response.payload)

    async def changed(self, stream_id: int) -> asyncio.Future[None]:
        """Completes at the next high-watermark event the leader streams for the partition."""
        fut = self._watch_futures.get(stream_id)
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            self._watch_futures[stream_id] = fut
        task = self._watch_tasks.get(stream_id)
        if task is None or task.done():
            self._watch_tasks[stream_id] = asyncio.get_running_loop().create_task(
                self._watch(stream_id)
            )
        return fut

    async def _watch(self, stream_id: int) -> None:
        try:
            request = pb.WatchRequest(stream_ids=[stream_id], from_node=self._from_node)
            call = self._stub.Watch(request, metadata=self._metadata)
            if self._bytes_hook is not None:
                self._bytes_hook(request.ByteSize(), 0)
            # The first event is the leader's current state: waking on it costs at most
            # one extra index read, and never misses a change made while subscribing.
            async for event in call:
                if self._bytes_hook is not None:
                    self._bytes_hook(0, event.ByteSize())
                fut = self._watch_futures.pop(stream_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)
        except grpc.aio.AioRpcError as exc:
            self._tls_refusal(exc)
            log.debug("watch of stream %d on %s ended: %s", stream_id, self.target, exc.code())
        finally:
            # Wake waiters so they re-ask (and re-resolve the leader) rather than hang.
            fut = self._watch_futures.pop(stream_id, None)
            if fut is not None and not fut.done():
                fut.set_result(None)
