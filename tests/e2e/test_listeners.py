"""Kafka's listeners on real sockets: a 2-zone node with PLAINTEXT, SSL and SASL_SSL
listeners (certificates from trustme), confluent-kafka and kafka-python over TLS,
Metadata and DescribeCluster on each listener naming that listener's ports of the
client's zone, certificate rotation without a restart, and what is not TLS on a TLS
port (or TLS on a plaintext one, or a handshake that never ends) closed with one
WARNING while another client carries on."""

from __future__ import annotations

import datetime
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.alter_client_quotas.v1.request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import f64, i16, i32

from tests.inprocess import InProcessNode
from tests.kafka_raw import RawConnection
from tests.node_harness import free_port_block
from zonegate.records.build import build_batch

pytestmark = pytest.mark.e2e

ZONES = ("zone-a", "zone-b")
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
REAUTH_MS = 1500


@dataclass
class Cluster:
    node: InProcessNode
    ca: trustme.CA
    ca_file: Path
    keystore: Path
    base: int

    def port(self, listener: str, zone: int = 0) -> int:
        return self.base + 3 * LISTENERS.index(listener) + zone

    def conf(self, listener: str, zone: int = 0, **extra: str) -> dict[str, str]:
        conf = {
            "bootstrap.servers": f"127.0.0.1:{self.port(listener, zone)}",
            "client.id": f"zonegate_az={ZONES[zone]}",
        }
        if listener != "PLAINTEXT":
            conf |= {"security.protocol": listener, "ssl.ca.location": str(self.ca_file)}
        if listener == "SASL_SSL":
            conf |= {
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
        return conf | extra

    def warnings(self) -> list[str]:
        return [line for line in self.node.log_text().splitlines() if " WARNING " in line]


@pytest.fixture
def cluster(tmp_path: Path, inprocess_factory: Callable[..., InProcessNode]) -> Iterator[Cluster]:
    ca = trustme.CA()
    keystore, ca_file = tmp_path / "server.pem", tmp_path / "ca.pem"
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(keystore)
    )
    ca.cert_pem.write_to_path(str(ca_file))
    base = free_port_block(9)
    props = tmp_path / "server.properties"
    props.write_text(
        "listeners="
        + ",".join(f"{name}://127.0.0.1:{base + 3 * i}" for i, name in enumerate(LISTENERS))
        + "\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.sasl_ssl.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    user_alice="alice-secret";\n'
        "connection.failed.authentication.delay.ms=200\n"
        # KIP-368: sessions of 1.5 s (librdkafka re-authenticates within them).
        f"listener.name.sasl_ssl.connections.max.reauth.ms={REAUTH_MS}\n"
        "zonegate.ssl.handshake.timeout.ms=500\n"
        # Each group here has one member: a new group's first assignment is not held 3 s
        # for more (as tests/apache_kafka.py's broker).
        "group.initial.rebalance.delay.ms=0\n"
    )
    listen = ",".join(f"{n}://127.0.0.1:{base + 3 * i}" for i, n in enumerate(LISTENERS))
    node = inprocess_factory(
        ["--zones", ",".join(ZONES), "--config", str(props), "--listen", listen]
    )
    # Each node sees the other (its membership refreshes twice a heartbeat).
    deadline = time.monotonic() + 15
    while any(len(n.membership.live_nodes()) < len(ZONES) for n in node.nodes):
        assert time.monotonic() < deadline, "the nodes never saw each other"
        time.sleep(0.1)
    yield Cluster(node, ca, ca_file, keystore, base)


def _produce(conf: dict[str, str], topic: str, n: int) -> None:
    producer = Producer(conf | {"enable.idempotence": "true"})
    for i in range(n):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(30) == 0


def _consume(conf: dict[str, str], topic: str, n: int, group: str) -> list[bytes]:
    consumer = Consumer(conf | {"group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    return got


def test_clients_produce_and_consume_over_tls(cluster: Cluster) -> None:
    for listener in ("SSL", "SASL_SSL"):
        topic = f"over-{listener.lower()}"
        _produce(cluster.conf(listener), topic, 20)
        got = _consume(cluster.conf(listener, 1), topic, 20, f"g-{listener}")
        assert sorted(got) == sorted(f"{topic}-{i}".encode() for i in range(20))
    from kafka import KafkaConsumer, KafkaProducer

    tls = {
        "bootstrap_servers": f"127.0.0.1:{cluster.port('SSL')}",
        "security_protocol": "SSL",
        "ssl_cafile": str(cluster.ca_file),
        "client_id": "zonegate_az=zone-a",
    }
    producer = KafkaProducer(**tls)
    for i in range(5):
        producer.send("kafka-python-tls", f"v{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        "kafka-python-tls",
        group_id="kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
        **tls,
    )
    # The first five, then stop: iterating on to the end would wait out the 15 s of
    # consumer_timeout_ms after the last record (the same five are compared either way).
    values = [m.value for _, m in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(5)]


def test_each_listener_names_its_own_ports_of_the_clients_zone(cluster: Cluster) -> None:
    nodes = {n.config.zone: n.config.node_id for n in cluster.node.nodes}
    for listener in LISTENERS:
        for zone in (0, 1):
            admin = AdminClient(
                cluster.conf(listener, zone=0, **{"client.id": f"zonegate_az={ZONES[zone]}"})
            )
            brokers = {
                b.id: (b.host, b.port) for b in admin.list_topics(timeout=15).brokers.values()
            }
            assert brokers == {nodes[ZONES[zone]]: ("127.0.0.1", cluster.port(listener, zone))}
            described = admin.describe_cluster().result(timeout=15)
            assert [(n.id, n.port) for n in described.nodes] == [
                (nodes[ZONES[zone]], cluster.port(listener, zone))
            ]


def _served_certificate(cluster: Cluster) -> bytes:
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    with socket.create_connection(("127.0.0.1", cluster.port("SSL")), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def test_rotated_certificate_files_serve_new_connections_and_keep_open_ones(
    cluster: Cluster,
) -> None:
    before = _served_certificate(cluster)
    open_one = RawConnection(cluster.port("SSL"))
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    open_one.sock = context.wrap_socket(open_one.sock, server_hostname="localhost")
    assert open_one.request(ApiVersionsRequest()).api_keys
    producer = Producer(cluster.conf("SSL"))
    producer.produce("rotation", b"before")
    assert producer.flush(30) == 0
    # cert-manager's way: the new pair written beside, then renamed over the old file.
    fresh = cluster.keystore.with_suffix(".new")
    cluster.ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(fresh)
    )
    fresh.replace(cluster.keystore)
    deadline = time.monotonic() + 10
    while _served_certificate(cluster) == before:
        assert time.monotonic() < deadline, "the new certificate was never served"
        time.sleep(0.2)
    assert open_one.request(ApiVersionsRequest()).api_keys, "the open connection was dropped"
    producer.produce("rotation", b"after")
    assert producer.flush(30) == 0
    assert sorted(_consume(cluster.conf("SSL"), "rotation", 2, "rot")) == [b"after", b"before"]
    open_one.close()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, OSError):
        return True


def test_what_is_not_tls_is_closed_and_other_clients_do_not_notice(cluster: Cluster) -> None:
    producer = Producer(cluster.conf("SSL"))
    producer.produce("bystander", b"0")
    assert producer.flush(30) == 0
    warned = len(cluster.warnings())
    ssl_port, plain_port = cluster.port("SSL"), cluster.port("PLAINTEXT")
    # A plaintext Kafka client on the TLS port.
    plain = RawConnection(ssl_port)
    plain.sock.sendall(b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x01\x00\x02ab")
    assert _closed_within(plain.sock, 5)
    # Garbage on the TLS port, and a TLS handshake on the plaintext port.
    garbage = socket.create_connection(("127.0.0.1", ssl_port))
    garbage.sendall(b"\x16\x03\x01\x00\x10" + b"\xff" * 16)
    assert _closed_within(garbage, 5)
    with socket.create_connection(("127.0.0.1", plain_port)) as raw:
        context = ssl.create_default_context(cafile=str(cluster.ca_file))
        with pytest.raises((ssl.SSLError, OSError)):
            context.wrap_socket(raw, server_hostname="localhost")
    # A handshake that never ends: closed after zonegate.ssl.handshake.timeout.ms.
    silent = socket.create_connection(("127.0.0.1", ssl_port))
    started = time.monotonic()
    assert _closed_within(silent, 10)
    assert time.monotonic() - started < 5
    for i in range(1, 11):
        producer.produce("bystander", str(i).encode())
    assert producer.flush(30) == 0
    new = cluster.warnings()[warned:]
    reasons = ("plaintext Kafka request", "TLS failed", "TLS handshake on listener", "not finished")
    for reason in reasons:
        assert sum(reason in line for line in new) == 1, (reason, new)
    assert len(new) == 4, new
    assert len(_consume(cluster.conf("SSL"), "bystander", 11, "by")) == 11


def test_wrong_credentials_are_refused_after_the_delay_with_one_info_line(
    cluster: Cluster,
) -> None:
    conn = RawConnection(cluster.port("SASL_SSL"))
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    conn.sock = context.wrap_socket(conn.sock, server_hostname="localhost")
    assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).mechanisms == ("PLAIN",)
    started = time.monotonic()
    answer = conn.request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00wrong"))
    assert time.monotonic() - started >= 0.2  # connection.failed.authentication.delay.ms
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert conn.is_closed_by_peer()
    lines = [
        line
        for line in cluster.node.log_text().splitlines()
        if "Failed authentication with /127.0.0.1" in line
    ]
    assert len(lines) == 1 and " INFO " in lines[0] and "mechanism PLAIN" in lines[0]
    # The same client with the right password is served; a client of a wrong one is not.
    errors: list[KafkaError] = []
    producer = Producer(
        cluster.conf("SASL_SSL", **{"sasl.password": "nope"}) | {"error_cb": errors.append}
    )
    deadline = time.monotonic() + 15
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        producer.poll(0.2)
    _produce(cluster.conf("SASL_SSL"), "authenticated", 3)


def _sasl_ssl(cluster: Cluster) -> RawConnection:
    conn = RawConnection(cluster.port("SASL_SSL"))
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    conn.sock = context.wrap_socket(conn.sock, server_hostname="localhost")
    return conn


def test_raw_tokens_after_a_v0_handshake_authenticate(cluster: Cluster) -> None:
    conn = _sasl_ssl(cluster)
    assert conn.request(SaslHandshakeRequestV0(mechanism="PLAIN")).error_code == ErrorCode.none
    token = b"\x00alice\x00alice-secret"
    conn.send_bytes(struct.pack(">i", len(token)) + token)
    assert conn.read_frame() == b""  # PLAIN's empty answer, framed by its size alone
    assert conn.request(ApiVersionsRequest()).api_keys  # authenticated: served
    conn.close()


def test_a_session_not_renewed_is_closed_at_its_next_request(cluster: Cluster) -> None:
    conn = _sasl_ssl(cluster)
    assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    answer = conn.request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"))
    assert answer.error_code == ErrorCode.none
    assert answer.session_lifetime.total_seconds() * 1000 == REAUTH_MS
    assert conn.request(ApiVersionsRequest()).api_keys
    time.sleep(REAUTH_MS / 1000 + 0.3)
    with pytest.raises((ConnectionError, OSError)):
        conn.request(ApiVersionsRequest())
    assert any(
        "expired" in line and " INFO " in line for line in cluster.node.log_text().splitlines()
    )


def _authenticated(cluster: Cluster) -> RawConnection:
    conn = _sasl_ssl(cluster)
    assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    answer = conn.request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"))
    assert answer.error_code == ErrorCode.none
    return conn


def _produce_throttle_ms(conn: RawConnection, topic: str, value: bytes) -> int:
    batch = build_batch([(None, value, (), int(time.time() * 1000))])
    data = TopicProduceData(
        name=topic,  # type: ignore[arg-type]
        partition_data=(PartitionProduceData(index=i32(0), records=batch),),
    )
    answer = conn.request(
        ProduceRequest(
            transactional_id=None,
            acks=i16(-1),
            timeout=datetime.timedelta(seconds=30),
            topic_data=(data,),
        )
    )
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
    return int(answer.throttle_time.total_seconds() * 1000)


def test_a_user_quota_holds_the_authenticated_user(cluster: Cluster) -> None:
    _produce(cluster.conf("PLAINTEXT"), "quota-topic", 1)  # the topic exists
    admin = RawConnection(cluster.port("PLAINTEXT"))
    (entry,) = admin.request(
        AlterClientQuotasRequest(
            entries=(
                EntryData(
                    entity=(EntityData(entity_type="user", entity_name="alice"),),
                    ops=(OpData(key="producer_byte_rate", value=f64(1024.0), remove=False),),
                ),
            ),
            validate_only=False,
        )
    ).entries
    assert entry.error_code == ErrorCode.none
    value = b"x" * 64 * 1024  # 64 s of alice's 1 KiB/s
    alice = _authenticated(cluster)
    deadline = time.monotonic() + 15
    while _produce_throttle_ms(alice, "quota-topic", value) == 0:  # the quota applies within
        assert time.monotonic() < deadline, "alice was never throttled"  # its refresh
        time.sleep(0.5)
    alice.close()
    anonymous = RawConnection(cluster.port("PLAINTEXT"))
    assert _produce_throttle_ms(anonymous, "quota-topic", value) == 0  # User:ANONYMOUS is not alice
    anonymous.close()
    admin.close()


def test_a_client_certificate_is_the_principal_its_rules_map_it_to(
    tmp_path: Path, inprocess_factory: Callable[..., InProcessNode]
) -> None:
    ca = trustme.CA()
    keystore, ca_file = tmp_path / "server.pem", tmp_path / "ca.pem"
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(keystore)
    )
    ca.cert_pem.write_to_path(str(ca_file))
    base = free_port_block(2)
    props = tmp_path / "mtls.properties"
    props.write_text(
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca_file}\n"
        "ssl.client.auth=required\n"
        "ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/L,DEFAULT\n"
        "zonegate.zones=zone-a\n"
    )
    node = inprocess_factory(
        [
            "--config",
            str(props),
            "--listen",
            f"PLAINTEXT://127.0.0.1:{base},SSL://127.0.0.1:{base + 1}",
        ]
    )
    _produce({"bootstrap.servers": f"127.0.0.1:{base}"}, "mtls-topic", 1)
    admin = RawConnection(base)
    (entry,) = admin.request(
        AlterClientQuotasRequest(
            entries=(
                EntryData(
                    entity=(EntityData(entity_type="user", entity_name="alice"),),
                    ops=(OpData(key="producer_byte_rate", value=f64(1024.0), remove=False),),
                ),
            ),
            validate_only=False,
        )
    ).entries
    assert entry.error_code == ErrorCode.none
    admin.close()

    def connect(common_name: str | None) -> RawConnection:
        conn = RawConnection(base + 1)
        context = ssl.create_default_context(cafile=str(ca_file))
        if common_name is not None:
            ca.issue_cert(
                f"{common_name.lower()}@example.com", common_name=common_name
            ).configure_cert(context)
        conn.sock = context.wrap_socket(conn.sock, server_hostname="localhost")
        return conn

    value = b"x" * 64 * 1024
    alice = connect("Alice")  # CN=Alice,OU=... -> User:alice
    deadline = time.monotonic() + 15
    while _produce_throttle_ms(alice, "mtls-topic", value) == 0:
        assert time.monotonic() < deadline, "User:alice was never throttled"
        time.sleep(0.5)
    alice.close()
    bob = connect("Bob")
    assert _produce_throttle_ms(bob, "mtls-topic", value) == 0  # User:bob has no quota
    bob.close()
    without = connect(None)  # ssl.client.auth=required: no certificate, no connection
    with pytest.raises((ConnectionError, OSError)):
        without.request(ApiVersionsRequest())
    assert any("TLS failed" in line and "WARNING" in line for line in node.log_text().splitlines())
