"""The leader's gRPC service answers bad or stale calls with errors, never a crash.

A real gRPC server over a real SQLite store: a deleted (or never created)
partition is UNKNOWN_TOPIC_OR_PARTITION, through the RPC client as in
process; a call without the cluster's token is refused (UNAUTHENTICATED); a
call no zonegate node would send is refused with INVALID_ARGUMENT and one
WARNING naming the caller; garbage bytes on the port close the stream.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import grpc
import pytest
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.grpc_server import start_leader_server
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.leader_forwarder.proto import leader_pb2 as pb
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.storage.index import UnknownStream

pytestmark = pytest.mark.integration


def test_unknown_streams_and_refused_calls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        t = await meta.create_topic("t", {}, [1])
        (sid,) = (p.stream_id for p in t.partitions)
        leader = LeaderService(meta)
        server, port = await start_leader_server(leader, "127.0.0.1", 0, token="s3cret")
        remote = RemoteLeader(f"127.0.0.1:{port}", from_node=7, token="s3cret")
        stranger = RemoteLeader(f"127.0.0.1:{port}", from_node=8, token="guess")
        try:
            ok = AppendBatch(sid, ANY_EPOCH, "obj", 0, 100, 1, 1000, -1, -1, -1)
            gone = AppendBatch(sid + 1000, ANY_EPOCH, "obj", 0, 100, 1, 1000, -1, -1, -1)
            results = await remote.append([ok, gone, ok])
            assert [r.error for r in results] == [
                ErrorCode.none,
                ErrorCode.unknown_topic_or_partition,
                ErrorCode.none,
            ]
            assert [r.base_offset for r in results] == [0, -1, 1]
            for call in (
                remote.offsets(sid + 1000),
                remote.read_index(sid + 1000, 0, 100),
                leader.offsets(sid + 1000),
            ):
                with pytest.raises(UnknownStream):
                    await call

            # Without the cluster's token nothing is served, not even a read.
            with pytest.raises(LeaderUnavailable, match="UNAUTHENTICATED"):
                await stranger.append([ok])
            with pytest.raises(LeaderUnavailable, match="UNAUTHENTICATED"):
                await stranger.offsets(sid)
            assert (await remote.offsets(sid))[1] == 2  # the stranger appended nothing

            token = (("zonegate-rpc-token", "s3cret"),)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                append = channel.unary_unary(
                    "/zonegate.leader.v1.Leader/Append",
                    request_serializer=pb.AppendRequest.SerializeToString,
                    response_deserializer=pb.AppendResponse.FromString,
                )
                bad = pb.AppendRequest(
                    object_keys=["k"],
                    batches=[
                        pb.BatchSummary(stream_id=sid, object_index=5, length=10, record_count=1)
                    ],
                    from_node=9,
                )
                with caplog.at_level(logging.WARNING):
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await append(bad, metadata=token)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "object index 5 of 1" in (err.value.details() or "")
                raw = channel.unary_unary("/zonegate.leader.v1.Leader/ReadIndex")
                with pytest.raises(grpc.aio.AioRpcError):
                    await raw(b"\xff\xff\xff garbage", metadata=token)
            refused = [
                r for r in caplog.records if "refused AppendRequest from node 9" in r.message
            ]
            assert len(refused) == 1 and refused[0].levelno == logging.WARNING

            # Bytes that are not HTTP/2 at all: the connection closes, the server serves on.
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(b"\x00\x00\x00\x1b" + bytes(range(200)))
                s.settimeout(5)
                while s.recv(4096):
                    pass
            assert (await remote.offsets(sid))[1] == 2
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        finally:
            await remote.close()
            await stranger.close()
            await server.stop(None)
            await meta.close()

    asyncio.run(run())


def test_a_partition_that_moved_away_is_refused_and_its_watch_ends(tmp_path: Path) -> None:
    """Over the wire: once the node's catalog says another node leads a partition, its
    reads are answered NOT_LEADER_OR_FOLLOWER (the client raises LeaderUnavailable, so
    the caller's directory re-resolves the leader) and a watch of it ends (waking its
    waiter) instead of loading the other leader's partition here, where it would freeze."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [1])).partitions[0].stream_id
        catalog = {sid: 0}  # this node (1) leads the stream at epoch 0
        leader = LeaderService(meta, leads=catalog.get)
        server, port = await start_leader_server(leader, "127.0.0.1", 0, token="s3cret")
        remote = RemoteLeader(f"127.0.0.1:{port}", from_node=7, token="s3cret")
        try:
            assert (await remote.append([AppendBatch(sid, 0, "o", 0, 9, 1, 1, -1, -1, -1)]))[
                0
            ].base_offset == 0
            first = await remote.changed(sid)
            await asyncio.wait_for(first, 10)  # the watch's first event: the current state
            waiting = await remote.changed(sid)
            await meta.move_partitions([(sid, 2)])
            del catalog[sid]  # the catalog refresh, then its listener (moves.py)
            leader.forget([sid])
            await asyncio.wait_for(waiting, 10)  # the watch ended: its waiter re-asks
            with pytest.raises(LeaderUnavailable, match="not led"):
                await remote.read_index(sid, 0, 100)
            with pytest.raises(LeaderUnavailable, match="not led"):
                await remote.offsets(sid)
        finally:
            await remote.close()
            await server.stop(None)
            await meta.close()

    asyncio.run(run())
