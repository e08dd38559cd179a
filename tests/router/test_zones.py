"""Zone resolution order and rendezvous hashing, with no network."""

from __future__ import annotations

from collections import Counter

import pytest

from zonegate.router.rendezvous import choose_node
from zonegate.router.zones import ZoneResolver, parse_cidr_map, zone_from_client_id

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "client_id,zone",
    [
        ("zonegate_az=us-east-1a", "us-east-1a"),
        ("myapp,automq_az=b", "b"),
        ("ck-ws_az=c", "c"),
        ("app warpstream_az=z1", "z1"),
        ("zone=eu-west-1b", "eu-west-1b"),
        ("my_zone=x", None),  # not a tag: part of another word
        ("plain-client", None),
        (None, None),
    ],
)
def test_zone_tags(client_id: str | None, zone: str | None) -> None:
    assert zone_from_client_id(client_id) == zone


def test_resolution_order_tag_then_cidr_then_node() -> None:
    r = ZoneResolver.from_map("node-zone", parse_cidr_map("10.0.0.0/8=wide,10.1.0.0/16=narrow"))
    assert r.resolve("x,zonegate_az=tagged", "10.1.2.3") == "tagged"
    assert r.resolve("x", "10.1.2.3") == "narrow"  # most specific CIDR wins
    assert r.resolve("x", "10.9.9.9") == "wide"
    assert r.resolve("x", "192.168.1.1") == "node-zone"
    assert r.resolve(None, "::1") == "node-zone"


def test_bad_zone_map_names_the_item() -> None:
    with pytest.raises(ValueError, match="nonsense"):
        parse_cidr_map("nonsense")
    with pytest.raises(ValueError, match="10.0.0.0/99"):
        ZoneResolver.from_map("z", {"10.0.0.0/99": "a"})


def test_rendezvous_is_even_stable_and_moves_little() -> None:
    nodes = [1, 2, 3, 4]
    before = {(t, p): choose_node(t, p, nodes) for t in ("a", "b") for p in range(500)}
    counts = Counter(before.values())
    assert min(counts.values()) > 200 and max(counts.values()) < 300
    after = {k: choose_node(k[0], k[1], [1, 2, 3]) for k in before}
    moved = [k for k in before if before[k] != after[k]]
    # Only the partitions of the node that left move, and they spread over the rest.
    assert all(before[k] == 4 for k in moved)
    assert len(moved) == counts[4]
    assert before == {k: choose_node(k[0], k[1], [4, 3, 2, 1]) for k in before}
