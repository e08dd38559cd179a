"""Where partitions lead: balanced across zones first, then across the nodes of a zone.

Pure functions, so the controller's choices are unit-tested without a cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from zonegate.metastore.models import NodeRecord


def place(count: int, live: Sequence[NodeRecord], current_leaders: Iterable[int]) -> list[int]:
    """Leaders for `count` new partitions given the leaders already placed."""
    return place_counted(count, live, Counter(current_leaders))


def place_counted(
    count: int, live: Sequence[NodeRecord], leaders_per_node: Mapping[int, int]
) -> list[int]:
    """`place`, given how many partitions each node leads already: what a node's catalog
    keeps counted, so creating a topic costs its own partitions, not every partition's."""
    if not live:
        raise ValueError("no live node to place partitions on")
    by_node: Counter[int] = Counter({n.node_id: leaders_per_node.get(n.node_id, 0) for n in live})
    zone_of = {n.node_id: n.zone for n in live}
    by_zone: Counter[str] = Counter({z: 0 for z in zone_of.values()})
    for node_id, c in by_node.items():
        by_zone[zone_of[node_id]] += c
    out = []
    for _ in range(count):
        zone = min(by_zone, key=lambda z: (by_zone[z], z))
        node = min((n for n in by_node if zone_of[n] == zone), key=lambda n: (by_node[n], n))
        by_node[node] += 1
        by_zone[zone] += 1
        out.append(node)
    return out
