"""Producer ids come from blocks taken ahead of need (Kafka's ProducerIdManager): the core
never waits, and is told to come back (COORDINATOR_LOAD_IN_PROGRESS) only when no block
has arrived yet."""

from __future__ import annotations

import asyncio

import pytest

from zonegate.transactions.decisions import ProducerIdsUnavailable
from zonegate.txn_coordinator.producer_ids import ProducerIdBlocks

pytestmark = pytest.mark.unit


class Counter:
    """The metadata store's producer-id counter, in blocks (its contract:
    tests/metastore/test_producer_ids.py)."""

    def __init__(self, fail: int = 0) -> None:
        self.last = 999
        self.calls = 0
        self.fail = fail

    async def allocate(self, count: int) -> int:
        self.calls += 1
        if self.fail:
            self.fail -= 1
            raise OSError("store out of reach")
        self.last += count
        return self.last - count + 1


def test_ids_are_consecutive_and_the_next_block_is_fetched_ahead() -> None:
    async def main() -> None:
        counter = Counter()
        blocks = ProducerIdBlocks(counter.allocate, block_size=10)
        await blocks.ready()
        assert [blocks.next_producer_id() for _ in range(8)] == list(range(1000, 1008))
        assert counter.calls == 1
        blocks.next_producer_id()  # 90% of the block used: the next one is asked for
        await asyncio.sleep(0)
        assert counter.calls == 2
        rest = [blocks.next_producer_id() for _ in range(6)]
        assert rest == [1009, 1010, 1011, 1012, 1013, 1014], "no gap, no wait"
        await blocks.close()

    asyncio.run(main())


def test_no_id_at_hand_is_retriable_and_asks_for_a_block() -> None:
    async def main() -> None:
        counter = Counter(fail=1)
        blocks = ProducerIdBlocks(counter.allocate, block_size=10)
        with pytest.raises(ProducerIdsUnavailable):
            blocks.next_producer_id()
        await asyncio.sleep(0)  # the fetch runs, and fails: the store is out of reach
        with pytest.raises(ProducerIdsUnavailable):
            blocks.next_producer_id()
        await asyncio.sleep(0)  # asked again at the next need, and served
        assert blocks.next_producer_id() == 1000
        assert counter.calls == 2
        await blocks.close()

    asyncio.run(main())
