"""The settings of TLS between a node and what it talks to besides clients: mutual TLS
on the leader RPC between nodes, and the CA bundle that checks the S3 endpoint's
certificate (rows of settings.py); the PostgreSQL connection's TLS is in the metadata
store's URL (`sslmode`, `sslrootcert`: docs/internode-tls.md). Also the node's mutual-TLS
material made from its configuration, or refused at start naming the setting, and the
check at start that the live nodes accept this node's certificate."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zonegate.broker.setting_types import Setting

if TYPE_CHECKING:
    from zonegate.leader_forwarder.peers import LeaderPeers
    from zonegate.leader_forwarder.rpc_tls import RpcTls
    from zonegate.metastore.api import ClusterStore

KEYSTORE_KEY = "zonegate.rpc.ssl.keystore.location"
TRUSTSTORE_KEY = "zonegate.rpc.ssl.truststore.location"

RPC_TLS_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "--rpc-ssl-keystore-location",
        KEYSTORE_KEY,
        None,
        "PEM file holding this node's private key (unencrypted) and certificate chain for "
        "mutual TLS with the other nodes (leader RPC, group forwarding), as Kafka's "
        "ssl.keystore.type=PEM; with the truststore, every node's RPC listener requires "
        "a certificate the cluster's CA signed (default: none, the RPC in plaintext; "
        "docs/internode-tls.md)",
        Path,
        "FILE",
        into="rpc_ssl_keystore",
    ),
    Setting(
        "--rpc-ssl-truststore-location",
        TRUSTSTORE_KEY,
        None,
        "PEM file of the cluster's CA certificate(s): the other nodes' certificates must "
        "be signed by it (default: none; set both or neither)",
        Path,
        "FILE",
        into="rpc_ssl_truststore",
    ),
    Setting(
        "--rpc-ssl-server-name",
        "zonegate.rpc.ssl.server.name",
        None,
        "with mutual TLS, the DNS name every node's certificate carries, checked instead "
        "of the address a node is dialled at; for certificates that cannot name each "
        "node's address (default: none, the address is checked, as an IP or DNS SAN)",
        metavar="NAME",
        into="rpc_ssl_server_name",
    ),
    Setting(
        "--s3-ca-bundle",
        "zonegate.s3.ca.bundle",
        None,
        "PEM file of the CA certificate(s) that sign the S3 endpoint's certificate, for an "
        "https:// endpoint with a private CA (default: the system's CAs; AWS_CA_BUNDLE "
        "also works)",
        Path,
        "FILE",
        into="s3_ca_bundle",
    ),
)


def open_rpc_tls(
    keystore: Path | None, truststore: Path | None, server_name: str | None
) -> RpcTls | None:
    """The node's mutual-TLS material, None when not configured; StartupError names the
    setting when only one file is given or a file cannot serve."""
    # Imported here: startup.py imports the settings (through config.py).
    from zonegate.broker.startup import StartupError

    if keystore is None and truststore is None:
        if server_name:
            raise StartupError(
                "zonegate.rpc.ssl.server.name is set without mutual TLS: set "
                f"{KEYSTORE_KEY} and {TRUSTSTORE_KEY} too"
            )
        return None
    if keystore is None or truststore is None:
        given, missing = (
            (KEYSTORE_KEY, TRUSTSTORE_KEY) if truststore is None else (TRUSTSTORE_KEY, KEYSTORE_KEY)
        )
        raise StartupError(
            f"{given} is set without {missing}: mutual TLS between nodes needs this "
            "node's certificate and the cluster's CA"
        )
    # Imported here: settings are read by every command, and grpc is slow to import.
    from zonegate.leader_forwarder.rpc_tls import RpcTls, RpcTlsError, RpcTlsFiles

    try:
        return RpcTls(RpcTlsFiles(keystore, truststore, server_name or None))
    except RpcTlsError as exc:
        raise StartupError(str(exc)) from None


async def check_peers_accept(
    meta: ClusterStore, peers: LeaderPeers, node_id: int, now_ms: int
) -> None:
    """Refuses to start (StartupError) when the live nodes refuse this node's certificate,
    or present ones its CA did not sign, and none accepts it: such a node could lead no
    partition the others reach, so it must not join. Nodes out of reach do not count."""
    from zonegate.broker.startup import StartupError

    live = [n for n in await meta.list_nodes() if n.live(now_ms) and n.node_id != node_id]
    answered, refused = await peers.refusals(live)
    if refused and not answered:
        raise StartupError(
            f"node {node_id} cannot join the cluster over mutual TLS (is its certificate "
            f"from the cluster's CA?): {'; '.join(refused)}"
        )
