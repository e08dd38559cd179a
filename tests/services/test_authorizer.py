"""The node's authorizer service (services/authorizer.py): checks against the stored
ACLs, reloaded only when the store's version moves and at once after a change made
here; CreateAcls/DeleteAcls answers; no authorizer (everything allowed, every
operation); denials counted by resource type and operation, and logged in Kafka's
words at most once per principal, operation and resource per window."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from kio.schema.errors import ErrorCode

from zonegate.metastore.api import MetaStore, open_metastore
from zonegate.metastore.models import (
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from zonegate.runtime.clock import ManualClock
from zonegate.services.acl_engine import all_operations
from zonegate.services.acl_filters import MATCH_ALL, AclFilter
from zonegate.services.authorizer import LOG_LINES_PER_WINDOW, LOG_WINDOW_S, AuthorizerService

pytestmark = pytest.mark.unit
T = TypeVar("T")
Op, RT, PT, Perm = AclOperation, ResourceType, PatternType, AclPermission
HOST = "10.0.0.5"
ALICE_TOPICS = AclBinding(RT.TOPIC, "alice-", PT.PREFIXED, "User:alice", "*", Op.ALL, Perm.ALLOW)
BOB_READ = AclBinding(RT.TOPIC, "shared", PT.LITERAL, "User:bob", "*", Op.READ, Perm.ALLOW)


def run(tmp_path: Path, body: Callable[[MetaStore, ManualClock], Awaitable[T]]) -> T:
    async def main() -> T:
        store = open_metastore(f"sqlite:///{tmp_path / 'meta.db'}")
        try:
            return await body(store, ManualClock())
        finally:
            await store.close()

    return asyncio.run(main())


def service(store: MetaStore, clock: ManualClock, **kw: object) -> AuthorizerService:
    return AuthorizerService(store, clock, enabled=True, **kw)  # type: ignore[arg-type]


def check(a: AuthorizerService, user: str, op: AclOperation, name: str) -> bool:
    return a.authorize(f"User:{user}", HOST, op, RT.TOPIC, name, request="Produce")


def test_checks_follow_the_store_and_changes_here_hold_at_once(tmp_path: Path) -> None:
    async def body(store: MetaStore, clock: ManualClock) -> None:
        here, there = service(store, clock), service(store, clock)
        await here.refresh()
        await there.refresh()
        assert not check(here, "alice", Op.WRITE, "alice-orders")
        assert await here.create_acls([ALICE_TOPICS, BOB_READ]) == [(ErrorCode.none, "")] * 2
        assert check(here, "alice", Op.WRITE, "alice-orders"), "at once on this node"
        assert not check(there, "alice", Op.WRITE, "alice-orders"), "the other: next refresh"
        await there.refresh()
        assert check(there, "alice", Op.WRITE, "alice-orders")
        assert there.acl_count == 2
        described = await there.describe_acls(
            AclFilter(RT.TOPIC, "alice-x", PT.MATCH, None, None, Op.ANY, Perm.ANY)
        )
        assert described == [ALICE_TOPICS]
        (result,) = await there.delete_acls(
            [AclFilter(RT.ANY, None, PT.ANY, "User:alice", None, Op.ANY, Perm.ANY)]
        )
        assert result.error == ErrorCode.none and result.deleted == (ALICE_TOPICS,)
        assert not check(there, "alice", Op.WRITE, "alice-orders")
        await here.refresh()
        assert not check(here, "alice", Op.WRITE, "alice-orders")
        assert here.acl_count == 1

    run(tmp_path, body)


def test_refused_creations_and_filters_keep_their_place(tmp_path: Path) -> None:
    async def body(store: MetaStore, clock: ManualClock) -> None:
        a = service(store, clock)
        bad = AclBinding(RT.CLUSTER, "c", PT.LITERAL, "User:x", "*", Op.ALTER, Perm.ALLOW)
        answers = await a.create_acls([bad, BOB_READ])
        assert answers[0][0] == ErrorCode.invalid_request and answers[1] == (ErrorCode.none, "")
        unknown = AclFilter(RT.UNKNOWN, None, PT.ANY, None, None, Op.ANY, Perm.ANY)
        first, second = await a.delete_acls([unknown, MATCH_ALL])
        assert (
            first.error == ErrorCode.invalid_request and first.message == "Unknown patternFilter."
        )
        assert second.deleted == (BOB_READ,)

    run(tmp_path, body)


def test_a_reload_happens_only_when_the_version_moves(tmp_path: Path) -> None:
    async def body(store: MetaStore, clock: ManualClock) -> None:
        a = service(store, clock)
        await a.refresh()
        index = a._engine.index
        await a.refresh()
        assert a._engine.index is index, "nothing changed: the same snapshot"
        await store.create_acls([BOB_READ])
        await a.refresh()
        assert a._engine.index is not index and a.acl_count == 1

    run(tmp_path, body)


def test_super_users_and_allow_if_no_acl(tmp_path: Path) -> None:
    async def body(store: MetaStore, clock: ManualClock) -> None:
        a = service(store, clock, super_users=("User:admin",), allow_if_no_acl=True)
        await a.create_acls([BOB_READ])
        assert check(a, "admin", Op.DELETE, "shared")
        assert check(a, "eve", Op.WRITE, "nobody-names-this")
        assert not check(a, "eve", Op.READ, "shared")

    run(tmp_path, body)


def test_without_an_authorizer_everything_is_allowed() -> None:
    a = AuthorizerService(None, ManualClock(), enabled=False)
    assert a.authorize("User:eve", HOST, Op.DELETE, RT.CLUSTER, "kafka-cluster", request="X")
    assert a.authorize_by_resource_type("User:eve", HOST, Op.WRITE, RT.TOPIC)
    assert a.authorized_operations("User:eve", HOST, RT.TOPIC, "t") == all_operations(RT.TOPIC)
    assert a.denials == {}


def test_denials_are_counted_and_logged_rate_limited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body(store: MetaStore, clock: ManualClock) -> None:
        a = service(store, clock)
        with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
            for _ in range(50):
                assert not check(a, "eve", Op.WRITE, "secret")
            lines = [r.getMessage() for r in caplog.records]
            assert lines == [
                "Principal = User:eve is Denied operation = WRITE from host = 10.0.0.5 on "
                "resource = Topic:LITERAL:secret for request = Produce with resourceRefCount = 1 "
                "based on rule DefaultDeny"
            ]
            # Many different resources: at most LOG_LINES_PER_WINDOW lines a window.
            for i in range(LOG_LINES_PER_WINDOW * 2):
                check(a, "eve", Op.WRITE, f"t{i}")
            assert len(caplog.records) == LOG_LINES_PER_WINDOW
            # Not logged quietly: a check made only for authorized operations.
            a.authorize(
                "User:eve", HOST, Op.READ, RT.TOPIC, "quiet", request="Metadata", log_denied=False
            )
            assert len(caplog.records) == LOG_LINES_PER_WINDOW
            await clock.advance(LOG_WINDOW_S)
            check(a, "eve", Op.WRITE, "secret")
            assert len(caplog.records) == LOG_LINES_PER_WINDOW + 1
            assert "denials like it or others left out" in caplog.records[-1].getMessage()
        assert a.denials == {
            ("TOPIC", "WRITE"): 50 + LOG_LINES_PER_WINDOW * 2 + 1,
            ("TOPIC", "READ"): 1,
        }

    run(tmp_path, body)


def test_acls_filter_as_kafkas_authorizer_test(tmp_path: Path) -> None:
    """core's AuthorizerTest.testAclsFilter: the filters select first, then delete, so an
    ACL two filters match is named by both."""
    r1, r2 = "foo-7c1d", "bar-2b9e"
    acl1 = AclBinding(RT.TOPIC, r1, PT.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW)
    acl2 = AclBinding(RT.TOPIC, r1, PT.LITERAL, "User:alice", "192.168.0.1", Op.WRITE, Perm.ALLOW)
    acl3 = AclBinding(RT.TOPIC, r2, PT.LITERAL, "User:alice", "*", Op.DESCRIBE, Perm.ALLOW)
    acl4 = AclBinding(RT.TOPIC, "bar-", PT.PREFIXED, "User:*", "*", Op.READ, Perm.ALLOW)

    def exact(rt: ResourceType, name: str, pt: PatternType) -> AclFilter:
        return AclFilter(rt, name, pt, None, None, Op.ANY, Perm.ANY)

    async def body(store: MetaStore, clock: ManualClock) -> None:
        a = service(store, clock)
        await a.create_acls([acl1, acl2, acl3, acl4])
        assert set(await a.describe_acls(MATCH_ALL)) == {acl1, acl2, acl3, acl4}
        assert set(await a.describe_acls(exact(RT.TOPIC, r1, PT.LITERAL))) == {acl1, acl2}
        assert set(await a.describe_acls(exact(RT.TOPIC, "bar-", PT.PREFIXED))) == {acl4}
        matching = exact(RT.ANY, r2, PT.MATCH)
        assert set(await a.describe_acls(matching)) == {acl3, acl4}
        one = AclFilter(RT.TOPIC, r1, PT.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW)
        results = await a.delete_acls(
            [matching, one, exact(RT.TOPIC, r2, PT.LITERAL), exact(RT.TOPIC, "baz", PT.ANY)]
        )
        assert all(r.error == ErrorCode.none for r in results)
        assert [set(r.deleted) for r in results] == [{acl3, acl4}, {acl1}, {acl3}, set()]
        assert await a.describe_acls(MATCH_ALL) == [acl2]

    run(tmp_path, body)
