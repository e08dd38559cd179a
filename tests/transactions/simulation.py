"""A deterministic simulation of the whole transaction protocol over the pure core.

Producers (Kafka's transactional producer, reduced to its protocol steps), one
coordinator shard (`TransactionShard`, its durable state a dict, crashed and taken
over with a higher coordinator epoch), and partition leaders (`PartitionTxns` plus
a log; partitions also move to new leaders, which load only what was committed)
exchange messages through a network that delays, reorders and duplicates them, with
failed coordinator writes, refused markers and timeouts. At the end a checker in the
style of Jepsen's Kafka workload reads every partition with read_committed and
compares with what the producers were told: no aborted read, no lost committed
write, no duplicate, no transaction left hanging (LSO = high watermark).

The sequencer is modelled by its rules: a batch seen before is acknowledged without
a second append, the next batch of an epoch must carry the next sequence, and a new
epoch (an InitProducerId, or a TV2 marker) starts again at 0. `verify=False` is a
broker before KIP-890: it appends a transaction's first batch without asking the
coordinator, which the checker must catch.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from zonegate.transactions.coordinator_core import CoordinatorConfig, TransactionShard
from zonegate.transactions.decisions import After, Answer, Markers, Write
from zonegate.transactions.marker_progress import MarkerOutcome, MarkerProgress
from zonegate.transactions.metadata import TopicPartition, TransactionMetadata
from zonegate.transactions.partition_txns import PartitionTxns
from zonegate.transactions.states import TransactionVersion

E = ErrorCode
TOPIC = "t"
RETRY_LATER = {
    E.concurrent_transactions,
    E.coordinator_not_available,
    E.coordinator_load_in_progress,
    E.not_coordinator,
}


@dataclass(frozen=True)
class Rec:
    client: int
    instance: int  # a restarted producer is a new instance; the old one, a zombie
    txn: int
    partition: int


@dataclass
class Entry:
    offset: int
    producer_id: int
    rec: Rec | None  # None: a marker


class Partition:
    def __init__(self, sim: Simulation, index: int) -> None:
        self.sim, self.index = sim, index
        self.txns = PartitionTxns()
        self.log: list[Entry] = []
        self.seen: set[tuple[int, int, int]] = set()  # (producer, epoch, sequence)
        self.last_seq: dict[int, tuple[int, int]] = {}  # producer -> (epoch, last sequence)

    def append(self, pid: int, epoch: int, seq: int, guard: int | None, rec: Rec) -> ErrorCode:
        if (pid, epoch, seq) in self.seen:
            return E.none  # the sequencer answers a duplicate with its first offset
        last = self.last_seq.get(pid)
        if last is not None and epoch >= last[0]:
            expected = last[1] + 1 if epoch == last[0] else 0
            if seq != expected:
                return E.out_of_order_sequence_number
        c = self.txns.cycle()
        err = c.data_batch(pid, epoch, seq, True, len(self.log), self.sim.now, guard)
        if err == E.none:
            self.log.append(Entry(len(self.log), pid, rec))
            self.txns.apply(c)
            self.seen.add((pid, epoch, seq))
            self.last_seq[pid] = (epoch, seq)
        return err

    def marker(self, m: Markers) -> ErrorCode:
        if self.sim.rnd.random() < 0.1:
            return E.not_leader_or_follower  # a leader move: retried
        c = self.txns.cycle()
        offset = len(self.log)
        out = c.marker(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit, offset, 0)
        if out.error == E.none:
            self.log.append(Entry(offset, m.producer_id, None))
            self.txns.apply(c)
            last = self.last_seq.get(m.producer_id)
            if last is None or m.producer_epoch > last[0]:
                self.last_seq[m.producer_id] = (m.producer_epoch, -1)  # sequences restart
        return out.error

    def move(self) -> None:
        """The partition moves to another leader (or its node is killed): the new leader
        loads what was committed (producers, aborted index); verifications in flight were
        the old leader's memory and are gone, so their batches are refused."""
        committed = self.txns
        self.txns = PartitionTxns.load(committed.producers.values(), committed.aborted)
        self.sim.leader_moves += 1

    def read_committed(self) -> list[Rec]:
        lso = self.txns.last_stable_offset(len(self.log))
        aborted = self.txns.aborted_in_range(0, lso)
        out = []
        for e in self.log[:lso]:
            if e.rec is None:
                continue
            if any(
                a.producer_id == e.producer_id and a.first_offset <= e.offset <= a.last_offset
                for a in aborted
            ):
                continue
            out.append(e.rec)
        return out


@dataclass
class Client:
    index: int
    txns_left: int
    instance: int = 0
    zombie: bool = False
    pid: int = -1
    epoch: int = -1
    txn: int = 0
    seq: dict[int, int] = field(default_factory=dict)
    outstanding: set[Rec] = field(default_factory=set)
    failed: bool = False
    busy: bool = False
    outcomes: dict[int, str] = field(default_factory=dict)
    acked: dict[int, list[Rec]] = field(default_factory=dict)

    @property
    def txid(self) -> str:
        return f"tx{self.index}"


class Simulation:
    def __init__(
        self, seed: int, tv2: bool, verify: bool = True, clients: int = 3, partitions: int = 3
    ) -> None:
        self.rnd = random.Random(seed)
        self.verify = verify
        self.tv = TransactionVersion.TV_2 if tv2 else TransactionVersion.TV_0
        self.now = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._pids = itertools.count(1000)
        self.config = CoordinatorConfig(max_timeout_ms=10_000, version=self.tv)
        self.store: dict[str, TransactionMetadata] = {}
        self.coordinator_epoch = 0
        self.shard = TransactionShard(0, self.config, lambda: next(self._pids))
        self.progress: dict[str, MarkerProgress] = {}
        self.partitions = [Partition(self, i) for i in range(partitions)]
        self.clients = [Client(i, txns_left=6) for i in range(clients)]
        self.crashes = 0
        self.leader_moves = 0
        self.restarts = 0

    # -- the network ---------------------------------------------------------------

    def send(self, fn: Callable[[], None], slow: float = 0.1) -> None:
        delay = self.rnd.randint(1, 20)
        if self.rnd.random() < slow:
            delay += self.rnd.randint(200, 1500)  # long enough to reorder, even to time out
        heapq.heappush(self._queue, (self.now + delay, next(self._order), fn))

    def run(self, until: int = 200_000) -> None:
        for c in self.clients:
            self.send(lambda c=c: self.init(c))
        self.send(self.tick)
        while self._queue and self.now < until:
            self.now, _, fn = heapq.heappop(self._queue)
            fn()
        assert not self._queue, "the simulation did not settle"

    def tick(self) -> None:
        """The coordinator's timer, and now and then a crash and a takeover."""
        for w in self.shard.abort_timed_out(self.now):
            self.persist(w, None)
        if self.crashes < 3 and self.rnd.random() < 0.02:
            self.crash()
        if self.leader_moves < 5 and self.rnd.random() < 0.02:
            self.rnd.choice(self.partitions).move()
        if any(c.txns_left or c.busy for c in self.clients) or self.progress:
            self.send(self.tick, slow=0)

    # -- the coordinator -----------------------------------------------------------

    def crash(self) -> None:
        self.crashes += 1
        self.coordinator_epoch += 1
        txns = [copy.deepcopy(m) for m in self.store.values()]
        self.shard = TransactionShard(
            self.coordinator_epoch, self.config, lambda: next(self._pids), txns
        )
        self.progress = {}
        for m in self.shard.loaded(self.now):
            self.start_markers(m)

    def call(
        self, ask: Callable[[TransactionShard], Answer | Write], reply: Callable[[Answer], None]
    ) -> None:
        d = ask(self.shard)
        if isinstance(d, Answer):
            self.send(lambda: reply(d))
        else:
            self.persist(d, reply)

    def persist(self, w: Write, reply: Callable[[Answer], None] | None) -> None:
        if self.rnd.random() < 0.05:
            ans = self.shard.write_failed(w, E.coordinator_not_available)
            if ans is not None and reply is not None:
                self.send(lambda: reply(ans))
            if w.after == After.COMPLETE:
                self.send(lambda: self.retry_complete(w.transactional_id))
            return
        out = self.shard.written(w, self.now)
        meta = self.shard.txns.get(w.transactional_id)
        if meta is None:
            self.store.pop(w.transactional_id, None)
        else:
            durable = meta.snapshot()
            durable.pending_state = None
            durable.has_failed_epoch_fence = False
            self.store[w.transactional_id] = durable
        if out.answer is not None and reply is not None:
            answer = out.answer
            self.send(lambda: reply(answer))
        if out.markers is not None:
            self.start_markers(out.markers)

    def retry_complete(self, transactional_id: str) -> None:
        again = self.shard.complete_again(transactional_id, self.now)
        if again is not None:
            self.persist(again, None)

    def start_markers(self, m: Markers) -> None:
        progress = MarkerProgress(m)
        self.progress[m.transactional_id] = progress
        self.send_markers(progress)

    def send_markers(self, progress: MarkerProgress) -> None:
        if progress.complete:
            del self.progress[progress.markers.transactional_id]
            self.persist(progress.markers.complete, None)
            return
        for tp in progress.to_send:
            self.send(lambda tp=tp: self.deliver_marker(progress, tp))

    def deliver_marker(self, progress: MarkerProgress, tp: TopicPartition) -> None:
        err = self.partitions[tp[1]].marker(progress.markers)
        self.send(lambda: self.marker_answer(progress, tp, err))

    def marker_answer(self, progress: MarkerProgress, tp: TopicPartition, err: ErrorCode) -> None:
        if self.progress.get(progress.markers.transactional_id) is not progress:
            return  # a deposed coordinator's markers: nobody waits for them
        outcome = progress.answered(tp, err)
        if outcome == MarkerOutcome.RETRY:
            self.send(lambda: self.deliver_marker(progress, tp))
        elif outcome == MarkerOutcome.STOP:
            del self.progress[progress.markers.transactional_id]
        elif progress.complete:
            self.send_markers(progress)

    # -- the partition leaders ---------------------------------------------------------

    def produce(self, c: Client, p: int, pid: int, epoch: int, seq: int, rec: Rec,
                reply: Callable[[ErrorCode], None]) -> None:  # fmt: skip
        part = self.partitions[p]
        if not part.txns.needs_verification(pid, epoch, True):
            err = part.append(pid, epoch, seq, None, rec)
            self.send(lambda: reply(err))
            return
        guard = part.txns.begin_verification(pid, epoch, seq, self.now)
        tp = (TOPIC, p)
        if not self.verify:  # before KIP-890: the first batch goes straight in
            err = part.append(pid, epoch, seq, guard, rec)
            self.send(lambda: reply(err))
            return

        def verified(ans: Answer) -> None:
            if ans.error != E.none:
                self.send(lambda: reply(ans.error))
                return
            err = part.append(pid, epoch, seq, guard, rec)
            self.send(lambda: reply(err))

        if self.tv.supports_epoch_bump:  # the leader adds the partition for the producer
            self.send(lambda: self.call(
                lambda s: s.add_partitions(c.txid, pid, epoch, frozenset({tp}), self.now, self.tv),
                verified,
            ))  # fmt: skip
        else:  # AddPartitionsToTxn's verify-only form

            def verify() -> None:
                errs = self.shard.verify_partitions(c.txid, pid, epoch, [tp])
                self.send(lambda: verified(Answer(errs[tp])))

            self.send(verify)

    # -- the producers -------------------------------------------------------------------

    def init(self, c: Client) -> None:
        if c.zombie:
            c.busy = False  # a fenced producer is closed, not started again
            return
        c.busy = True

        def answered(ans: Answer) -> None:
            if ans.error == E.none:
                c.pid, c.epoch, c.seq = ans.producer_id, ans.producer_epoch, {}
                self.begin(c)
            else:
                self.send(lambda: self.init(c))

        self.call(lambda s: s.init_producer_id(c.txid, 1000, None, self.now), answered)

    def restart(self, c: Client) -> None:
        """The application restarts the producer mid-transaction while the old instance
        lives on: the new one's InitProducerId must fence the old one (a zombie), whose
        open transaction is aborted and whose later calls are refused."""
        if c.zombie:
            return
        self.restarts += 1
        successor = Client(c.index, txns_left=c.txns_left, instance=c.instance + 1)
        c.zombie, c.txns_left = True, 0
        self.clients.append(successor)
        self.init(successor)

    def begin(self, c: Client) -> None:
        if not c.txns_left:
            c.busy = False
            return
        c.txns_left -= 1
        c.txn += 1
        k, pid, epoch = c.txn, c.pid, c.epoch
        chosen = self.rnd.sample(range(len(self.partitions)), self.rnd.randint(1, 3))
        c.acked[k], c.failed = [], False
        c.outstanding = {Rec(c.index, c.instance, k, p) for p in chosen}
        if self.restarts < 2 and self.rnd.random() < 0.05:
            self.send(lambda: self.restart(c))

        def produce_all() -> None:
            for p in chosen:
                seq = c.seq.get(p, -1) + 1
                c.seq[p] = seq
                rec = Rec(c.index, c.instance, k, p)
                copies = 2 if self.rnd.random() < 0.2 else 1  # a retry whose first try lingers
                for _ in range(copies):
                    self.send(self.attempt(c, k, p, pid, epoch, seq, rec), slow=0.2)
                # delivery.timeout.ms: a batch unanswered by then fails its transaction
                heapq.heappush(
                    self._queue,
                    (self.now + 600, next(self._order), lambda rec=rec: self.expired(c, k, rec)),
                )

        if self.tv.supports_epoch_bump:
            produce_all()
            return
        parts = frozenset((TOPIC, p) for p in chosen)

        def added(ans: Answer) -> None:
            if ans.error == E.none:
                produce_all()
            elif ans.error in RETRY_LATER:
                self.send(
                    lambda: self.call(
                        lambda s: s.add_partitions(c.txid, pid, epoch, parts, self.now), added
                    )
                )
            else:
                c.outstanding = set()
                self.end(c, k, commit=False)

        self.call(lambda s: s.add_partitions(c.txid, pid, epoch, parts, self.now), added)

    def attempt(self, c: Client, k: int, p: int, pid: int, epoch: int, seq: int, rec: Rec
                ) -> Callable[[], None]:  # fmt: skip
        """One send of a batch; a retriable answer sends it again, same sequence."""

        def go() -> None:
            again = self.attempt(c, k, p, pid, epoch, seq, rec)
            self.produce(
                c, p, pid, epoch, seq, rec, lambda err: self.produced(c, k, rec, err, again)
            )

        return go

    def produced(
        self, c: Client, k: int, rec: Rec, err: ErrorCode, retry: Callable[[], None]
    ) -> None:
        if c.txn != k or rec not in c.outstanding:
            return  # the answer to a lingering copy, after the transaction moved on
        if err in RETRY_LATER:
            self.send(retry)  # Kafka answers these as NOT_ENOUGH_REPLICAS: retried
            return
        c.outstanding.discard(rec)
        if err == E.none:
            c.acked[k].append(rec)
        else:
            c.failed = True
        self.maybe_end(c, k)

    def expired(self, c: Client, k: int, rec: Rec) -> None:
        if c.txn == k and rec in c.outstanding:
            c.outstanding.discard(rec)
            c.failed = True
            self.maybe_end(c, k)

    def maybe_end(self, c: Client, k: int) -> None:
        if not c.outstanding:
            self.end(c, k, commit=not c.failed and self.rnd.random() < 0.75)

    def end(self, c: Client, k: int, commit: bool) -> None:
        def answered(ans: Answer) -> None:
            if ans.error == E.none:
                c.outcomes[k] = "commit" if commit else "abort"
                if self.tv.supports_epoch_bump and ans.producer_epoch != c.epoch:
                    c.epoch, c.seq = ans.producer_epoch, {}
                self.begin(c)
            elif ans.error in RETRY_LATER:
                self.send(lambda: self.end(c, k, commit))
            else:  # fenced: by a timeout (start over) or by its own successor (stop)
                c.outcomes[k] = "unknown"
                if c.zombie:
                    c.busy = False
                else:
                    self.init(c)

        pid, epoch = c.pid, c.epoch
        self.call(lambda s: s.end_txn(c.txid, pid, epoch, commit, self.tv, self.now), answered)

    # -- the checker ---------------------------------------------------------------------

    def check(self) -> dict[str, int]:
        visible = [r for part in self.partitions for r in part.read_committed()]
        outcome = {(c.index, c.instance, k): o for c in self.clients for k, o in c.outcomes.items()}
        acked = {
            (c.index, c.instance, k): set(rs) for c in self.clients for k, rs in c.acked.items()
        }
        committed = [r for key, rs in acked.items() if outcome.get(key) == "commit" for r in rs]
        seen = set(visible)
        return {
            "transactions": len(outcome),
            "committed": sum(1 for o in outcome.values() if o == "commit"),
            # every "unknown" here is a transaction the coordinator aborted (a fence or a
            # timeout): none of its writes may be read either
            "aborted read": sum(
                1 for r in visible if outcome.get((r.client, r.instance, r.txn)) != "commit"
            ),
            "lost write": sum(1 for r in committed if r not in seen),
            "torn": sum(1 for rs in acked.values() if rs & seen and not rs <= seen),
            "duplicate": len(visible) - len(set(visible)),
            "hanging": sum(
                1 for p in self.partitions if p.txns.last_stable_offset(len(p.log)) < len(p.log)
            ),
            "coordinator crashes": self.crashes,
            "leader moves": self.leader_moves,
            "producer restarts": self.restarts,
        }
