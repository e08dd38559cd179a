"""Real clients over every secured listener Kafka users deploy (issue 25).

One node for the module, with Kafka's listeners PLAINTEXT, SSL (client certificates
requested, a principal mapping rule) and SASL_SSL (PLAIN users from the JAAS line,
SCRAM-SHA-256 and SCRAM-SHA-512 users created with AlterUserScramCredentials, OAUTHBEARER
tokens checked against a JWKS served on loopback by the test). For each of
confluent-kafka, kafka-python, aiokafka and kcat, and each way in (SSL, mutual TLS, and
the four SASL mechanisms): an admin call, produce, consume in a group. Each bad login
(wrong password, unknown user, expired token, token signed by a key the JWKS does not
hold) is refused, the node answering SASL_AUTHENTICATION_FAILED with Kafka's message;
clients that speak the wrong protocol on a port are closed. The mapped certificate
principal is seen where a user sees it: its `user` client quota applies.

kcat (Debian's 1.7.1, librdkafka 2.0.2 built without libcurl) cannot fetch OAuth tokens
(sasl.oauthbearer.method=oidc) nor be handed one, so it does not log in with OAUTHBEARER
here; its OAUTHBEARER refusal is of librdkafka's unsecured (unsigned) JWT.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests import java_peer
from tests.e2e.test_client_quotas import Admin as QuotaAdmin
from tests.e2e.test_client_quotas import Throttles
from tests.kafka_raw import RawConnection
from tests.security.certs import ClientCert, TestPki
from tests.security.client_configs import (
    Login,
    Oidc,
    confluent,
    java_args,
    java_properties_file,
)
from tests.security.oauth import AUDIENCE, CLIENT_ID, CLIENT_SECRET, ISSUER, TokenIssuer
from tests.security.roundtrip import CLIENTS, VALUES, refusal, roundtrip
from tests.security.secure_node import SecureNode, security_properties
from zonegate.proxy.codec import encode_request
from zonegate.proxy.secured import ANSWER_LINGER_S

pytestmark = pytest.mark.e2e

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
SASL_AUTHENTICATION_FAILED = 58
KINDS = ("SSL", "mTLS", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
BAD = {
    "PLAIN wrong password": ("PLAIN", {"password": "not-the-password"}),
    "PLAIN unknown user": ("PLAIN", {"username": "mallory"}),
    "SCRAM-SHA-256 wrong password": ("SCRAM-SHA-256", {"password": "not-the-password"}),
    "SCRAM-SHA-512 unknown user": ("SCRAM-SHA-512", {"username": "mallory"}),
    "OAUTHBEARER expired token": ("OAUTHBEARER", {"expired": True}),
    "OAUTHBEARER foreign key": ("OAUTHBEARER", {"foreign": True}),
}

# What Kafka's SaslServerAuthenticator answers a failed login with, per mechanism.
KAFKA_MESSAGES = {
    "PLAIN": "Authentication failed: Invalid username or password",
    **{
        m: "Authentication failed during authentication due to invalid credentials with "
        f"SASL mechanism {m}"
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    },
    # OAuthBearerSaslServer's error challenge, which ends the exchange as the message.
    "OAUTHBEARER": '{"status":"invalid_token"}',
}


@dataclass
class Secured:
    node: SecureNode
    pki: TestPki
    issuer: TokenIssuer
    alice: ClientCert

    def login(self, kind: str) -> Login:
        tls = Login(self.node.bootstrap_of("SSL"), "SSL", ca=self.pki.ca_file)
        sasl = Login(self.node.bootstrap_of("SASL_SSL"), "SASL_SSL", ca=self.pki.ca_file)
        issuer = self.issuer
        if kind == "SSL":
            return tls
        if kind == "mTLS":
            return tls.but(client_cert=self.alice)
        if kind == "PLAIN":
            return sasl.but(mechanism="PLAIN", username="alice", password="alice-secret")
        if kind.startswith("SCRAM-"):
            return sasl.but(mechanism=kind, username=SCRAM_USER, password=SCRAM_PASSWORD)
        assert kind == "OAUTHBEARER"
        return sasl.but(
            mechanism="OAUTHBEARER",
            token=lambda: issuer.mint("dave"),
            oidc=Oidc(issuer.token_url, CLIENT_ID, CLIENT_SECRET),
        )

    def bad_login(self, case: str) -> Login:
        kind, change = BAD[case]
        login = self.login(kind)
        if kind != "OAUTHBEARER":
            return login.but(**change)
        issuer = self.issuer
        if change.get("expired"):
            return login.but(token=lambda: issuer.mint("dave", lifetime_s=-60), oidc=None)
        assert login.oidc is not None
        return login.but(
            token=lambda: issuer.mint("dave", foreign=True),
            oidc=Oidc(issuer.token_url + "/foreign", CLIENT_ID, CLIENT_SECRET),
        )


def create_scram_users(bootstrap_login: Login) -> None:
    """carol gets a SCRAM-SHA-256 and a SCRAM-SHA-512 credential through
    AlterUserScramCredentials (KIP-554), sent by PLAIN's admin over SASL_SSL."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(confluent(bootstrap_login))
    # One request per mechanism: Kafka refuses a user altered twice in one request.
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsert = UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(mechanism, 4096), SCRAM_PASSWORD.encode()
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
    described = admin.describe_user_scram_credentials([SCRAM_USER])[SCRAM_USER].result(30)
    assert {i.mechanism for i in described.scram_credential_infos} == {
        ScramMechanism.SCRAM_SHA_256,
        ScramMechanism.SCRAM_SHA_512,
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("security")
    pki = TestPki(tmp / "pki")
    issuer = TokenIssuer().start()
    node = SecureNode(tmp / "node", LISTENERS)
    props = security_properties(pki, node.ports, issuer.jwks_url, issuer=ISSUER, audience=AUDIENCE)
    props["zonegate.ssl.handshake.timeout.ms"] = "3000"
    # Each group here has one member: Kafka's 3 s wait for more members before a new
    # group's first assignment is only idle time in every round trip (as tests/apache_kafka.py
    # sets it for the Kafka broker).
    props["group.initial.rebalance.delay.ms"] = "0"
    node.write_config(props)
    try:
        node.start()
        env = Secured(node, pki, issuer, pki.client("alice", "payments"))
        admin = env.login("PLAIN").but(username="admin", password="admin-secret")
        create_scram_users(admin)
        yield env
    finally:
        node.stop()
        issuer.stop()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("client", CLIENTS)
def test_client_produces_and_consumes_in_a_group(secured: Secured, client: str, kind: str) -> None:
    if client == "kcat" and kind == "OAUTHBEARER":
        pytest.skip("Debian's kcat has no OIDC token fetching (librdkafka built without libcurl)")
    name = f"sec-{client}-{kind}".lower()
    got = roundtrip(client, secured.login(kind), name, name + "-group")
    assert got == sorted(VALUES)


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("client", CLIENTS)
def test_bad_login_is_refused(secured: Secured, client: str, case: str) -> None:
    login = secured.bad_login(case)
    if client == "kcat" and case == "OAUTHBEARER expired token":
        pytest.skip("kcat cannot be handed a token; its unsigned one is the foreign-key case")
    if client == "kcat" and case == "OAUTHBEARER foreign key":
        login = login.but(oidc=None, username="dave")  # librdkafka's unsecured JWT
    seen = refusal(client, login)
    if client == "aiokafka" and BAD[case][0] == "OAUTHBEARER":
        # aiokafka does not answer the server's OAUTHBEARER error challenge with the %x01
        # that Kafka's protocol asks for; it sends its Metadata request instead, which the
        # node (as Kafka's handleSaslToken) answers with ILLEGAL_SASL_STATE and no broker,
        # then closes. aiokafka takes that answer for a start, and gets nothing after it.
        assert seen.startswith("started, then refused"), seen
        assert (
            "Unexpected Kafka request of type METADATA during SASL authentication"
            in secured.node.log_text()
        )
        return
    # Each client reports the node's SASL_AUTHENTICATION_FAILED with Kafka's message.
    assert KAFKA_MESSAGES[BAD[case][0]] in seen, seen


# -- the node's own answer, byte for byte -------------------------------------------
def _tls_raw(secured: Secured, listener: str) -> RawConnection:
    conn = RawConnection(secured.node.ports[listener])
    context = ssl.create_default_context(cafile=str(secured.pki.ca_file))
    conn.sock = context.wrap_socket(conn.sock, server_hostname="127.0.0.1")
    return conn


@pytest.mark.parametrize(
    ("mechanism", "token", "message"),
    [
        (
            "PLAIN",
            b"\x00alice\x00wrong",
            "Authentication failed: Invalid username or password",
        ),
        (
            "SCRAM-SHA-512",
            b"n,,n=mallory,r=fyko+d2lbbFgONRv9qkxdawL",
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512",
        ),
    ],
)
def test_the_node_answers_sasl_authentication_failed_with_kafkas_message(
    secured: Secured, mechanism: str, token: bytes, message: str
) -> None:
    conn = _tls_raw(secured, "SASL_SSL")
    try:
        shake = conn.request(SaslHandshakeRequest(mechanism=mechanism))
        assert shake.error_code == 0 and mechanism in shake.mechanisms
        started = time.monotonic()
        answer = conn.request(SaslAuthenticateRequest(auth_bytes=token))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert answer.error_message == message
        # connection.failed.authentication.delay.ms (100 ms here), then closed.
        answered = time.monotonic()
        assert answered - started >= 0.09
        # Not in the same breath as the answer: a client that reads the answer and the
        # end of the stream in one pass (kafka-python 3) would report only the end.
        assert not _ended_already(conn), "the close came with the answer"
        assert conn.is_closed_by_peer()
        # ... and without the client's help, within secured.ANSWER_LINGER_S.
        assert time.monotonic() - answered < ANSWER_LINGER_S + 2
    finally:
        conn.close()
    log = secured.node.log_text()
    assert mechanism in log and "127.0.0.1" in log


def _ended_already(conn: RawConnection) -> bool:
    """Whether the stream already ended (without waiting for more bytes)."""
    timeout = conn.sock.gettimeout()
    conn.sock.setblocking(False)
    try:
        return bool(conn.sock.recv(1) == b"")
    except (ssl.SSLWantReadError, BlockingIOError):
        return False
    finally:
        conn.sock.settimeout(timeout)


def test_before_authentication_only_api_versions_and_handshake_are_served(
    secured: Secured,
) -> None:
    """A Metadata request on the SASL_SSL listener before SaslHandshake closes the
    connection unanswered (Kafka's SaslServerAuthenticator.handleKafkaRequest fails
    before building any answer): nothing is served unauthenticated."""
    from kio.schema.metadata.v12.request import MetadataRequest

    conn = _tls_raw(secured, "SASL_SSL")
    try:
        conn.sock.sendall(
            encode_request(
                1,
                "raw",
                MetadataRequest(
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                ),
            )
        )
        assert conn.is_closed_by_peer()
    finally:
        conn.close()


def test_a_request_between_handshake_and_authenticate_gets_illegal_sasl_state(
    secured: Secured,
) -> None:
    """Kafka's SaslServerAuthenticator.handleSaslToken: a request other than
    SaslAuthenticate after SaslHandshake is answered with its API's error response,
    ILLEGAL_SASL_STATE (34) per topic asked for Metadata, after
    connection.failed.authentication.delay.ms, and the connection closed. The node
    goes on serving others."""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.metadata.v12.response import MetadataResponse

    from zonegate.proxy.codec import decode_response

    conn = _tls_raw(secured, "SASL_SSL")
    try:
        shake = conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert shake.error_code == 0
        started = time.monotonic()
        conn.sock.sendall(
            encode_request(
                9,
                "raw",
                MetadataRequest(
                    topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="orders"),),  # type: ignore[arg-type]
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                ),
            )
        )
        cid, answer = decode_response(conn.read_frame(), MetadataResponse)
        assert time.monotonic() - started >= 0.09  # the failed-authentication delay
        assert cid == 9
        assert [(t.name, t.error_code.value) for t in answer.topics] == [("orders", 34)]
        assert answer.brokers == ()  # nothing about the cluster before a login
        assert conn.is_closed_by_peer()
    finally:
        conn.close()
    # the node is up and serves a new connection
    fresh = _tls_raw(secured, "SASL_SSL")
    try:
        assert fresh.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    finally:
        fresh.close()


# -- the wrong protocol on a port ---------------------------------------------------
API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # a plaintext ApiVersions v0


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, ssl.SSLError, OSError):
        return True
    except TimeoutError:
        return False


def test_plaintext_client_on_a_tls_port_is_closed(secured: Secured) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    for listener in ("SSL", "SASL_SSL"):
        with socket.create_connection(("127.0.0.1", secured.node.ports[listener])) as s:
            s.sendall(API_VERSIONS_V0)
            assert _closed_within(s, 10), listener
        admin = AdminClient({"bootstrap.servers": secured.node.bootstrap_of(listener)})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=3)
    assert "WARNING" in secured.node.log_text()


def test_tls_client_on_the_plaintext_port_fails_its_handshake(secured: Secured) -> None:
    context = ssl.create_default_context(cafile=str(secured.pki.ca_file))
    with socket.create_connection(("127.0.0.1", secured.node.ports["PLAINTEXT"])) as raw:
        raw.settimeout(10)
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            context.wrap_socket(raw, server_hostname="127.0.0.1")


def test_a_tls_handshake_that_never_finishes_is_closed(secured: Secured) -> None:
    """zonegate.ssl.handshake.timeout.ms is 3 s here: a client that connects and says
    nothing is closed soon after, and the node's other clients do not notice."""
    with socket.create_connection(("127.0.0.1", secured.node.ports["SSL"])) as s:
        started = time.monotonic()
        assert _closed_within(s, 15)
        assert 2.0 <= time.monotonic() - started < 15
    got = roundtrip("confluent-kafka", secured.login("SSL"), "sec-after-stall", "sec-stall-g")
    assert got == sorted(VALUES)


def test_a_clients_tls_close_is_answered(secured: Secured) -> None:
    """A client closing its TLS session (close_notify) gets the node's close_notify at
    once: asyncio's clients (aiokafka) otherwise wait 30 s on each close."""
    context = ssl.create_default_context(cafile=str(secured.pki.ca_file))
    raw = socket.create_connection(("127.0.0.1", secured.node.ports["SSL"]), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.settimeout(5)
        started = time.monotonic()
        tls.unwrap()
        assert time.monotonic() - started < 2


def test_a_certificate_from_another_ca_is_refused(secured: Secured) -> None:
    """ssl.client.auth=requested: a client may come without a certificate, but one that
    presents a certificate the cluster's CA did not sign is refused in the handshake
    (under TLS 1.3 the client learns it at its first read)."""
    foreign = secured.pki.client("eve", "payments", other_ca=True)
    context = ssl.create_default_context(cafile=str(secured.pki.ca_file))
    context.load_cert_chain(str(foreign.cert), str(foreign.key))
    raw = socket.create_connection(("127.0.0.1", secured.node.ports["SSL"]), timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(API_VERSIONS_V0)
            assert tls.recv(4) == b"", "the node served a client whose certificate it refused"
            raise ConnectionError("closed")


# -- the principal, where a user sees it: the user's client quota ----------------------
def test_mapped_certificate_principal_gets_its_users_quota(secured: Secured) -> None:
    """ssl.principal.mapping.rules maps CN=alice,OU=payments,... to alice@payments; a
    producer_byte_rate for that user throttles the mTLS client, not an anonymous one."""
    admin = QuotaAdmin(secured.node.bootstrap)
    try:
        code, message = admin.alter(
            [("user", "alice@payments")], [("producer_byte_rate", 1000.0, False)]
        )
        assert code == 0, message
    finally:
        admin.close()
    assert _throttled(secured.login("mTLS"), "sec-quota-mtls")
    assert not _throttled(secured.login("SSL"), "sec-quota-anonymous")


def _throttled(login: Login, topic: str) -> bool:
    """Whether a producer sending 60 KB at once was answered with a throttle time."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = confluent(login)
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    throttles = Throttles()
    producer = Producer(
        {**conf, "linger.ms": 0, "statistics.interval.ms": 100, "stats_cb": throttles}
    )
    for _ in range(60):
        producer.produce(topic, b"q" * 1000)
    deadline = time.monotonic() + 8
    while throttles.most_ms == 0 and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(1)
    return throttles.most_ms > 0


# -- Apache Kafka's Java client and tools over SASL_SSL with SCRAM-SHA-512 ---------------
def test_java_client_over_sasl_ssl_with_scram_sha_512(secured: Secured, tmp_path: Path) -> None:
    """kafka-configs creates the user (AlterUserScramCredentials) and describes it; the
    Java producer and a group consumer log in with it; a wrong password is refused."""
    bootstrap = secured.node.bootstrap_of("SASL_SSL")
    admin = secured.login("PLAIN").but(username="admin", password="admin-secret")
    admin_props = str(java_properties_file(admin, tmp_path / "admin.properties"))
    user = ("--entity-type", "users", "--entity-name", "java-user")
    java_peer.tool(
        "kafka-configs", "--bootstrap-server", bootstrap, "--command-config", admin_props,
        "--alter", *user, "--add-config", "SCRAM-SHA-512=[iterations=8192,password=java-secret]",
    )  # fmt: skip
    described = java_peer.tool(
        "kafka-configs", "--bootstrap-server", bootstrap, "--command-config", admin_props,
        "--describe", *user,
    )  # fmt: skip
    assert "SCRAM-SHA-512=iterations=8192" in described.stdout, described.stdout
    login = secured.login("SCRAM-SHA-512").but(username="java-user", password="java-secret")
    props = str(java_properties_file(login, tmp_path / "java-user.properties"))
    java_peer.tool(
        "kafka-topics", "--bootstrap-server", bootstrap, "--command-config", props,
        "--create", "--topic", "sec-java", "--partitions", "2",
    )  # fmt: skip
    acks = java_peer.client("produce", bootstrap, "sec-java", "10", "2", *java_args(login))
    assert sum(1 for line in acks if line["event"] == "ack") == 10
    lines = java_peer.client(
        "consume", bootstrap, "sec-java", "sec-java-group", "classic", "10", "60000",
        *java_args(login),
    )  # fmt: skip
    assert sorted(line["v"] for line in lines if line["event"] == "record") == sorted(
        f"v-{i}" for i in range(10)
    )
    wrong = login.but(password="not-java-secret")
    refused = java_peer.run_class(
        java_peer.CLIENT_DRIVER,
        ["produce", bootstrap, "sec-java", "1", "1", "max.block.ms=15000", *java_args(wrong)],
    )
    assert refused.returncode != 0
    assert "SaslAuthenticationException" in refused.stdout + refused.stderr
