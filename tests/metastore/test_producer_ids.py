"""ProducerIds' contract: ids never handed out twice, cluster-wide; every backend runs it."""

from __future__ import annotations

import asyncio

from tests.metastore.backends import Stores


async def test_producer_ids_are_unique_and_increasing_across_connections(
    stores: Stores,
) -> None:
    a, b = stores.open(), stores.open()
    ids = [await a.allocate_producer_id(), await b.allocate_producer_id()]
    ids += [await a.allocate_producer_id(), await b.allocate_producer_id()]
    assert ids[0] >= 0 and all(x < y for x, y in zip(ids, ids[1:], strict=False)), ids

    # Nodes asking at once each get their own.
    racing = await asyncio.gather(*(s.allocate_producer_id() for s in [a, b] * 10))
    assert len(set(racing)) == 20 and min(racing) > max(ids), racing

    # A restarted cluster goes on from where it was.
    await stores.close_all()
    assert await stores.open().allocate_producer_id() > max(racing)


async def test_blocks_of_ids_never_overlap_single_ids(stores: Stores) -> None:
    a, b = stores.open(), stores.open()
    first = await a.allocate_producer_ids(1000)
    assert first >= 0
    single = await b.allocate_producer_id()
    assert single >= first + 1000, "after the whole block"
    blocks = await asyncio.gather(*(s.allocate_producer_ids(1000) for s in [a, b] * 5))
    ranges = sorted((x, x + 1000) for x in [first, *blocks])
    assert all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False)), ranges
    assert single not in {i for lo, hi in ranges for i in range(lo, hi)}
    assert await a.allocate_producer_id() >= max(hi for _, hi in ranges)
