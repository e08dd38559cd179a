"""SCRAM users (services/scram.py): Kafka's validations and answers for
AlterUserScramCredentials and DescribeUserScramCredentials, a stored credential that
authenticates its password (and no other) in a real SCRAM exchange (scramp's
client and server), and the in-memory copy SASL reads kept current."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
import scramp
from kio.schema.errors import ErrorCode

from zonegate.metastore.api import MetaStore, open_metastore
from zonegate.services.credentials import ScramCredential
from zonegate.services.scram import ScramAnswer, ScramService, ScramUpsertion

pytestmark = pytest.mark.unit
T = TypeVar("T")
SHA256, SHA512 = 1, 2
_HASH = {SHA256: "sha256", SHA512: "sha512"}


def salted(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    """What a Kafka client sends (ScramFormatter.saltedPassword: Hi(), RFC 5802)."""
    return hashlib.pbkdf2_hmac(_HASH.get(mechanism, "sha256"), password.encode(), salt, iterations)


def upsert(
    user: str, password: str, mechanism: int = SHA512, iterations: int = 4096
) -> ScramUpsertion:
    salt = os.urandom(24)
    return ScramUpsertion(
        user, mechanism, iterations, salt, salted(mechanism, password, salt, iterations)
    )


def run(tmp_path: Path, body: Callable[[ScramService, MetaStore], Awaitable[T]]) -> T:
    async def main() -> T:
        store = open_metastore(f"sqlite:///{tmp_path / 'meta.db'}")
        try:
            return await body(ScramService(store), store)
        finally:
            await store.close()

    return asyncio.run(main())


def authenticates(cred: ScramCredential | None, user: str, password: str) -> bool:
    """A whole SCRAM exchange of scramp's client against scramp's server on `cred`."""
    assert cred is not None
    mech = scramp.ScramMechanism(cred.mechanism)
    server = mech.make_server(
        lambda _: (cred.salt, cred.stored_key, cred.server_key, cred.iterations)
    )
    client = scramp.ScramClient([cred.mechanism], user, password)
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    try:
        server.set_client_final(client.get_client_final())
    except scramp.ScramException:
        return False
    client.set_server_final(server.get_server_final())  # the client checks the server too
    return True


def test_a_stored_credential_authenticates_its_password_and_no_other(tmp_path: Path) -> None:
    async def body(svc: ScramService, _: MetaStore) -> None:
        answers = await svc.alter(
            [], [upsert("alice", "alice-secret"), upsert("bob", "bob-pw", SHA256, 8192)]
        )
        assert answers == [ScramAnswer("alice"), ScramAnswer("bob")]
        alice = svc.scram_credential("alice", "SCRAM-SHA-512")
        assert authenticates(alice, "alice", "alice-secret")
        assert not authenticates(alice, "alice", "alice-secreT")
        bob = svc.scram_credential("bob", "SCRAM-SHA-256")
        assert bob is not None and bob.iterations == 8192
        assert authenticates(bob, "bob", "bob-pw")
        assert svc.scram_credential("bob", "SCRAM-SHA-512") is None
        assert svc.scram_credential("carol", "SCRAM-SHA-256") is None

    run(tmp_path, body)


def test_the_password_is_never_stored(tmp_path: Path) -> None:
    async def body(svc: ScramService, store: MetaStore) -> None:
        u = upsert("alice", "alice-secret")
        await svc.alter([], [u])
        (record,) = await store.scram_credentials()
        kept = record.salt + record.stored_key + record.server_key
        assert b"alice-secret" not in kept and u.salted_password not in kept
        assert record.salt == u.salt and record.iterations == 4096

    run(tmp_path, body)
    assert b"alice-secret" not in (tmp_path / "meta.db").read_bytes()


def test_validations_and_errors_are_kafkas(tmp_path: Path) -> None:
    async def body(svc: ScramService, _: MetaStore) -> None:
        await svc.alter([], [upsert("dora", "pw"), upsert("twice", "pw")])
        answers = await svc.alter(
            [("dora", SHA512), ("erin", SHA512), ("", SHA256), ("x", 3), ("twice", SHA512)],
            [
                upsert("few", "pw", iterations=4095),
                upsert("many", "pw", iterations=16385),
                upsert("bounds", "pw", SHA256, 16384),
                upsert("", "pw"),
                upsert("unknown", "pw", mechanism=0),
                upsert("twice", "pw"),
                upsert("both", "pw", SHA256),
                upsert("both", "pw", SHA512),
                upsert("erin", "pw"),  # refused already: left alone, as Kafka
                ScramUpsertion("empty", SHA256, 4096, b"s", b""),
            ],
        )
        assert answers == [
            ScramAnswer("dora"),
            ScramAnswer("bounds"),
            ScramAnswer(
                "erin",
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            ),
            ScramAnswer("", ErrorCode.unacceptable_credential, "Username must not be empty"),
            ScramAnswer("x", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            ScramAnswer("few", ErrorCode.unacceptable_credential, "Too few iterations"),
            ScramAnswer("many", ErrorCode.unacceptable_credential, "Too many iterations"),
            ScramAnswer("unknown", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            ScramAnswer(
                "twice",
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            ),
            ScramAnswer(
                "both",
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            ),
            ScramAnswer("empty", ErrorCode.unknown_server_error, None),
        ]
        # Only the valid changes were made: "twice" keeps its credential.
        assert await svc.describe(None) == [
            ScramAnswer("bounds", credentials=((SHA256, 16384),)),
            ScramAnswer("twice", credentials=((SHA512, 4096),)),
        ]

    run(tmp_path, body)


def test_describe_as_kafka(tmp_path: Path) -> None:
    async def body(svc: ScramService, _: MetaStore) -> None:
        assert await svc.describe(None) == []
        assert await svc.describe([]) == []
        await svc.alter([], [upsert("bob", "pw", SHA512, 8192), upsert("alice", "pw", SHA256)])
        await svc.alter([], [upsert("bob", "pw", SHA256, 5000)])
        both = ScramAnswer("bob", credentials=((SHA256, 5000), (SHA512, 8192)))
        alice = ScramAnswer("alice", credentials=((SHA256, 4096),))
        assert await svc.describe(None) == [alice, both]
        assert await svc.describe([]) == [alice, both]
        assert await svc.describe(["bob", "nobody", "alice", "bob"]) == [
            ScramAnswer(
                "bob",
                ErrorCode.duplicate_resource,
                "Cannot describe SCRAM credentials for the same user twice in a single "
                "request: bob",
            ),
            ScramAnswer(
                "nobody",
                ErrorCode.resource_not_found,
                "Attempt to describe a user credential that does not exist: nobody",
            ),
            alice,
        ]
        # Deleting one mechanism keeps the other; deleting the last forgets the user.
        assert await svc.alter([("bob", SHA256)], []) == [ScramAnswer("bob")]
        assert await svc.describe(["bob"]) == [ScramAnswer("bob", credentials=((SHA512, 8192),))]
        assert svc.scram_credential("bob", "SCRAM-SHA-256") is None
        await svc.alter([("bob", SHA512)], [])
        assert (await svc.describe(["bob"]))[0].error == ErrorCode.resource_not_found

    run(tmp_path, body)


def test_a_change_another_node_made_is_seen_after_a_refresh(tmp_path: Path) -> None:
    async def body(here: ScramService, store: MetaStore) -> None:
        other = open_metastore(f"sqlite:///{tmp_path / 'meta.db'}")
        try:
            there = ScramService(other)
            await there.alter([], [upsert("alice", "alice-secret")])
            assert here.scram_credential("alice", "SCRAM-SHA-512") is None
            await here.refresh()
            assert authenticates(
                here.scram_credential("alice", "SCRAM-SHA-512"), "alice", "alice-secret"
            )
            # A replaced password: the old one no longer authenticates.
            await there.alter([], [upsert("alice", "new-secret")])
            await here.refresh()
            cred = here.scram_credential("alice", "SCRAM-SHA-512")
            assert authenticates(cred, "alice", "new-secret")
            assert not authenticates(cred, "alice", "alice-secret")
            # A deletion that another node made first: RESOURCE_NOT_FOUND here.
            await there.alter([("alice", SHA512)], [])
            (answer,) = await here.alter([("alice", SHA512)], [])
            assert answer.error == ErrorCode.resource_not_found
            assert here.scram_credential("alice", "SCRAM-SHA-512") is None
        finally:
            await other.close()

    run(tmp_path, body)
