"""Rendezvous (highest random weight) hashing of partitions onto a zone's live nodes.

Stable (same inputs, same node on every node of the cluster), even, and when a
node comes or goes only the partitions it gains or loses move.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def _weight(key: bytes, node_id: int) -> int:
    digest = hashlib.blake2b(key + node_id.to_bytes(8, "big", signed=True), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def choose_node(topic: str, partition: int, node_ids: Sequence[int]) -> int:
    if not node_ids:
        raise ValueError("no nodes to choose from")
    if len(node_ids) == 1:  # one node in the zone (a node per zone): nothing to hash
        return node_ids[0]
    key = f"{topic}\x00{partition}".encode()
    return max(node_ids, key=lambda n: (_weight(key, n), n))
