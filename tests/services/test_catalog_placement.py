"""The catalog places a new topic's partitions from the leaders it keeps counted: the
same counts as counting every partition, kept through creates, growth and deletes."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Mapping
from pathlib import Path

import pytest

from zonegate.metastore.api import open_metastore
from zonegate.metastore.models import NodeRecord
from zonegate.router.placement import place, place_counted
from zonegate.services.catalog import Catalog

pytestmark = pytest.mark.unit

_LIVE = [NodeRecord(1, "a", "h", 1, "h", 2), NodeRecord(2, "a", "h", 3, "h", 4)]


def test_place_counted_is_place_over_the_counts() -> None:
    leaders = [1, 1, 1, 2, 9]  # 9: a node no longer live
    assert place_counted(5, _LIVE, Counter(leaders)) == place(5, _LIVE, leaders)
    assert place_counted(3, _LIVE, {}) == [1, 2, 1]


def test_counts_follow_creates_growth_and_deletes(tmp_path: Path) -> None:
    seen: list[dict[int, int]] = []

    def placer(n: int, counts: Mapping[int, int]) -> list[int]:
        seen.append(dict(counts))
        return place_counted(n, _LIVE, counts)

    async def run() -> None:
        meta = open_metastore(f"sqlite:///{tmp_path / 'meta.db'}")
        catalog = Catalog(meta, placer, node_id=1)
        await catalog.load()

        def counted() -> dict[int, int]:
            return dict(Counter(p.leader_node for p in catalog.partitions()))

        async def placed_from_the_counts(op: Awaitable[object]) -> None:
            before = counted()
            await op
            assert {k: v for k, v in seen[-1].items() if v} == before

        await placed_from_the_counts(catalog.create("a", 3, {}))
        await placed_from_the_counts(catalog.create("b", 4, {}))
        await placed_from_the_counts(catalog.add_partitions("b", 6))
        await catalog.delete("a")
        await placed_from_the_counts(catalog.create("c", 1, {}))
        await catalog.refresh(force=True)  # a reload counts afresh
        await placed_from_the_counts(catalog.create("d", 2, {}))
        assert counted() == {1: 5, 2: 4}
        await meta.close()

    asyncio.run(run())
