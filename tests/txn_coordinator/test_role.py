"""The transaction coordinator role over a real metadata store (each backend), event
for event as the simulation's coordinator (tests/transactions/simulation.py): writes made
durable before answers, markers after the Prepare* write and the completion after every
marker, takeover by epoch with the predecessor fenced, timeouts on the injected clock.

Partitions are stood in for by `Leaders`: each keeps the partition rules of its leader
(`PartitionTxns`, which refuses a deposed coordinator's marker) and records what it was
sent; the leader's write path for markers comes in a later step.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.metastore.backends import BACKENDS, Opener
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import CommittedOffset, MetaStoreUnavailable, ShardOwner
from zonegate.runtime.clock import ManualClock
from zonegate.transactions.coordinator_core import CoordinatorConfig
from zonegate.transactions.decisions import Markers
from zonegate.transactions.metadata import TopicPartition, TxnTransit
from zonegate.transactions.partition_txns import PartitionTxns
from zonegate.transactions.states import TransactionVersion, TxnState, shard_for
from zonegate.txn_coordinator.role import CONCURRENT_WAIT_S, TxnCoordinator, TxnCoordinatorConfig

pytestmark = pytest.mark.integration

E = ErrorCode
TV0 = TransactionVersion.TV_0
TXN = "app"
CONFIG = TxnCoordinatorConfig(
    shards=4, core=CoordinatorConfig(max_timeout_ms=60000), retry_backoff_s=0.05
)
SHARD = shard_for(TXN, CONFIG.shards)
OTHER = next(f"app-{i}" for i in range(100) if shard_for(f"app-{i}", CONFIG.shards) == SHARD)
P0, P1 = ("t", 0), ("t", 1)


class Leaders:
    """The partitions' leaders as the coordinator's MarkerWriter sees them."""

    def __init__(self, store: MetaStore) -> None:
        self.store = store
        self.parts: dict[TopicPartition, PartitionTxns] = {}
        self.written: dict[TopicPartition, list[tuple[int, bool, int]]] = {}
        self.states_seen: list[TxnState] = []  # the id's durable state at each marker
        self.stalled = False  # every partition answers NOT_LEADER_OR_FOLLOWER
        self.deleted: set[TopicPartition] = set()
        self.lookups_failing = 0  # the metadata asked whether a partition exists fails
        self.gate: asyncio.Event | None = None  # when set up, markers wait for it

    async def write_markers(
        self, m: Markers, partitions: frozenset[TopicPartition]
    ) -> Mapping[TopicPartition, ErrorCode]:
        if self.gate is not None:
            await self.gate.wait()
        durable = {t.transactional_id: t for t in await self.store.load_shard(SHARD)}
        if m.transactional_id in durable:
            self.states_seen.append(durable[m.transactional_id].state)
        out = {}
        for tp in partitions:
            if self.stalled:
                out[tp] = E.not_leader_or_follower
                continue
            if tp in self.deleted:
                out[tp] = E.unknown_topic_or_partition
                continue
            part = self.parts.setdefault(tp, PartitionTxns())
            log = self.written.setdefault(tp, [])
            c = part.cycle()
            done = c.marker(
                m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit, len(log), 0
            )
            if done.error == E.none:
                part.apply(c)
                log.append((m.producer_id, m.commit, m.coordinator_epoch))
            out[tp] = done.error
        return out

    async def exists(self, partition: TopicPartition) -> bool:
        if self.lookups_failing:
            self.lookups_failing -= 1
            raise MetaStoreUnavailable("PostgreSQL unreachable")
        return partition not in self.deleted


class FailingWrites:
    """The store, with the next `fail` writes of transaction state refused as unreachable
    (a PostgreSQL restart, say)."""

    def __init__(self, store: MetaStore) -> None:
        self.store = store
        self.fail = 0
        self.error: Exception = MetaStoreUnavailable("PostgreSQL unreachable: restarting")

    async def write_txn(self, shard: int, epoch: int, txn_id: str, transit: TxnTransit) -> None:
        if self.fail:
            self.fail -= 1
            raise self.error
        await self.store.write_txn(shard, epoch, txn_id, transit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture(params=list(BACKENDS))
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Connections to one fresh store of each backend (a node process holds one each)."""
    return BACKENDS[request.param](request, tmp_path)


def run(opener: Opener, body: Callable[[Callable[[], MetaStore], ManualClock], Awaitable[None]]
        ) -> None:  # fmt: skip
    async def main() -> None:
        opened: list[MetaStore] = []

        def store() -> MetaStore:
            opened.append(opener())
            return opened[-1]

        try:
            await asyncio.wait_for(body(store, ManualClock()), 60)
        finally:
            for s in opened:
                await s.close()

    asyncio.run(main())


async def started(
    store: Any, leaders: Leaders, clock: ManualClock, node: int = 1,
    owner: Callable[[int], int] | None = None,
) -> TxnCoordinator:  # fmt: skip
    c = TxnCoordinator(node, node * 10, store, leaders, owner or (lambda s: node), clock, CONFIG)
    await c.start()
    return c


async def settle(c: TxnCoordinator, clock: ManualClock) -> None:
    """Runs the coordinator's markers, retries and completions to the end, moving the clock
    past each backoff."""
    done = asyncio.ensure_future(c.settled())
    while not done.done():
        await clock.advance(CONFIG.retry_backoff_s)
        await asyncio.wait([done], timeout=0.01)


async def swept(c: TxnCoordinator, clock: ManualClock, seconds: float) -> None:
    """Moves the clock on and waits (a bounded real wait: the store answers from its own
    thread) until the timer has run a sweep."""
    # Its sleep is on the clock only once the sleeping task has run: until then a move of
    # the clock would pass it by.
    await until(lambda: c.timer_idle and any(not f.done() for *_, f in clock._sleepers))
    sweeps = c.sweeps
    await clock.advance(seconds)
    await until(lambda: c.sweeps != sweeps)


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not reached in 10 s")


async def begin(c: TxnCoordinator, parts: set[TopicPartition], timeout_ms: int = 30000,
                txn: str = TXN) -> tuple[int, int]:  # fmt: skip
    init = await c.init_producer_id(txn, timeout_ms, None)
    assert init.error == E.none, init
    added = await c.add_partitions(txn, init.producer_id, init.producer_epoch, frozenset(parts))
    assert added.error == E.none, added
    return init.producer_id, init.producer_epoch


def test_a_commit_is_durable_before_its_markers_and_complete_after_them(opener: Opener) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        store = open_store()
        leaders = Leaders(store)
        c = await started(store, leaders, clock)
        pid, epoch = await begin(c, {P0, P1})
        assert pid >= 1000 and epoch == 0, "an id from the node's block"
        assert (await c.end_txn(TXN, pid, epoch, True, TV0)).error == E.none
        await settle(c, clock)
        coordinator_epoch = c.hosts[SHARD].epoch
        assert leaders.written == {
            P0: [(pid, True, coordinator_epoch)],
            P1: [(pid, True, coordinator_epoch)],
        }
        assert set(leaders.states_seen) == {TxnState.PREPARE_COMMIT}, "decision durable first"
        [row] = await store.load_shard(SHARD)
        assert (row.state, row.partitions, row.producer_id) == (
            TxnState.COMPLETE_COMMIT,
            set(),
            pid,
        )
        assert c.describe(TXN).state == "CompleteCommit"
        await c.stop()

    run(opener, body)


def waiting(clock: ManualClock) -> bool:
    """Whether an add waits on the clock for markers (a sleep of CONCURRENT_WAIT_S)."""
    end = clock.monotonic() + CONCURRENT_WAIT_S
    return any(abs(t - end) < 1e-9 and not f.done() for t, _, f in clock._sleepers)


def test_an_add_waits_for_the_last_transactions_markers_then_says_concurrent(
    opener: Opener,
) -> None:
    """A producer starting its next transaction while the last one's markers are still
    being written is answered once they are (not CONCURRENT_TRANSACTIONS at once), and
    CONCURRENT_TRANSACTIONS only if they take longer than CONCURRENT_WAIT_S."""

    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        store = open_store()
        leaders = Leaders(store)
        leaders.gate = asyncio.Event()
        c = await started(store, leaders, clock)
        pid, epoch = await begin(c, {P0})
        assert (await c.end_txn(TXN, pid, epoch, True, TV0)).error == E.none
        add = asyncio.ensure_future(c.add_partitions(TXN, pid, epoch, frozenset({P1})))
        await until(lambda: waiting(clock))
        assert not add.done()
        leaders.gate.set()
        await until(add.done)
        assert add.result().error == E.none
        assert leaders.written == {P0: [(pid, True, c.hosts[SHARD].epoch)]}
        # Markers slower than the wait: the add is answered CONCURRENT_TRANSACTIONS (the
        # client backs off and asks again), and goes through once they are written.
        leaders.gate.clear()
        assert (await c.end_txn(TXN, pid, epoch, False, TV0)).error == E.none
        add = asyncio.ensure_future(c.add_partitions(TXN, pid, epoch, frozenset({P0})))
        await until(lambda: waiting(clock))
        await clock.advance(CONCURRENT_WAIT_S)
        await until(add.done)
        assert add.result().error == E.concurrent_transactions
        leaders.gate.set()
        await settle(c, clock)
        added = await c.add_partitions(TXN, pid, epoch, frozenset({P0}))
        assert added.error == E.none
        await c.stop()

    run(opener, body)


def test_a_new_owner_finishes_what_the_old_one_left_and_fences_it(opener: Opener) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        first = open_store()
        leaders = Leaders(first)
        old = await started(first, leaders, clock, node=1)
        pid, epoch = await begin(old, {P0, P1})
        other_pid, other_epoch = await begin(old, {P0}, txn=OTHER)
        leaders.stalled = True  # the old owner's markers do not get through
        assert (await old.end_txn(TXN, pid, epoch, True, TV0)).error == E.none
        await clock.advance(CONFIG.retry_backoff_s)

        # The old owner is thought dead: another node (with its own clock, so the old one
        # stays stalled meanwhile) takes the shard over and loads it.
        new_clock = ManualClock()
        new = await started(open_store(), leaders, new_clock, node=2)
        assert new.hosts[SHARD].epoch == old.hosts[SHARD].epoch + 1
        assert (await new.init_producer_id(TXN, 30000, None)).error == E.concurrent_transactions
        leaders.stalled = False
        await settle(new, new_clock)
        new_epoch = new.hosts[SHARD].epoch
        assert leaders.written == {P0: [(pid, True, new_epoch)], P1: [(pid, True, new_epoch)]}
        rows = {t.transactional_id: t for t in await first.load_shard(SHARD)}
        assert rows[TXN].state == TxnState.COMPLETE_COMMIT

        # The old owner's retried markers are refused at the partitions (a deposed
        # coordinator's epoch): it stops, and completes nothing.
        await settle(old, clock)
        assert len(leaders.written[P0]) == 1

        # The new owner ends another transaction of the shard; the old one, deposed
        # without knowing it, still sees it open with P0. Asked by P0's leader whether
        # a batch of it may open a transaction there, it must not say yes (the batch
        # would open a transaction nobody will end): NOT_COORDINATOR, and it lets go.
        assert (await new.end_txn(OTHER, other_pid, other_epoch, False, TV0)).error == E.none
        await settle(new, new_clock)
        assert await old.verify_partitions(OTHER, other_pid, other_epoch, [P0]) == {
            P0: E.not_coordinator
        }
        assert SHARD not in old.hosts
        assert (await old.end_txn(TXN, pid, epoch, True, TV0)).error == E.not_coordinator
        await old.stop()
        await new.stop()

    run(opener, body)


def test_a_deposed_owners_next_write_is_fenced(opener: Opener) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        first = open_store()
        old = await started(first, Leaders(first), clock, node=1)
        second = open_store()
        new = await started(second, Leaders(second), ManualClock(), node=2)
        assert (await old.init_producer_id(TXN, 30000, None)).error == E.not_coordinator
        assert SHARD not in old.hosts, "it let the shard go"
        assert (await new.init_producer_id(TXN, 30000, None)).error == E.none
        await old.stop()
        await new.stop()

    run(opener, body)


def test_a_transaction_past_its_timeout_is_aborted_by_the_timer(opener: Opener) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        store = open_store()
        leaders = Leaders(store)
        c = await started(store, leaders, clock)
        pid, epoch = await begin(c, {P0}, timeout_ms=1000)
        await clock.advance(1.0)  # at its deadline: not past it yet
        await c.settled()
        assert c.describe(TXN).state == "Ongoing"
        await swept(c, clock, 0.001)
        await settle(c, clock)
        described = c.describe(TXN)
        assert described.state == "CompleteAbort" and described.producer_epoch > epoch
        assert leaders.written == {P0: [(pid, False, c.hosts[SHARD].epoch)]}
        [row] = await store.load_shard(SHARD)
        assert row.state == TxnState.COMPLETE_ABORT
        # The producer that left it is fenced.
        assert (await c.end_txn(TXN, pid, epoch, True, TV0)).error == E.producer_fenced
        await c.stop()

    run(opener, body)


def test_group_offsets_commit_with_the_transaction_and_a_deleted_topic_needs_no_marker(
    opener: Opener,
) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        store = open_store()
        leaders = Leaders(store)
        c = await started(store, leaders, clock)
        offsets = ("__consumer_offsets", shard_for("g", 50))
        pid, epoch = await begin(c, {P0, P1, offsets})
        await store.txn_commit_offsets(
            "g", pid, offsets[1], [CommittedOffset("t", 0, 42, 1, "", 5)]
        )
        assert await store.fetch_offsets("g") == []
        leaders.deleted.add(P1)
        leaders.lookups_failing = 1  # the first time, whether it is gone cannot be told
        assert (await c.end_txn(TXN, pid, epoch, True, TV0)).error == E.none
        await settle(c, clock)
        assert [o.offset for o in await store.fetch_offsets("g")] == [42]
        assert await store.pending_offsets("g") == []
        assert list(leaders.written) == [P0], "no marker to the offsets topic or the deleted one"
        assert c.describe(TXN).state == "CompleteCommit"
        await c.stop()

    run(opener, body)


def test_writes_the_store_refuses_are_retriable_and_a_completion_is_retried(opener: Opener) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        store = FailingWrites(open_store())
        leaders = Leaders(store.store)
        c = await started(store, leaders, clock)
        pid, epoch = await begin(c, {P0})
        store.fail = 1
        assert (await c.end_txn(TXN, pid, epoch, True, TV0)).error == E.coordinator_not_available
        assert c.describe(TXN).state == "Ongoing", "nothing changed"
        assert (await c.end_txn(TXN, pid, epoch, True, TV0)).error == E.none
        store.fail = 1  # the completion's write, after the markers
        await settle(c, clock)
        assert c.describe(TXN).state == "CompleteCommit"
        [row] = await store.store.load_shard(SHARD)
        assert row.state == TxnState.COMPLETE_COMMIT
        # Any failure of a write (here SQLite's file locked past its busy timeout) leaves
        # nothing pending: the producer is answered a retriable error, and its retry goes.
        store.error, store.fail = sqlite3.OperationalError("database is locked"), 1
        init = await c.init_producer_id(TXN, 30000, None)
        assert init.error == E.coordinator_not_available
        assert (await c.init_producer_id(TXN, 30000, None)).error == E.none
        await c.stop()

    run(opener, body)


def test_shards_follow_their_owner(opener: Opener) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        owners = {s: 1 + s % 2 for s in range(CONFIG.shards)}
        store = open_store()
        leaders = Leaders(store)
        one = await started(store, leaders, clock, 1, owners.__getitem__)
        two = await started(open_store(), leaders, clock, 2, owners.__getitem__)
        assert sorted(one.hosts) == [0, 2] and sorted(two.hosts) == [1, 3]
        assert await store.txn_shards() == [
            ShardOwner(0, 1, 1, 10),
            ShardOwner(1, 1, 2, 20),
            ShardOwner(2, 1, 1, 10),
            ShardOwner(3, 1, 2, 20),
        ]
        assert (await two.init_producer_id(TXN, 30000, None)).error == (
            E.none if owners[SHARD] == 2 else E.not_coordinator
        )
        # Node 1 leaves: node 2 takes its shards over, each at the next epoch.
        owners.update(dict.fromkeys(range(CONFIG.shards), 2))
        await two.rebalance()
        await one.rebalance()
        assert sorted(two.hosts) == [0, 1, 2, 3] and one.hosts == {}
        assert [o.epoch for o in await store.txn_shards()] == [2, 1, 2, 1]
        # Node 1 comes back for a moment and takes shard 0 (epoch 3), then leaves again
        # before node 2 looked: node 2 still holds it at epoch 2, stale. Its next
        # rebalance sees the epoch moved on and takes the shard over again, at epoch 4.
        owners[0] = 1
        await one.rebalance()
        owners[0] = 2
        await one.rebalance()
        assert two.hosts[0].epoch == 2 and one.hosts == {}
        await two.rebalance()
        assert two.hosts[0].epoch == 4 and not two.hosts[0].lost
        assert [o.epoch for o in await store.txn_shards()] == [4, 1, 2, 1]
        assert (await two.init_producer_id(TXN, 30000, None)).error == (
            E.none if SHARD in two.hosts else E.not_coordinator
        )
        await one.stop()
        await two.stop()

    run(opener, body)


def test_verification_and_idempotent_ids(opener: Opener) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        store = open_store()
        c = await started(store, Leaders(store), clock, owner=lambda s: 1 if s == SHARD else 2)
        pid, epoch = await begin(c, {P0})
        # KIP-890 part 1: a leader asks whether a partition is in the transaction.
        assert await c.verify_partitions(TXN, pid, epoch, [P0, P1]) == {
            P0: E.none,
            P1: E.transaction_abortable,
        }
        assert await c.verify_partitions(TXN, pid, epoch - 1 if epoch else 99, [P0]) == {
            P0: E.producer_fenced
        }
        elsewhere = next(f"x{i}" for i in range(100) if shard_for(f"x{i}", 4) != SHARD)
        assert await c.verify_partitions(elsewhere, pid, epoch, [P0]) == {P0: E.not_coordinator}
        assert c.describe(elsewhere).error == E.not_coordinator
        # TV2: EndTxn answers the bumped epoch.
        ended = await c.end_txn(TXN, pid, epoch, True, TransactionVersion.TV_2)
        assert (ended.error, ended.producer_id, ended.producer_epoch) == (E.none, pid, epoch + 1)
        # An idempotent producer's id comes from the node's block, whatever shard it owns.
        idem = await c.init_producer_id(None, 0, None)
        assert idem.error == E.none and idem.producer_id not in (-1, pid)
        listed, unknown = c.list_transactions([], ["Ongoing", "Nope"], -1)
        assert listed == [] and unknown == ["Nope"]
        await settle(c, clock)
        await c.stop()

    run(opener, body)


def test_an_idle_id_is_forgotten_at_the_expiry_sweep(opener: Opener) -> None:
    async def body(open_store: Callable[[], MetaStore], clock: ManualClock) -> None:
        store = open_store()
        config = TxnCoordinatorConfig(
            shards=CONFIG.shards,
            core=CoordinatorConfig(max_timeout_ms=60000, id_expiration_ms=5000),
            abort_interval_ms=1000,
            expire_interval_ms=3000,
        )
        c = TxnCoordinator(1, 10, store, Leaders(store), lambda s: 1, clock, config)
        await c.start()
        assert (await c.init_producer_id(TXN, 30000, None)).error == E.none
        await begin(c, {P0}, txn=OTHER)  # open: it never expires (it times out at 30 s)
        # Idle 5 s by the time the sweep after it runs (every 3 s, woken every second).
        while c.describe(TXN).error == E.none and clock.wall_ms() < 1_700_000_020_000:
            await swept(c, clock, 1.0)
        assert c.describe(TXN).error == E.transactional_id_not_found
        assert clock.wall_ms() - 1_700_000_000_000 in range(5000, 9001)
        assert [t.transactional_id for t in await store.load_shard(SHARD)] == [OTHER]
        assert c.describe(OTHER).state == "Ongoing"
        await c.stop()

    run(opener, body)
