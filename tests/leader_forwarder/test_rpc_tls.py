"""Mutual TLS on the leader RPC, over real sockets with trustme's certificates.

A node with a certificate from the cluster's CA is served; one whose certificate another
CA signed, one without a certificate and one in plaintext are refused in the handshake,
before any call reaches the leader, and the refused caller logs one WARNING naming the
peer and the reason; a rotated certificate is what new connections get, on both sides.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
from pathlib import Path

import grpc
import pytest
import trustme

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.grpc_server import start_leader_server
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.leader_forwarder.peers import LeaderPeers
from zonegate.leader_forwarder.proto import leader_pb2 as pb
from zonegate.leader_forwarder.rpc_tls import RpcTls, RpcTlsFiles
from zonegate.metastore.models import NodeRecord
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.usage.accounting import Accounting

pytestmark = pytest.mark.integration


def node_files(tmp: Path, name: str, ca: trustme.CA, trusted: trustme.CA) -> RpcTlsFiles:
    """A node's keystore (a certificate `ca` signed, for 127.0.0.1) and truststore."""
    cert = ca.issue_cert("127.0.0.1", "localhost", common_name=name)
    keystore, truststore = tmp / f"{name}.pem", tmp / f"{name}-ca.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    trusted.cert_pem.write_to_path(str(truststore))
    return RpcTlsFiles(keystore, truststore)


def served_name(port: int, client: RpcTlsFiles) -> str:
    """The common name of the certificate the server presents to a new connection."""
    ctx = ssl.create_default_context(cafile=str(client.truststore))
    ctx.load_cert_chain(client.keystore)
    ctx.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        subject = dict(x[0] for x in tls.getpeercert()["subject"])  # type: ignore[index]
        return str(subject["commonName"])


class Nodes:
    def __init__(self, rec: NodeRecord) -> None:
        self.rec = rec

    def node(self, node_id: int) -> NodeRecord | None:
        return self.rec if node_id == self.rec.node_id else None

    def zone_of(self, node_id: int) -> str:
        return self.rec.zone


def test_mutual_tls_admits_the_cluster_and_refuses_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster_ca, other_ca = trustme.CA(), trustme.CA()
    leader_files = node_files(tmp_path, "node-1", cluster_ca, cluster_ca)
    member = RpcTls(node_files(tmp_path, "node-2", cluster_ca, cluster_ca))
    # An outsider: its own CA's certificate, and trusting only that CA.
    outsider = RpcTls(node_files(tmp_path, "rogue", other_ca, other_ca))
    rogue_cert = other_ca.issue_cert("127.0.0.1")

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        t = await meta.create_topic("t", {}, [1])
        (sid,) = (p.stream_id for p in t.partitions)
        leader = LeaderService(meta)
        tls = RpcTls(leader_files)
        server, port = await start_leader_server(
            leader, "127.0.0.1", 0, token="s3cret", credentials=tls.server_credentials()
        )
        target = f"127.0.0.1:{port}"

        def remote(creds: grpc.ChannelCredentials, name: str) -> RemoteLeader:
            return RemoteLeader(target, from_node=2, token="s3cret", credentials=creds, name=name)

        good = remote(member.channel_credentials(), "node 1")
        stranger = remote(outsider.channel_credentials(), "node 1")
        # Trusts the cluster's CA, but presents another CA's certificate.
        impostor = remote(
            grpc.ssl_channel_credentials(
                cluster_ca.cert_pem.bytes(),
                rogue_cert.private_key_pem.bytes(),
                b"".join(b.bytes() for b in rogue_cert.cert_chain_pems),
            ),
            "node 1",
        )
        try:
            batch = AppendBatch(sid, ANY_EPOCH, "obj", 0, 100, 1, 1000, -1, -1, -1)
            assert [r.base_offset for r in await good.append([batch])] == [0]

            caplog.clear()
            with caplog.at_level(logging.WARNING):
                with pytest.raises(LeaderUnavailable, match="not signed by this node's CA"):
                    await stranger.append([batch])
                with pytest.raises(LeaderUnavailable, match="refuses this node's certificate"):
                    await impostor.append([batch])
            lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
            assert len(lines) == 2, lines  # one line per refused peer, naming it and why
            assert all(f"node 1 at {target}" in line for line in lines)

            # Raw gRPC calls: without a client certificate, and in plaintext.
            no_cert = grpc.ssl_channel_credentials(cluster_ca.cert_pem.bytes())
            for channel in (
                grpc.aio.secure_channel(target, no_cert),
                grpc.aio.insecure_channel(target),
            ):
                async with channel:
                    append = channel.unary_unary(
                        "/zonegate.leader.v1.Leader/Append",
                        request_serializer=pb.AppendRequest.SerializeToString,
                        response_deserializer=pb.AppendResponse.FromString,
                    )
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await append(
                            pb.AppendRequest(object_keys=["k"]),
                            metadata=(("zonegate-rpc-token", "s3cret"),),
                            timeout=5,
                        )
                    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            # Nothing the refused callers sent was appended.
            assert (await good.offsets(sid))[1] == 1

            # Rotation, server side: new connections get the new certificate.
            assert served_name(port, member.files) == "node-1"
            rotated = cluster_ca.issue_cert("127.0.0.1", common_name="node-1-rotated")
            staged = tmp_path / "staged.pem"
            rotated.private_key_and_cert_chain_pem.write_to_path(str(staged))
            os.replace(staged, leader_files.keystore)  # as a Secret's files are swapped
            assert served_name(port, member.files) == "node-1-rotated"
            assert (await good.offsets(sid))[1] == 1, "the open channel keeps working"
        finally:
            for r in (good, stranger, impostor):
                await r.close()
            await server.stop(0)
            await meta.close()

    asyncio.run(run())


def test_peers_make_new_channels_after_their_certificates_rotate(tmp_path: Path) -> None:
    ca = trustme.CA()
    now = [0.0]
    files = node_files(tmp_path, "node-2", ca, ca)
    tls = RpcTls(files, monotonic=lambda: now[0])

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        server_tls = RpcTls(node_files(tmp_path, "node-1", ca, ca))
        server, port = await start_leader_server(
            LeaderService(meta), "127.0.0.1", 0, credentials=server_tls.server_credentials()
        )
        rec = NodeRecord(1, "zone-a", "127.0.0.1", 1, "127.0.0.1", port)
        peers = LeaderPeers(2, "zone-b", Nodes(rec), Accounting(2, "zone-b"))
        peers.tls = tls
        try:
            first = peers.client(1)
            assert first is not None and await first.probe() is None
            rotated = ca.issue_cert("127.0.0.1", common_name="node-2-rotated")
            rotated.private_key_and_cert_chain_pem.write_to_path(str(files.keystore))
            assert peers.client(1) is first, "the files are looked at once a second at most"
            now[0] += 1.0
            second = peers.client(1)
            assert second is not first and second is not None
            assert second.tls_generation == 1
            assert await second.probe() is None
            assert await first.probe() is None, "the replaced channel still serves its calls"
        finally:
            await peers.close()
            await server.stop(0)
            await meta.close()

    asyncio.run(run())


def test_one_server_name_for_certificates_without_the_nodes_addresses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Certificates naming only `zonegate-rpc`, not 127.0.0.1: refused by the address,
    served with zonegate.rpc.ssl.server.name; a caller with a certificate but without the
    token is refused and logged with its certificate's name."""
    ca = trustme.CA()

    def files(name: str, server_name: str | None) -> RpcTlsFiles:
        keystore, truststore = tmp_path / f"{name}.pem", tmp_path / "ca.pem"
        cert = ca.issue_cert("zonegate-rpc", common_name=name)
        cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
        ca.cert_pem.write_to_path(str(truststore))
        return RpcTlsFiles(keystore, truststore, server_name)

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        server_tls = RpcTls(files("node-1", None))
        server, port = await start_leader_server(
            LeaderService(meta),
            "127.0.0.1",
            0,
            token="s3cret",
            credentials=server_tls.server_credentials(),
        )
        by_name, by_address = RpcTls(files("node-2", "zonegate-rpc")), RpcTls(files("node-3", None))
        target = f"127.0.0.1:{port}"
        clients = [
            RemoteLeader(
                target,
                from_node=n,
                token=token,
                credentials=tls.channel_credentials(),
                options=tls.channel_options(),
            )
            for n, tls, token in (
                (2, by_name, "s3cret"),
                (3, by_address, "s3cret"),
                (4, by_name, "guess"),
            )
        ]
        try:
            assert await clients[0].probe() is None
            assert "does not name the address dialled" in str(await clients[1].probe())
            with caplog.at_level(logging.WARNING):
                assert await clients[2].probe() == "UNAUTHENTICATED"
            assert "CN=node-2" in caplog.text, "the caller named by its certificate"
        finally:
            for c in clients:
                await c.close()
            await server.stop(0)
            await meta.close()

    asyncio.run(run())
