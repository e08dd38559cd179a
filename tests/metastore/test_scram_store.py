"""SCRAM credentials on every backend: set, replace, delete (missing ones named), all in
one transaction, bytes kept exactly, seen by every connection, kept across a reopen."""

from __future__ import annotations

import dataclasses

from tests.metastore.backends import Stores
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import ScramRecord

# Every byte value, so that no backend's text or encoding handling can slip in.
ALICE_512 = ScramRecord(
    "alice", "SCRAM-SHA-512", bytes(range(256)), b"\x00" * 64, b"\xff" * 64, 8192
)
ALICE_256 = ScramRecord("alice", "SCRAM-SHA-256", b"salt", b"s" * 32, b"k" * 32, 4096)
BOB_256 = ScramRecord("bob", "SCRAM-SHA-256", b"pepper", b"t" * 32, b"u" * 32, 16384)


async def test_credentials_are_set_replaced_and_deleted(store: MetaStore) -> None:
    assert await store.scram_credentials() == []
    assert await store.alter_scram_credentials([BOB_256, ALICE_512, ALICE_256], []) == []
    # By user, then mechanism.
    assert await store.scram_credentials() == [ALICE_256, ALICE_512, BOB_256]
    newer = dataclasses.replace(ALICE_512, salt=b"new", stored_key=b"a", server_key=b"b")
    missing = await store.alter_scram_credentials(
        [newer], [("bob", "SCRAM-SHA-256"), ("bob", "SCRAM-SHA-512"), ("carol", "SCRAM-SHA-256")]
    )
    assert missing == [("bob", "SCRAM-SHA-512"), ("carol", "SCRAM-SHA-256")]
    assert await store.scram_credentials() == [ALICE_256, newer]


async def test_names_are_kept_exactly(store: MetaStore) -> None:
    odd = dataclasses.replace(BOB_256, user='a"b\\c,=é ')
    other = dataclasses.replace(BOB_256, user="A")  # names are case-sensitive
    await store.alter_scram_credentials([odd, other], [])
    assert await store.scram_credentials() == [other, odd]
    assert await store.alter_scram_credentials([], [("a", "SCRAM-SHA-256")]) == [
        ("a", "SCRAM-SHA-256")
    ]


async def test_every_connection_sees_credentials_and_they_outlive_it(stores: Stores) -> None:
    first = stores.open()
    await first.alter_scram_credentials([ALICE_512], [])
    second = stores.open()
    assert await second.scram_credentials() == [ALICE_512]
    await stores.close(first)
    third = stores.open()
    assert await third.scram_credentials() == [ALICE_512]
    assert await third.alter_scram_credentials([], [("alice", "SCRAM-SHA-512")]) == []
    assert await second.scram_credentials() == []
