"""Which nodes are cut off from the other zones' nodes, judged from what every node reports.

A zone whose nodes still reach the metadata store and the object store but no
longer the other zones' nodes keeps renewing its leases, so a lease alone never
moves the partitions it leads, and every partition led across the cut stalls
for as long as the cut lasts. So each node calls every other live node's leader
RPC (broker/peer_probes.py) and writes, with each lease renewal, the peers that
have not answered it for a while (`NodeRecord.unreached`). From those rows, the
same for every reader of the store, `cut_off_now` names the live nodes that

- more than half of the other zones' live nodes cannot reach, and
- that cannot reach more than half of them either (a node only slow to answer,
  its serving loop busy, still reaches the others from its lease keeper's
  thread, and keeps its partitions),

and names none unless the nodes left span more than half of the zones with a
live node: a majority side must exist to move partitions to (a cluster split
in two halves moves nothing, as before; commits stay fenced by epoch whatever
is decided).

`CutOffs` adds hysteresis for the controller (broker/controller.py): a node is
held cut off only once it was found so continuously for `hold_ms`, and let go
only once it was found reachable continuously for `release_ms`, so a flapping
link does not move partitions back and forth. Pure, so every case is a unit
test with explicit times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zonegate.metastore.models import NodeRecord


def cut_off_now(nodes: Sequence[NodeRecord], now_ms: int) -> set[int]:
    """The live nodes cut off from the other zones' nodes as the rows say now (module doc)."""
    live = [n for n in nodes if n.live(now_ms)]
    cut = set()
    for n in live:
        others = [p for p in live if p.zone != n.zone]
        if not others:
            continue
        not_reaching_it = sum(1 for p in others if n.node_id in p.unreached)
        not_reached = sum(1 for p in others if p.node_id in n.unreached)
        if 2 * not_reaching_it > len(others) and 2 * not_reached > len(others):
            cut.add(n.node_id)
    zones = {n.zone for n in live}
    left = {n.zone for n in live if n.node_id not in cut}
    return cut if 2 * len(left) > len(zones) else set()


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the controller writes: nodes to hold cut off from now, nodes to let go."""

    cut_off: frozenset[int]
    released: frozenset[int]


class CutOffs:
    """The controller's memory of when each node was first found cut off, or reachable
    again (module doc). A new controller starts with none: it waits the holds again."""

    def __init__(self, hold_ms: int, release_ms: int) -> None:
        self.hold_ms = hold_ms
        self.release_ms = release_ms
        self._cut_since: dict[int, int] = {}
        self._back_since: dict[int, int] = {}

    def judge(self, nodes: Sequence[NodeRecord], now_ms: int) -> Judgement:
        """Which nodes to hold cut off and which to let go, given the rows (their
        `cut_off_ms` is what is held now) and the time."""
        now_cut = cut_off_now(nodes, now_ms)
        held = {n.node_id for n in nodes if n.cut_off_ms > 0}
        self._cut_since = {n: self._cut_since.get(n, now_ms) for n in now_cut}
        self._back_since = {n: self._back_since.get(n, now_ms) for n in held - now_cut}
        cut = {n for n in now_cut - held if now_ms - self._cut_since[n] >= self.hold_ms}
        back = {n for n, since in self._back_since.items() if now_ms - since >= self.release_ms}
        return Judgement(frozenset(cut), frozenset(back))
