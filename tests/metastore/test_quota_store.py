"""Client quotas on every backend: set, change, remove, one transaction, seen by every
connection, kept across a reopen."""

from __future__ import annotations

from tests.metastore.backends import Stores
from zonegate.metastore.api import MetaStore

ALICE_APP = (("client-id", "app"), ("user", "alice"))
DEFAULT_USER = (("user", None),)
APP = (("client-id", "app"),)
DEFAULT_CLIENT = (("client-id", None),)


async def test_quotas_are_set_changed_and_removed_by_key(store: MetaStore) -> None:
    assert await store.client_quotas() == {}
    await store.alter_client_quotas(
        [
            (ALICE_APP, {"producer_byte_rate": 1_048_576.0, "request_percentage": 12.5}),
            (DEFAULT_USER, {"consumer_byte_rate": 2e6}),
            (APP, {"controller_mutation_rate": 10.0}),
            (DEFAULT_CLIENT, {"producer_byte_rate": 5e5}),
        ]
    )
    assert await store.client_quotas() == {
        ALICE_APP: {"producer_byte_rate": 1_048_576.0, "request_percentage": 12.5},
        DEFAULT_USER: {"consumer_byte_rate": 2e6},
        APP: {"controller_mutation_rate": 10.0},
        DEFAULT_CLIENT: {"producer_byte_rate": 5e5},
    }
    # A default and a name are two entities; None removes one key, the rest stays.
    await store.alter_client_quotas(
        [
            (ALICE_APP, {"producer_byte_rate": 2e6, "request_percentage": None}),
            (DEFAULT_USER, {"consumer_byte_rate": None}),
            (DEFAULT_CLIENT, {"no_such_key_set": None}),
        ]
    )
    assert await store.client_quotas() == {
        ALICE_APP: {"producer_byte_rate": 2e6},
        APP: {"controller_mutation_rate": 10.0},
        DEFAULT_CLIENT: {"producer_byte_rate": 5e5},
    }


async def test_names_are_kept_exactly(store: MetaStore) -> None:
    odd = (("client-id", 'a"b\\c,=é'), ("user", "<default>"))
    await store.alter_client_quotas([(odd, {"producer_byte_rate": 1.0})])
    assert await store.client_quotas() == {odd: {"producer_byte_rate": 1.0}}


async def test_every_connection_sees_quotas_and_they_outlive_it(stores: Stores) -> None:
    first = stores.open()
    await first.alter_client_quotas([(APP, {"producer_byte_rate": 1e6})])
    second = stores.open()
    assert await second.client_quotas() == {APP: {"producer_byte_rate": 1e6}}
    await stores.close(first)
    third = stores.open()
    assert await third.client_quotas() == {APP: {"producer_byte_rate": 1e6}}
