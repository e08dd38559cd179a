"""The leader's gRPC service: Append, ReadIndex and Watch over the local leader; GroupCall, TxnCall.

Only the cluster's own nodes may call it: every call carries the cluster's RPC
token (a secret in the metadata store, so only what can read the store has
it), and calls without it are refused (UNAUTHENTICATED). With mutual TLS on
(rpc_tls.py, docs/internode-tls.md) a caller must also present a certificate the
cluster's CA signed, or its connection is refused in the handshake, before any call:
the token is then no longer the only guard. Requests are checked before they are
served; docs/leader-protocol.md says what is refused.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import Leader, LeaderUnavailable
from zonegate.leader_forwarder.grpc_client import TOKEN_HEADER
from zonegate.leader_forwarder.messages import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_NONE,
    ActiveProducer,
    AppendBatch,
)
from zonegate.leader_forwarder.proto import leader_pb2 as pb
from zonegate.leader_forwarder.proto import leader_pb2_grpc as pb_grpc
from zonegate.runtime.principal import ANONYMOUS, acting_for
from zonegate.storage.index import IndexEntry, UnknownStream

log = logging.getLogger(__name__)


def entry_to_pb(e: IndexEntry) -> Any:
    return pb.IndexEntry(
        base_offset=e.base_offset,
        last_offset=e.last_offset,
        object_key=e.object_key,
        position=e.position,
        length=e.length,
        max_timestamp=e.max_timestamp,
        append_ms=e.append_ms,
    )


# group_call(payload) -> the answer's payload: the node's group service serving a call
# another node passed on (services/groups.py); raises ValueError for a bad payload.
GroupCallHandler = Callable[[bytes], Awaitable[bytes]]


class LeaderServicer(pb_grpc.LeaderServicer):
    def __init__(
        self,
        # This node's own leader (leader.py's LeaderService), never the directory: a
        # call that reached this node is served here or answered as moved, not passed on.
        leader: Leader,
        on_bytes: Any = None,
        group_call: GroupCallHandler | None = None,
        token: str = "",
        txn_call: GroupCallHandler | None = None,
    ) -> None:
        self._leader = leader
        self._token = token.encode()
        self._refused_unauthenticated = 0
        self._last_unauthenticated_log = -1e9
        self._group_call = group_call
        self._txn_call = txn_call
        # on_bytes(kind_of_call, peer_node, bytes_in, bytes_out) feeds usage accounting.
        self._on_bytes = on_bytes

    async def _admit(self, request: Any, context: Any) -> None:
        """Refuses (raising, as context.abort does) a call without the cluster's token, or
        whose request did not parse."""
        given = dict(context.invocation_metadata() or ()).get(TOKEN_HEADER, "")
        if not hmac.compare_digest(str(given).encode(), self._token):
            self._refused_unauthenticated += 1
            now = time.monotonic()
            if now - self._last_unauthenticated_log >= 10:  # a flood is one line per 10 s
                self._last_unauthenticated_log = now
                log.warning(
                    "refused %d leader RPC calls without the cluster's token, the last from %s",
                    self._refused_unauthenticated,
                    _caller(context),
                )
                self._refused_unauthenticated = 0
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no valid cluster token")
        await _check_parsed(request, context)

    def _count(self, request: Any, response: Any, from_node: int) -> None:
        if self._on_bytes is not None:
            self._on_bytes(from_node, request.ByteSize(), response.ByteSize())

    async def Append(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC names
        await self._admit(request, context)
        keys = list(request.object_keys)
        for b in request.batches:
            if (
                b.object_index >= len(keys)
                or b.length == 0
                or b.record_count < 1
                or b.control not in (CONTROL_NONE, CONTROL_ABORT, CONTROL_COMMIT)
            ):
                await _refuse(
                    context,
                    request,
                    f"batch of stream {b.stream_id}: object index {b.object_index} of "
                    f"{len(keys)}, length {b.length}, {b.record_count} records, "
                    f"control {b.control}",
                )
        batches = [
            AppendBatch(
                stream_id=b.stream_id,
                leader_epoch=b.leader_epoch,
                object_key=keys[b.object_index],
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
            for b in request.batches
        ]
        results = await self._leader.append(batches)
        response = pb.AppendResponse(
            results=[
                pb.BatchResult(
                    error_code=int(r.error),
                    base_offset=r.base_offset,
                    log_start_offset=r.log_start_offset,
                )
                for r in results
            ]
        )
        self._count(request, response, request.from_node)
        return response

    async def ReadIndex(self, request: Any, context: Any) -> Any:  # noqa: N802
        await self._admit(request, context)
        leader = self._leader
        sid = request.stream_id
        entries: list[IndexEntry] = []
        aborted: tuple[tuple[int, int], ...] = ()
        producers: list[ActiveProducer] = []
        error = ErrorCode.none
        try:
            if request.mode == pb.FROM_OFFSET:
                res = await leader.read_index(
                    sid, request.offset, max(request.max_bytes, 1), request.read_committed
                )
                entries, error, aborted = list(res.entries), res.error, res.aborted
            elif request.mode == pb.FROM_TIMESTAMP:
                entries = (await leader.entries_from_timestamp(sid, request.timestamp))[:64]
            elif request.mode == pb.MAX_TIMESTAMP:
                best = await leader.max_timestamp_entry(sid)
                entries = [best] if best is not None else []
            elif request.mode == pb.PRODUCERS:
                producers = await leader.producers(sid)
            start, hwm, epoch = await leader.offsets(sid)
            stable = await leader.stable_offset(sid)
        except (UnknownStream, LeaderUnavailable) as exc:
            # Deleted meanwhile; or not led here (moved, or not yet known here to have
            # moved here): the caller refreshes its view and asks again.
            code = (
                ErrorCode.unknown_topic_or_partition
                if isinstance(exc, UnknownStream)
                else ErrorCode.not_leader_or_follower
            )
            response = pb.ReadIndexResponse(
                error_code=int(code), high_watermark=-1, log_start_offset=-1, leader_epoch=-1
            )
            self._count(request, response, request.from_node)
            return response
        response = pb.ReadIndexResponse(
            error_code=int(error),
            entries=[entry_to_pb(e) for e in entries],
            high_watermark=hwm,
            log_start_offset=start,
            leader_epoch=epoch,
            last_stable_offset=stable,
            aborted=[pb.AbortedRange(producer_id=p, first_offset=f) for p, f in aborted],
            producers=[
                pb.ProducerState(
                    producer_id=p.producer_id,
                    epoch=p.epoch,
                    last_sequence=p.last_sequence,
                    last_timestamp=p.last_timestamp,
                    coordinator_epoch=p.coordinator_epoch,
                    txn_start_offset=p.txn_start_offset,
                )
                for p in producers
            ],
        )
        self._count(request, response, request.from_node)
        return response

    async def DeleteRecords(self, request: Any, context: Any) -> Any:  # noqa: N802
        await self._admit(request, context)
        try:
            # Served for the client the calling node already checked: no check here.
            with acting_for(request.principal or ANONYMOUS):
                error, start = await self._leader.delete_records(request.stream_id, request.offset)
        except UnknownStream:
            error, start = ErrorCode.unknown_topic_or_partition, -1
        response = pb.DeleteRecordsResponse(error_code=int(error), log_start_offset=start)
        self._count(request, response, request.from_node)
        return response

    async def GroupCall(self, request: Any, context: Any) -> Any:  # noqa: N802
        payload = await self._serve_call(request, context, self._group_call, "group")
        response = pb.GroupCallResponse(payload=payload)
        self._count(request, response, request.from_node)
        return response

    async def TxnCall(self, request: Any, context: Any) -> Any:  # noqa: N802
        payload = await self._serve_call(request, context, self._txn_call, "transaction")
        response = pb.TxnCallResponse(payload=payload)
        self._count(request, response, request.from_node)
        return response

    async def _serve_call(
        self, request: Any, context: Any, serve: GroupCallHandler | None, role: str
    ) -> bytes:
        """A coordinator call passed on by another node, served by this node's `role`."""
        await self._admit(request, context)
        if serve is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"no {role} coordinator here")
        assert serve is not None
        try:
            # Served for the client the calling node already checked: no check here.
            with acting_for(request.principal or ANONYMOUS):
                return await serve(bytes(request.payload))
        except ValueError as exc:  # a call no node would make (group_wire.BadPayload)
            await _refuse(context, request, str(exc))
            raise AssertionError("unreachable") from None

    async def Watch(self, request: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        await self._admit(request, context)
        sids = list(dict.fromkeys(request.stream_ids))
        if len(sids) > _MAX_WATCHED:
            too_many = f"{len(sids)} streams to watch (at most {_MAX_WATCHED})"
            await _refuse(context, request, too_many)
        last: dict[int, int] = {}
        if self._on_bytes is not None:
            self._on_bytes(request.from_node, request.ByteSize(), 0)
        while sids:
            waits = {}
            for sid in list(sids):
                try:
                    fut = await self._leader.changed(sid)
                    _, hwm, _ = await self._leader.offsets(sid)
                except (UnknownStream, LeaderUnavailable):
                    # Deleted, or not led here (any more): nothing this node will say.
                    # Asking again would load another leader's partition here, frozen
                    # (partitions.py); ended, the watch wakes its caller, who
                    # re-resolves the leader.
                    sids.remove(sid)
                    continue
                if last.get(sid) != hwm:
                    last[sid] = hwm
                    event = pb.WatchEvent(stream_id=sid, high_watermark=hwm)
                    if self._on_bytes is not None:
                        self._on_bytes(request.from_node, 0, event.ByteSize())
                    yield event
                waits[sid] = fut
            if waits:
                await asyncio.wait(list(waits.values()), return_when=asyncio.FIRST_COMPLETED)


# A node watches the partitions its consumers read, one stream per call today.
_MAX_WATCHED = 10_000


@dataclass(frozen=True)
class _Unparsed:
    """A request body that is not a valid protobuf message of the method's type."""

    message_type: str
    size: int
    from_node: int = -1


def _lenient(message: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return message.FromString(data)
        except DecodeError:
            return _Unparsed(message.__name__, len(data))

    return parse


async def _check_parsed(request: Any, context: Any) -> None:
    if isinstance(request, _Unparsed):
        await _refuse(
            context, request, f"{request.size} bytes that are not a {request.message_type}"
        )


def _add_servicer(servicer: LeaderServicer, server: grpc.aio.Server) -> None:
    """As the generated add_LeaderServicer_to_server, with one difference: a request that
    does not parse reaches the method as `_Unparsed` instead of raising inside grpc,
    which would log it at ERROR. A peer's garbage is its fault (WARNING, refused)."""
    methods: list[tuple[str, Any, Any, Any]] = [
        ("Append", grpc.unary_unary_rpc_method_handler, pb.AppendRequest, pb.AppendResponse),
        (
            "ReadIndex",
            grpc.unary_unary_rpc_method_handler,
            pb.ReadIndexRequest,
            pb.ReadIndexResponse,
        ),
        ("Watch", grpc.unary_stream_rpc_method_handler, pb.WatchRequest, pb.WatchEvent),
        (
            "DeleteRecords",
            grpc.unary_unary_rpc_method_handler,
            pb.DeleteRecordsRequest,
            pb.DeleteRecordsResponse,
        ),
        (
            "GroupCall",
            grpc.unary_unary_rpc_method_handler,
            pb.GroupCallRequest,
            pb.GroupCallResponse,
        ),
        ("TxnCall", grpc.unary_unary_rpc_method_handler, pb.TxnCallRequest, pb.TxnCallResponse),
    ]
    handlers = {
        name: factory(
            getattr(servicer, name),
            request_deserializer=_lenient(request),
            response_serializer=response.SerializeToString,
        )
        for name, factory, request, response in methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, handlers),))
    server.add_registered_method_handlers(_SERVICE, handlers)


_SERVICE = "zonegate.leader.v1.Leader"


def _caller(context: Any) -> str:
    """The caller's address, and over mutual TLS the name its certificate gives it."""
    names = (context.auth_context() or {}).get("x509_common_name") or []
    names = [n.decode(errors="replace") for n in names if n]
    return f"{context.peer()} (certificate CN={names[0]})" if names else str(context.peer())


async def _refuse(context: Any, request: Any, reason: str) -> None:
    """Ends a call whose request no zonegate node would send: the caller's fault, so a
    WARNING naming the caller, and INVALID_ARGUMENT (raises, as context.abort does)."""
    log.warning(
        "refused %s from node %d (%s): %s",
        getattr(request, "message_type", type(request).__name__),
        getattr(request, "from_node", -1),
        _caller(context),
        reason,
    )
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason)


async def start_leader_server(
    leader: Leader,
    host: str,
    port: int,
    on_bytes: Any = None,
    group_call: GroupCallHandler | None = None,
    token: str = "",
    credentials: grpc.ServerCredentials | None = None,
    txn_call: GroupCallHandler | None = None,
) -> tuple[grpc.aio.Server, int]:
    """The leader's server on host:port (0: any free port); `credentials`: mutual TLS
    (rpc_tls.RpcTls.server_credentials), None: plaintext. The server and its port."""
    server = grpc.aio.server(
        options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)],
    )
    _add_servicer(LeaderServicer(leader, on_bytes, group_call, token, txn_call), server)
    if credentials is not None:
        bound = server.add_secure_port(f"{host}:{port}", credentials)
    else:
        bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    return server, bound
