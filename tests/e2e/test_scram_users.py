"""SCRAM users managed as in Kafka (KIP-554), by the tools Kafka users have:
confluent-kafka's AdminClient and Apache Kafka's own kafka-configs. Each credential
stored is checked the way SASL will use it: a real SCRAM exchange (scramp's client
against scramp's server on the node's copy) accepts the password and refuses a
wrong one. A change made through one node reaches the other within seconds, on
SQLite and on PostgreSQL, and users outlive a restart."""

from __future__ import annotations

import time

import pytest
import scramp
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests import java_peer
from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode
from tests.postgres_server import PostgresServer
from zonegate.broker.node import Node
from zonegate.services.credentials import ScramCredential

pytestmark = pytest.mark.e2e


def authenticates(node: Node, user: str, mechanism: str, password: str) -> bool:
    """A whole SCRAM exchange against the credential the node would check."""
    cred: ScramCredential | None = node.scram.scram_credential(user, mechanism)
    if cred is None:
        return False
    server = scramp.ScramMechanism(mechanism).make_server(
        lambda _: (cred.salt, cred.stored_key, cred.server_key, cred.iterations)
    )
    client = scramp.ScramClient([mechanism], user, password)
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    try:
        server.set_client_final(client.get_client_final())
    except scramp.ScramException:
        return False
    client.set_server_final(server.get_server_final())
    return True


def _wait(check: object, timeout: float = 5.0) -> float:
    """Seconds until `check()` held (or the test fails)."""
    start = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - start < timeout, "not seen in time"
        time.sleep(0.05)
    return time.monotonic() - start


def test_confluent_admin_client_alters_and_describes_users(
    inprocess_factory: InProcessFactory,
) -> None:
    node = inprocess_factory(["--zones", "zone-a"])
    (me,) = node.nodes
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    done = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(sha512, 8192), b"alice-secret"
            ),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(sha256, 4096), b"bob-secret"),
        ]
    )
    for future in done.values():
        future.result(30)
    # Seen at once on the node that made the change.
    assert authenticates(me, "alice", "SCRAM-SHA-512", "alice-secret")
    assert not authenticates(me, "alice", "SCRAM-SHA-512", "bob-secret")
    assert not authenticates(me, "alice", "SCRAM-SHA-256", "alice-secret")
    assert authenticates(me, "bob", "SCRAM-SHA-256", "bob-secret")

    every = admin.describe_user_scram_credentials().result(30)
    assert sorted(every) == ["alice", "bob"]
    (info,) = every["alice"].scram_credential_infos
    assert (info.mechanism, info.iterations) == (sha512, 8192)
    named = admin.describe_user_scram_credentials(["bob", "nobody"])
    (info,) = named["bob"].result(30).scram_credential_infos
    assert (info.mechanism, info.iterations) == (sha256, 4096)
    with pytest.raises(KafkaException) as missing:
        named["nobody"].result(30)
    assert missing.value.args[0].code() == 91  # RESOURCE_NOT_FOUND
    assert "Attempt to describe a user credential that does not exist: nobody" in str(missing.value)

    # Kafka's validations, each user's own error.
    refused = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("few", ScramCredentialInfo(sha256, 4095), b"pw"),
            UserScramCredentialUpsertion("many", ScramCredentialInfo(sha256, 16385), b"pw"),
            UserScramCredentialDeletion("carol", sha512),
            UserScramCredentialDeletion("bob", sha256),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(sha512, 4096), b"pw"),
        ]
    )
    expected = {
        "few": (93, "Too few iterations"),  # UNACCEPTABLE_CREDENTIAL
        "many": (93, "Too many iterations"),
        "carol": (91, "Attempt to delete a user credential that does not exist"),
        "bob": (92, "A user credential cannot be altered twice in the same request"),
    }
    for user, (code, message) in expected.items():
        with pytest.raises(KafkaException) as err:
            refused[user].result(30)
        assert err.value.args[0].code() == code, (user, err.value)
        assert message in str(err.value), (user, err.value)
    assert authenticates(me, "bob", "SCRAM-SHA-256", "bob-secret"), "bob left as he was"

    admin.alter_user_scram_credentials([UserScramCredentialDeletion("alice", sha512)])[
        "alice"
    ].result(30)
    assert not authenticates(me, "alice", "SCRAM-SHA-512", "alice-secret")
    assert sorted(admin.describe_user_scram_credentials().result(30)) == ["bob"]


def _configs(node: InProcessNode, *args: str) -> str:
    out = java_peer.tool("kafka-configs", "--bootstrap-server", node.bootstrap, *args)
    return out.stdout.strip()


def test_kafka_configs_adds_describes_and_deletes_a_scram_user(
    inprocess_factory: InProcessFactory,
) -> None:
    node = inprocess_factory(["--zones", "zone-a"])
    (me,) = node.nodes
    alice = ("--entity-type", "users", "--entity-name", "alice")
    assert _configs(
        node, *alice, "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-secret]"
    ) == ("Completed updating config for user alice.")
    assert authenticates(me, "alice", "SCRAM-SHA-512", "alice-secret")
    assert not authenticates(me, "alice", "SCRAM-SHA-512", "alice-secreT")
    assert _configs(
        node, *alice, "--alter", "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=other-secret]",
    ) == "Completed updating config for user alice."  # fmt: skip
    assert _configs(node, *alice, "--describe") == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    )
    assert _configs(node, *alice, "--alter", "--delete-config", "SCRAM-SHA-512") == (
        "Completed updating config for user alice."
    )
    assert not authenticates(me, "alice", "SCRAM-SHA-512", "alice-secret")
    assert authenticates(me, "alice", "SCRAM-SHA-256", "other-secret")
    assert _configs(node, *alice, "--describe") == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"
    )
    # Kafka's refusals, as the tool reports them.
    gone = java_peer.tool(
        "kafka-configs", "--bootstrap-server", node.bootstrap, *alice,
        "--alter", "--delete-config", "SCRAM-SHA-512", check=False,
    )  # fmt: skip
    assert gone.returncode == 1
    assert (
        "org.apache.kafka.common.errors.ResourceNotFoundException: "
        "Attempt to delete a user credential that does not exist"
    ) in gone.stdout + gone.stderr, gone
    # Every user with a credential, as Kafka lists them.
    assert _configs(node, "--entity-type", "users", "--describe") == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_user_added_through_one_node_can_log_in_on_every_node(
    inprocess_factory: InProcessFactory, request: pytest.FixtureRequest, backend: str
) -> None:
    args = ["--zones", "zone-a,zone-b"]
    if backend == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        args += ["--metastore", server.new_database()]
    node = inprocess_factory(args)
    here, there = node.nodes
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{here.port}"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dave", info, b"pw-1")])[
        "dave"
    ].result(30)
    assert authenticates(here, "dave", "SCRAM-SHA-256", "pw-1")  # at once here
    seen = _wait(lambda: authenticates(there, "dave", "SCRAM-SHA-256", "pw-1"))
    assert seen < 3.0, seen
    # A new password replaces the old one everywhere.
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dave", info, b"pw-2")])[
        "dave"
    ].result(30)
    _wait(lambda: authenticates(there, "dave", "SCRAM-SHA-256", "pw-2"))
    assert not authenticates(there, "dave", "SCRAM-SHA-256", "pw-1")
    print(f"\nSCRAM user seen on the other node ({backend}) after {seen:.2f} s")
    # Kept in the metadata store: nodes started again know the user from their start.
    node.stop()
    again = inprocess_factory(args)
    for n in again.nodes:
        assert authenticates(n, "dave", "SCRAM-SHA-256", "pw-2")
