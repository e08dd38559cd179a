"""Partition placement: balanced across zones first, then nodes."""

from __future__ import annotations

from collections import Counter

import pytest

from zonegate.metastore.models import NodeRecord
from zonegate.router.placement import place

pytestmark = pytest.mark.unit


def _nodes(spec: dict[int, str]) -> list[NodeRecord]:
    return [NodeRecord(n, z, "h", 1, "h", 2) for n, z in spec.items()]


def test_balanced_across_zones_then_nodes() -> None:
    live = _nodes({1: "a", 2: "a", 3: "b", 4: "c"})
    leaders = place(12, live, [])
    by_zone = Counter({1: "a", 2: "a", 3: "b", 4: "c"}[n] for n in leaders)
    assert by_zone == {"a": 4, "b": 4, "c": 4}
    assert Counter(leaders)[1] == Counter(leaders)[2] == 2


def test_accounts_for_existing_leaders() -> None:
    live = _nodes({1: "a", 2: "b"})
    assert place(2, live, [1, 1, 1]) == [2, 2]


def test_no_live_node_is_an_error() -> None:
    with pytest.raises(ValueError):
        place(1, [], [])
