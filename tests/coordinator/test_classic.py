"""The classic group state machine, driven directly with explicit time (no clients, no node)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import (
    ClassicGroup,
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResult,
    SyncResult,
)

CFG = GroupConfig(initial_rebalance_delay_ms=0)


def join(g: ClassicGroup, member_id: str = "", now: float = 0.0, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "member_id": member_id,
        "instance_id": None,
        "client_id": "c",
        "client_host": "/127.0.0.1",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 30000,
        "protocol_type": "consumer",
        "protocols": [("range", b"r"), ("roundrobin", b"rr")],
        "require_known_member_id": True,
    }
    args.update(kw)
    return g.join(JoinRequest(**args), now)


def do_sync(
    g: ClassicGroup, member_id: str, generation: int, assignments: dict[str, bytes], **kw: Any
) -> Any:
    args: dict[str, Any] = {"instance_id": None, "protocol_type": None, "protocol_name": None}
    args.update(kw)
    return g.sync(
        member_id=member_id,
        generation=generation,
        assignments=assignments,
        now=args.pop("now", 0),
        **args,
    )


async def new_member(g: ClassicGroup, now: float = 0.0, **kw: Any) -> str:
    first = join(g, now=now, **kw)
    assert isinstance(first, JoinResult) and first.error is ErrorCode.member_id_required
    return first.member_id


def test_first_member_becomes_leader_and_stable() -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        mid = await new_member(g)
        waiter = join(g, mid)
        assert isinstance(waiter, asyncio.Future) and waiter.done()
        res = waiter.result()
        assert res.error is ErrorCode.none and res.generation == 1
        assert res.leader == mid and res.protocol_name == "range"
        assert [m[0] for m in res.members] == [mid]
        assert g.state is GroupState.COMPLETING_REBALANCE
        sync = do_sync(
            g, mid, 1, {mid: b"A"}, protocol_type="consumer", protocol_name="range", now=1
        )
        assert isinstance(sync, asyncio.Future)
        assert sync.result() == SyncResult(ErrorCode.none, "consumer", "range", b"A")
        assert g.state is GroupState.STABLE

    asyncio.run(run())


def test_second_member_triggers_rebalance_and_protocol_vote() -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        a = await new_member(g)
        join(g, a)
        do_sync(g, a, 1, {a: b"all"})
        b = await new_member(g, protocols=[("roundrobin", b"x")])
        wb = join(g, b, protocols=[("roundrobin", b"x")])
        assert isinstance(wb, asyncio.Future) and not wb.done()
        assert g.state is GroupState.PREPARING_REBALANCE
        # a learns of the rebalance from its heartbeat, then rejoins.
        assert g.heartbeat(member_id=a, instance_id=None, generation=1, now=1) is (
            ErrorCode.rebalance_in_progress
        )
        wa = join(g, a, now=2)
        assert isinstance(wa, asyncio.Future) and wa.done() and wb.done()
        ra, rb = wa.result(), wb.result()
        assert ra.generation == rb.generation == 2
        assert ra.protocol_name == "roundrobin"  # the only one both support
        assert ra.leader == a and len(ra.members) == 2 and rb.members == ()

    asyncio.run(run())


def test_inconsistent_protocols_refused() -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        a = await new_member(g)
        join(g, a)
        res = join(g, "", protocols=[("sticky", b"s")])
        assert isinstance(res, JoinResult)
        assert res.error is ErrorCode.inconsistent_group_protocol
        res = join(g, "", protocol_type="connect")
        assert isinstance(res, JoinResult)
        assert res.error is ErrorCode.inconsistent_group_protocol

    asyncio.run(run())


def test_errors_unknown_member_stale_generation_bad_session() -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        assert g.heartbeat(member_id="x", instance_id=None, generation=0, now=0) is (
            ErrorCode.unknown_member_id
        )
        bad = join(g, session_timeout_ms=100)
        assert isinstance(bad, JoinResult) and bad.error is ErrorCode.invalid_session_timeout
        a = await new_member(g)
        join(g, a)
        assert g.heartbeat(member_id=a, instance_id=None, generation=7, now=0) is (
            ErrorCode.illegal_generation
        )
        sync = do_sync(g, a, 0, {})
        assert sync == SyncResult(ErrorCode.illegal_generation)
        res = join(g, "nobody")
        assert isinstance(res, JoinResult) and res.error is ErrorCode.unknown_member_id
        assert g.validate_commit("nobody", None, 1) is ErrorCode.unknown_member_id
        assert g.validate_commit("", None, -1) is ErrorCode.unknown_member_id  # has members
        assert g.validate_commit(a, None, 0) is ErrorCode.illegal_generation

    asyncio.run(run())


def test_silent_member_expires_and_group_empties() -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        a = await new_member(g)
        join(g, a)
        do_sync(g, a, 1, {})
        g.tick(9_999)
        assert a in g.members
        g.tick(10_001)
        assert not g.members and g.state is GroupState.EMPTY and g.generation == 2
        assert g.validate_commit("", None, -1) is ErrorCode.none  # simple commits allowed

    asyncio.run(run())


def test_member_not_rejoining_is_dropped_at_rebalance_timeout() -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        a = await new_member(g)
        join(g, a)
        do_sync(g, a, 1, {})
        b = await new_member(g, now=100)
        wb = join(g, b, now=100)
        g.heartbeat(member_id=a, instance_id=None, generation=1, now=5000)
        assert isinstance(wb, asyncio.Future) and not wb.done()
        g.tick(100 + 30_000)  # a never rejoined within the rebalance timeout
        assert wb.done() and wb.result().generation == 2
        assert list(g.members) == [b] and wb.result().leader == b

    asyncio.run(run())


def test_static_member_rejoins_without_rebalance() -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        wa = join(g, "", instance_id="i-1")  # static members need no KIP-394 round trip
        assert isinstance(wa, asyncio.Future)
        a = wa.result().member_id
        do_sync(g, a, 1, {a: b"P"}, instance_id="i-1")
        again = join(g, "", instance_id="i-1", now=50)
        assert isinstance(again, JoinResult) and again.error is ErrorCode.none
        assert again.generation == 1 and again.member_id != a
        assert g.state is GroupState.STABLE
        # The old incarnation is fenced.
        assert g.heartbeat(member_id=a, instance_id="i-1", generation=1, now=60) is (
            ErrorCode.fenced_instance_id
        )
        sync = do_sync(g, again.member_id, 1, {}, instance_id="i-1", now=60)
        assert sync == SyncResult(ErrorCode.none, "consumer", "range", b"P")

    asyncio.run(run())


def test_snapshot_restores_members_and_assignment() -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        a = await new_member(g)
        join(g, a)
        do_sync(g, a, 1, {a: b"P"})
        back = ClassicGroup.restore("g", CFG, g.snapshot(), now=500)
        assert back.state is GroupState.STABLE and back.generation == 1
        assert back.members[a].assignment == b"P" and back.leader_id == a
        assert back.heartbeat(member_id=a, instance_id=None, generation=1, now=600) is (
            ErrorCode.none
        )

    asyncio.run(run())


@pytest.mark.parametrize("rounds", [1, 3])
def test_leave_moves_to_rebalance_or_empty(rounds: int) -> None:
    async def run() -> None:
        g = ClassicGroup("g", CFG)
        ids = []
        for i in range(rounds):
            m = await new_member(g, now=i)
            ids.append(m)
        waiters = [join(g, m) for m in ids]
        assert all(isinstance(w, asyncio.Future) and w.done() for w in waiters)
        do_sync(g, g.leader_id or "", 1, {})
        assert g.leave(ids[0], None, now=10) is ErrorCode.none
        assert g.leave(ids[0], None, now=10) is ErrorCode.unknown_member_id
        expected = GroupState.EMPTY if rounds == 1 else GroupState.PREPARING_REBALANCE
        assert g.state is expected

    asyncio.run(run())


def test_a_transactional_commit_skips_the_empty_group_and_rebalance_checks() -> None:
    """Kafka 4's validateOffsetCommit with isTransactional: TxnOffsetCommit's older
    versions carry no member, and a member's commit is not refused mid-rebalance."""

    async def run() -> None:
        g = ClassicGroup("g", CFG)
        a = await new_member(g)
        join(g, a)
        assert g.state is GroupState.COMPLETING_REBALANCE
        assert g.validate_commit("", None, -1) is ErrorCode.unknown_member_id
        assert g.validate_commit("", None, -1, transactional=True) is ErrorCode.none
        assert g.validate_commit(a, None, g.generation) is ErrorCode.rebalance_in_progress
        assert g.validate_commit(a, None, g.generation, transactional=True) is ErrorCode.none
        # The member checks themselves still hold.
        assert g.validate_commit("nobody", None, 1, transactional=True) is (
            ErrorCode.unknown_member_id
        )
        assert g.validate_commit(a, None, g.generation + 1, transactional=True) is (
            ErrorCode.illegal_generation
        )

    asyncio.run(run())
