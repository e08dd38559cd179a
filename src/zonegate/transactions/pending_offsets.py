"""Offsets committed inside transactions, pending until their transaction ends (KIP-98, KIP-447).

Kafka's OffsetMetadataManager keeps, per producer id, the offsets its TxnOffsetCommit
calls wrote; the commit marker moves them into the group's committed offsets, the
abort marker drops them; meanwhile OffsetFetch with `require_stable` answers
UNSTABLE_OFFSET_COMMIT for a partition that has one pending, and OffsetDelete or a
group's deletion drop them. When a plain OffsetCommit of the same partition lands
between the TxnOffsetCommit and the commit marker, the later one in log order wins:
Kafka compares the records' offsets in `__consumer_offsets`; here every commit, plain
or transactional, takes the next value of one sequence (the metadata store's counter,
in the same transaction as the row), and the marker keeps the higher one.

This module is the rule as a value the metadata store's statements must match (its
contract tests replay the same cases); the store keeps `txn_pending_offsets` rows,
not this object.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

OffsetKey = tuple[str, str, int]  # group, topic, partition


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    seq: int  # the commit's place in the order of all commits


@dataclass(slots=True)
class OffsetBook:
    committed: dict[OffsetKey, OffsetRecord] = field(default_factory=dict)
    pending: dict[int, dict[OffsetKey, OffsetRecord]] = field(default_factory=dict)
    next_seq: int = 0

    def _stamp(self, offset: int, leader_epoch: int, metadata: str, now_ms: int) -> OffsetRecord:
        self.next_seq += 1
        return OffsetRecord(offset, leader_epoch, metadata, now_ms, self.next_seq)

    def commit(
        self, group: str, topic: str, partition: int, offset: int, leader_epoch: int,
        metadata: str, now_ms: int,
    ) -> None:  # fmt: skip
        """A plain OffsetCommit: visible at once."""
        self.committed[(group, topic, partition)] = self._stamp(
            offset, leader_epoch, metadata, now_ms
        )

    def txn_commit(
        self, producer_id: int, group: str, topic: str, partition: int, offset: int,
        leader_epoch: int, metadata: str, now_ms: int,
    ) -> None:  # fmt: skip
        """A TxnOffsetCommit: pending under its producer; a later one of the same
        partition in the same transaction replaces it."""
        self.pending.setdefault(producer_id, {})[(group, topic, partition)] = self._stamp(
            offset, leader_epoch, metadata, now_ms
        )

    def end_transaction(self, producer_id: int, commit: bool, groups: Iterable[str]) -> None:
        """The marker for the groups of one `__consumer_offsets` partition: their pending
        offsets of this producer become committed (unless a later plain commit of the
        same partition is there) or are dropped. Idempotent: a retried marker finds
        nothing left."""
        mine = self.pending.get(producer_id)
        if not mine:
            return
        wanted = set(groups)
        for key in [k for k in mine if k[0] in wanted]:
            rec = mine.pop(key)
            current = self.committed.get(key)
            if commit and (current is None or rec.seq > current.seq):
                self.committed[key] = rec
        if not mine:
            del self.pending[producer_id]

    def unstable(self, group: str, topic: str, partition: int) -> bool:
        """OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for this."""
        key = (group, topic, partition)
        return any(key in offsets for offsets in self.pending.values())

    def delete(self, group: str, topic: str, partition: int) -> None:
        """OffsetDelete: the committed offset and any pending one go."""
        key = (group, topic, partition)
        self.committed.pop(key, None)
        for pid in list(self.pending):
            self.pending[pid].pop(key, None)
            if not self.pending[pid]:
                del self.pending[pid]

    def delete_group(self, group: str) -> None:
        self.committed = {k: v for k, v in self.committed.items() if k[0] != group}
        for pid in list(self.pending):
            self.pending[pid] = {k: v for k, v in self.pending[pid].items() if k[0] != group}
            if not self.pending[pid]:
                del self.pending[pid]

    def fetch(self, group: str, topic: str, partition: int) -> OffsetRecord | None:
        return self.committed.get((group, topic, partition))
