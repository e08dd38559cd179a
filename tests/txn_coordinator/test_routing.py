"""Transaction calls routed to the owner of the id's shard (services/txn_routing.py): served
there wherever they were made, over a real TxnCall (gRPC on localhost, the cluster's
token), NOT_COORDINATOR from a node that does not own the shard or when no owner is in
reach, and ListTransactions gathered from each shard's owner.

Two nodes' coordinators over one SQLite metadata store (a temp file, answered from its
worker thread: hence `integration`), the clock injected; the partitions' leaders are
the role tests' `Leaders`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.storage.fakes import spin
from tests.txn_coordinator.test_role import CONFIG, Leaders, until
from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.grpc_server import start_leader_server
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock
from zonegate.services import group_wire
from zonegate.services.txn_routing import RoutedTxns
from zonegate.transactions.states import TransactionVersion, shard_for
from zonegate.txn_coordinator.role import TxnCoordinator

pytestmark = pytest.mark.integration

E = ErrorCode
TV2 = TransactionVersion.TV_2
OWNER_WAIT_S = 8.0
TOKEN = "s3cret"
# Two ids in different shards; node 2 owns the first id's shard, node 1 every other.
A = "app-a"
B = next(f"app-{i}" for i in range(100) if shard_for(f"app-{i}", 4) != shard_for(A, 4))


class Owners:
    def __init__(self) -> None:
        self.of: dict[int, int] = {shard_for(A, CONFIG.shards): 2}

    def txn_shard_owner(self, shard: int) -> int:
        return self.of.get(shard, 1)


class Link:
    """The way to another node's transaction calls, in process; a test cuts it."""

    def __init__(self, far: RoutedTxns) -> None:
        self.far = far
        self.down = False
        self.calls = 0

    async def txn_call(self, payload: bytes, *, timeout_s: float) -> bytes:
        if self.down:
            raise LeaderUnavailable("coordinator 127.0.0.1:1: UNAVAILABLE", unreachable=True)
        self.calls += 1
        return await self.far.serve(payload)


class Nodes:
    def __init__(self, meta: SqliteMetaStore, clock: ManualClock) -> None:
        self.owners = Owners()
        self.leaders = Leaders(meta)
        self.coordinators = {
            n: TxnCoordinator(
                n, n * 10, meta, self.leaders, self.owners.txn_shard_owner, clock, CONFIG
            )
            for n in (1, 2)
        }
        self.links: dict[int, Link] = {}
        self.routed = {
            n: RoutedTxns(c, n, self.owners, self.links.get, clock, owner_wait_s=OWNER_WAIT_S)
            for n, c in self.coordinators.items()
        }
        self.links.update({n: Link(r) for n, r in self.routed.items()})


def run(tmp_path: Path, body: Callable[[Nodes, ManualClock], Awaitable[None]]) -> None:
    async def main() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        clock = ManualClock()
        nodes = Nodes(meta, clock)
        try:
            for c in nodes.coordinators.values():
                await c.start()
            await asyncio.wait_for(body(nodes, clock), 60)
        finally:
            for c in nodes.coordinators.values():
                await c.stop()
            await meta.close()

    asyncio.run(main())


def test_a_transaction_begun_on_any_node_is_coordinated_by_its_shards_owner(
    tmp_path: Path,
) -> None:
    async def body(n: Nodes, clock: ManualClock) -> None:
        shard = shard_for(A, CONFIG.shards)
        assert shard in n.coordinators[2].hosts and shard not in n.coordinators[1].hosts
        init = await n.routed[1].init_producer_id(A, 10000, None)
        assert init.error == E.none and n.links[2].calls == 1
        pid, epoch = init.producer_id, init.producer_epoch
        added = await n.routed[1].add_partitions(A, pid, epoch, [("t", 0), ("t", 1)], TV2)
        assert added.error == E.none
        verified = await n.routed[1].verify_partitions(A, pid, epoch, [("t", 0), ("t", 2)])
        assert verified == {("t", 0): E.none, ("t", 2): E.transaction_abortable}
        described = await n.routed[1].describe(A)
        assert (described.error, described.state) == (E.none, "Ongoing")
        assert described.partitions == frozenset({("t", 0), ("t", 1)})
        ended = await n.routed[1].end_txn(A, pid, epoch, True, TV2)
        assert ended.error == E.none and ended.producer_epoch == epoch + 1  # TV2's bump
        await until(lambda: n.routed[2].coordinator.describe(A).state == "CompleteCommit")
        assert n.links[2].calls == 5 and n.links[1].calls == 0
        # Asked of the owner itself: served there, nothing passed on.
        assert (await n.routed[2].describe(A)).state == "CompleteCommit"
        assert n.links[1].calls == 0
        # An idempotent producer's id comes from the node asked, whichever it is.
        idem = await n.routed[1].init_producer_id(None, -1, None)
        assert idem.error == E.none and n.links[2].calls == 5

    run(tmp_path, body)


def test_a_node_asked_about_a_shard_it_does_not_own_answers_not_coordinator(
    tmp_path: Path,
) -> None:
    async def body(n: Nodes, clock: ManualClock) -> None:
        # Node 1 still thinks node 2 owns A's shard; node 2 has just seen it move to 1.
        far_owners = Owners()
        far_owners.of.clear()
        n.links[2].far = RoutedTxns(
            n.coordinators[2], 2, far_owners, lambda node: None, clock, owner_wait_s=0
        )
        assert (await n.routed[1].init_producer_id(A, 10000, None)).error == E.not_coordinator
        assert await n.routed[1].verify_partitions(A, 1, 0, [("t", 0)]) == {
            ("t", 0): E.not_coordinator
        }
        assert (await n.routed[1].describe(A)).error == E.not_coordinator
        assert n.links[2].calls == 3

    run(tmp_path, body)


def test_no_owner_in_reach_answers_not_coordinator_after_the_wait(tmp_path: Path) -> None:
    async def body(n: Nodes, clock: ManualClock) -> None:
        n.links[2].down = True
        call = asyncio.ensure_future(n.routed[1].end_txn(A, 5, 0, False, TV2))
        await spin()
        await clock.advance(OWNER_WAIT_S - 0.5)
        assert not call.done(), "waits for the membership to name another owner"
        await clock.advance(1.0)
        assert (await call).error == E.not_coordinator

    run(tmp_path, body)


def test_a_call_no_node_makes_is_refused(tmp_path: Path) -> None:
    async def body(n: Nodes, clock: ManualClock) -> None:
        for payload in (
            group_wire.encode_call("stop", (A,), {}),  # no such call
            group_wire.encode_call("describe", (A,), {"x": 1}),  # keyword arguments
            group_wire.encode_call("end_txn", (A, 1), {}),  # wrong arity
            group_wire.encode_call("describe", (7,), {}),  # an id that is not a string
            b"{not json",
        ):
            with pytest.raises(group_wire.BadPayload):
                await n.routed[1].serve(payload)

    run(tmp_path, body)


def test_list_transactions_gathers_every_shards_owner(tmp_path: Path) -> None:
    async def body(n: Nodes, clock: ManualClock) -> None:
        for tid in (A, B):
            init = await n.routed[1].init_producer_id(tid, 10000, None)
            answer = await n.routed[1].add_partitions(
                tid, init.producer_id, init.producer_epoch, [("t", 0)], TV2
            )
            assert answer.error == E.none
        error, listed, unknown = await n.routed[1].list_transactions(
            range(CONFIG.shards), [], ["Ongoing", "Nope"], -1
        )
        assert error == E.none and unknown == ["Nope"]
        assert [t.transactional_id for t in listed] == sorted([A, B])
        # A shard not held yet (its owner has not taken it over): Kafka's answer while
        # a partition loads, with what the others hold.
        n.owners.of[shard_for(B, CONFIG.shards)] = 2
        error, listed, _ = await n.routed[1].list_transactions(
            [shard_for(B, CONFIG.shards), shard_for(A, CONFIG.shards)], [], [], -1
        )
        assert error == E.coordinator_load_in_progress
        assert [t.transactional_id for t in listed] == [A]

    run(tmp_path, body)


def test_a_txn_call_crosses_nodes_over_grpc_with_the_clusters_token(tmp_path: Path) -> None:
    async def body(n: Nodes, clock: ManualClock) -> None:
        meta = SqliteMetaStore(str(tmp_path / "leader.db"))
        server, port = await start_leader_server(
            LeaderService(meta), "127.0.0.1", 0, txn_call=n.routed[2].serve, token=TOKEN
        )
        remote = RemoteLeader(f"127.0.0.1:{port}", from_node=1, token=TOKEN)
        try:
            n.links.clear()
            n.links[2] = remote  # type: ignore[assignment]
            init = await n.routed[1].init_producer_id(A, 10000, None)
            assert init.error == E.none and init.producer_id >= 0
            added = await n.routed[1].add_partitions(
                A, init.producer_id, init.producer_epoch, [("t", 3)], TV2
            )
            assert added.error == E.none
            verified = await n.routed[1].verify_partitions(
                A, init.producer_id, init.producer_epoch, [("t", 3)]
            )
            assert verified == {("t", 3): E.none}
            # Without the token the call is refused before it is served.
            stranger = RemoteLeader(f"127.0.0.1:{port}", from_node=1, token="guess")
            with pytest.raises(LeaderUnavailable):
                await stranger.txn_call(b"{}", timeout_s=5)
            await stranger.close()
        finally:
            await remote.close()
            await server.stop(None)
            await meta.close()

    run(tmp_path, body)
