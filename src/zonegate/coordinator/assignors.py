"""Server-side assignors of KIP-848 consumer groups (`group.remote.assignor`): uniform, range.

Pure functions: every member's subscribed topics (by topic id) and its current
target assignment in, the new target assignment out. They only decide who
should own what; moving partitions safely (revoke before reassigning) is the
group's reconciliation, not theirs.

- `uniform` (Kafka's default): spreads all subscribed partitions so member
  counts differ by at most one wherever subscriptions allow, and keeps every
  partition where it is unless balance needs it elsewhere (sticky), so a
  member joining or leaving moves only the partitions that must move.
- `range`: per topic, the subscribed members sorted by instance id (else
  member id) take consecutive ranges, the first ones one partition more. Members
  with the same subscription get the same partition numbers of every topic of
  equal size (co-partitioning, for joins).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

TopicId = uuid.UUID
Assignment = dict[TopicId, frozenset[int]]


@dataclass(frozen=True, slots=True)
class AssignorMember:
    member_id: str
    instance_id: str | None
    topics: frozenset[TopicId]  # subscribed topics that exist
    current: Mapping[TopicId, frozenset[int]] = field(default_factory=dict)  # last target

    @property
    def sort_key(self) -> str:
        return self.instance_id or self.member_id


Assignor = Callable[[Mapping[str, AssignorMember], Mapping[TopicId, int]], dict[str, Assignment]]


def _collect(
    owner: Mapping[tuple[TopicId, int], str], member_ids: list[str]
) -> dict[str, Assignment]:
    sets: dict[str, dict[TopicId, set[int]]] = {mid: {} for mid in member_ids}
    for (tid, p), mid in owner.items():
        sets[mid].setdefault(tid, set()).add(p)
    return {
        mid: {tid: frozenset(ps) for tid, ps in by_topic.items()} for mid, by_topic in sets.items()
    }


def uniform(
    members: Mapping[str, AssignorMember], partitions: Mapping[TopicId, int]
) -> dict[str, Assignment]:
    ids = sorted(members, key=lambda mid: members[mid].sort_key)
    eligible: dict[TopicId, list[str]] = {
        tid: [mid for mid in ids if tid in members[mid].topics] for tid in partitions
    }
    owner: dict[tuple[TopicId, int], str] = {}
    count = dict.fromkeys(ids, 0)
    # 1. Stickiness: every partition stays with its current owner if still subscribed.
    for mid in ids:
        m = members[mid]
        for tid, parts in m.current.items():
            if tid not in m.topics or tid not in partitions:
                continue
            for p in sorted(parts):
                if p < partitions[tid] and (tid, p) not in owner:
                    owner[(tid, p)] = mid
                    count[mid] += 1
    # 2. The rest to the least loaded eligible member; scarce partitions (few eligible
    #    members) first, so they are not left to whoever the common ones overloaded.
    free = [
        (tid, p)
        for tid in sorted(partitions, key=lambda t: (len(eligible[t]), str(t)))
        if eligible[tid]
        for p in range(partitions[tid])
        if (tid, p) not in owner
    ]
    for tid, p in free:
        best = min(eligible[tid], key=lambda mid: count[mid])
        owner[(tid, p)] = best
        count[best] += 1
    # 3. Balance: move a partition from a member to an eligible one holding two fewer,
    #    until none can move. Each move lowers the sum of squared counts, so this ends.
    order = sorted(owner, key=lambda tp: (str(tp[0]), tp[1]))
    moved = True
    while moved:
        moved = False
        for tp in order:
            src = owner[tp]
            dst = min(eligible[tp[0]], key=lambda mid: count[mid])
            if count[src] - count[dst] > 1:
                owner[tp] = dst
                count[src] -= 1
                count[dst] += 1
                moved = True
    return _collect(owner, ids)


def range_assignor(
    members: Mapping[str, AssignorMember], partitions: Mapping[TopicId, int]
) -> dict[str, Assignment]:
    ids = sorted(members, key=lambda mid: members[mid].sort_key)
    owner: dict[tuple[TopicId, int], str] = {}
    for tid, total in partitions.items():
        subscribers = [mid for mid in ids if tid in members[mid].topics]
        if not subscribers:
            continue
        quota, extra = divmod(total, len(subscribers))
        start = 0
        for i, mid in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            for p in range(start, start + size):
                owner[(tid, p)] = mid
            start += size
    return _collect(owner, ids)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
DEFAULT_ASSIGNOR = "uniform"
