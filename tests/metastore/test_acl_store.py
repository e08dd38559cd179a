"""ACLs on every backend: created (twice is once), listed in one order with their version,
deleted (the missing ones not named as deleted), names and principals kept exactly,
seen by every connection, kept across a reopen; the version moves with every change."""

from __future__ import annotations

import dataclasses

from tests.metastore.backends import Stores
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import (
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)

READ_FOO = AclBinding(
    ResourceType.TOPIC,
    "foo",
    PatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermission.ALLOW,
)
DENY_PREFIX = AclBinding(
    ResourceType.TOPIC,
    "fo",
    PatternType.PREFIXED,
    "User:*",
    "10.0.0.1",
    AclOperation.ALL,
    AclPermission.DENY,
)
GROUP_ODD = AclBinding(
    ResourceType.GROUP,
    'g "é\\,',
    PatternType.LITERAL,
    "User:Bob",
    "*",
    AclOperation.DESCRIBE,
    AclPermission.ALLOW,
)
CLUSTER = AclBinding(
    ResourceType.CLUSTER,
    "kafka-cluster",
    PatternType.LITERAL,
    "User:ops",
    "*",
    AclOperation.ALTER,
    AclPermission.ALLOW,
)


async def test_acls_are_created_listed_and_deleted(store: MetaStore) -> None:
    assert await store.acls() == (0, [])
    assert await store.acl_version() == 0
    await store.create_acls([READ_FOO, DENY_PREFIX, GROUP_ODD])
    v1 = await store.acl_version()
    assert v1 > 0
    version, found = await store.acls()
    assert version == v1
    assert set(found) == {READ_FOO, DENY_PREFIX, GROUP_ODD} and len(found) == 3
    await store.create_acls([READ_FOO, CLUSTER])  # READ_FOO again: still one
    v2 = await store.acl_version()
    assert v2 > v1
    assert sorted(map(str, (await store.acls())[1])) == sorted(
        map(str, [READ_FOO, DENY_PREFIX, GROUP_ODD, CLUSTER])
    )
    nobody = dataclasses.replace(READ_FOO, principal="User:nobody")
    gone = await store.delete_acls([READ_FOO, nobody])
    assert gone == [READ_FOO]
    assert await store.acl_version() > v2
    v3 = await store.acl_version()
    assert await store.delete_acls([READ_FOO]) == []
    assert await store.acl_version() == v3, "nothing deleted: the version stays"
    assert set((await store.acls())[1]) == {DENY_PREFIX, GROUP_ODD, CLUSTER}


async def test_listing_order_is_the_same_on_every_read(store: MetaStore) -> None:
    await store.create_acls([CLUSTER, GROUP_ODD, DENY_PREFIX, READ_FOO])
    first = (await store.acls())[1]
    assert first == (await store.acls())[1]
    assert all(isinstance(a.operation, AclOperation) for a in first)


async def test_every_connection_sees_acls_and_they_outlive_it(stores: Stores) -> None:
    first = stores.open()
    await first.create_acls([READ_FOO, GROUP_ODD])
    second = stores.open()
    assert set((await second.acls())[1]) == {READ_FOO, GROUP_ODD}
    await stores.close(first)
    third = stores.open()
    assert set((await third.acls())[1]) == {READ_FOO, GROUP_ODD}
    before = await second.acl_version()
    assert await third.delete_acls([GROUP_ODD]) == [GROUP_ODD]
    assert await second.acl_version() > before
    assert (await second.acls())[1] == [READ_FOO]
