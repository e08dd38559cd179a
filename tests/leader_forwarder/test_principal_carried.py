"""Calls passed to another node carry the client's principal, and the receiving node
names it in the log lines of the changes it makes, without checking it again.

The unit test links a node's RPC client to another node's servicer in process (the
request serialized and parsed as on the wire; no network): a group call made for
User:alice on node 1 deletes offsets and the group on node 2, whose coordinator logs
User:alice. The integration test does the same for DeleteRecords over a real gRPC
server and a real leader, with and without a principal (User:ANONYMOUS).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import grpc
import pytest
from kio.schema.errors import ErrorCode

from tests.services.test_groups import GROUP, Cluster, _offset
from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.grpc_server import LeaderServicer, start_leader_server
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.proto import leader_pb2 as pb
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock
from zonegate.runtime.principal import acting_for, current_principal

TOKEN = "s3cret"


class _Context:
    """The servicer's side of one call: the caller's metadata, and abort as grpc's."""

    def __init__(self, metadata: Any) -> None:
        self._metadata = metadata

    def invocation_metadata(self) -> Any:
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise AssertionError(f"aborted: {code.name} {details}")


class _InProcessStub:
    """The client's stub, its GroupCall bytes handed to a servicer instead of a socket."""

    def __init__(self, servicer: LeaderServicer) -> None:
        self.servicer = servicer
        self.sent: list[Any] = []

    async def GroupCall(self, request: Any, **options: Any) -> Any:  # noqa: N802 - gRPC's
        parsed = pb.GroupCallRequest.FromString(request.SerializeToString())
        self.sent.append(parsed)
        response = await self.servicer.GroupCall(parsed, _Context(options["metadata"]))
        return pb.GroupCallResponse.FromString(response.SerializeToString())


@pytest.mark.unit
def test_a_passed_group_call_carries_the_principal_to_the_coordinators_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        c = Cluster(meta, ManualClock())  # node 2 coordinates every group
        servicer = LeaderServicer(LeaderService(meta), group_call=c.nodes[2].serve, token=TOKEN)
        remote = RemoteLeader("127.0.0.1:1", from_node=1, token=TOKEN)  # never dialled
        stub = _InProcessStub(servicer)
        remote._stub = stub
        c.links[2] = remote  # type: ignore[assignment]
        try:
            with acting_for("User:alice"):
                errors = await c.nodes[1].commit_offsets(GROUP, -1, "", None, [_offset(0, 5)])
                assert errors == [ErrorCode.none]
                error, _ = await c.nodes[1].delete_offsets(GROUP, [("t", 0)])
                assert error == ErrorCode.none
                assert await c.nodes[1].commit_offsets(GROUP, -1, "", None, [_offset(1, 1)])
                assert await c.nodes[1].delete_group(GROUP) == ErrorCode.none
            # Served on node 2, the principal back to none once the call is over.
            assert GROUP not in c.coordinators[0].groups
            assert current_principal() == ""
        finally:
            await remote.close()
            await meta.close()
        assert [r.principal for r in stub.sent] == ["User:alice"] * 4
        assert [r.from_node for r in stub.sent] == [1] * 4

    with caplog.at_level(logging.INFO, logger="zonegate.coordinator.service"):
        asyncio.run(main())
    lines = [r.getMessage() for r in caplog.records if r.name == "zonegate.coordinator.service"]
    assert f"group {GROUP!r}: offsets of [('t', 0)] deleted (by User:alice)" in lines
    assert f"group {GROUP!r}: deleted (by User:alice)" in lines


@pytest.mark.integration
def test_a_passed_delete_records_names_the_principal_in_the_leaders_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        t = await meta.create_topic("t", {}, [1])
        (sid,) = (p.stream_id for p in t.partitions)
        server, port = await start_leader_server(LeaderService(meta), "127.0.0.1", 0, token=TOKEN)
        remote = RemoteLeader(f"127.0.0.1:{port}", from_node=3, token=TOKEN)
        try:
            with acting_for("User:bob"):
                assert await remote.delete_records(sid, 0) == (ErrorCode.none, 0)
            # A request context without a principal is sent as Kafka's anonymous one.
            assert await remote.delete_records(sid, -1) == (ErrorCode.none, 0)
        finally:
            await remote.close()
            await server.stop(None)
            await meta.close()

    with caplog.at_level(logging.INFO, logger="zonegate.leader_forwarder.log_changes"):
        asyncio.run(main())
    lines = [r.getMessage() for r in caplog.records if "records before" in r.getMessage()]
    assert [line.split("(by ")[1] for line in lines] == ["User:bob)", "User:ANONYMOUS)"]
