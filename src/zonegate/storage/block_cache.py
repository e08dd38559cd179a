"""The block cache: 1 MiB aligned blocks of stream objects, per node, LRU, bounded by bytes.

Stream objects never change once written (every upload has a key of its own),
so a block, once read, is valid for as long as it is kept. A catch-up reader
of a partition reads its stream objects front to back; the reader
(storage/reader.py) GETs, on a miss, from the first block it lacks to
`READAHEAD_BYTES` past the last block it needs, in one ranged GET, and puts
every block of it here, so the next Fetches of that reader are hits. The last
block of an object may be short: the object ends there.
"""

from __future__ import annotations

from collections import OrderedDict

BLOCK_BYTES = 1 << 20
READAHEAD_BYTES = 8 << 20
DEFAULT_BLOCK_CACHE_BYTES = 256 << 20


class BlockCache:
    def __init__(self, max_bytes: int, block_bytes: int = BLOCK_BYTES) -> None:
        if block_bytes <= 0:
            raise ValueError(f"block_bytes must be positive, got {block_bytes}")
        self.max_bytes = max(max_bytes, 0)
        self.block_bytes = block_bytes
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: str, block: int) -> bytes | None:
        """Block number `block` of object `key` (its bytes from block * block_bytes), or
        None; counted as a hit or a miss."""
        data = self._blocks.get((key, block))
        if data is None:
            self.misses += 1
            return None
        self._blocks.move_to_end((key, block))
        self.hits += 1
        return data

    def __contains__(self, item: tuple[str, int]) -> bool:
        """Whether the block is held, without counting a lookup or touching its age."""
        return item in self._blocks

    def put(self, key: str, block: int, data: bytes) -> None:
        if len(data) > self.max_bytes or len(data) > self.block_bytes:
            return
        old = self._blocks.pop((key, block), None)
        if old is not None:
            self._bytes -= len(old)
        self._blocks[(key, block)] = data
        self._bytes += len(data)
        while self._bytes > self.max_bytes:
            _, evicted = self._blocks.popitem(last=False)
            self._bytes -= len(evicted)

    def put_blocks(self, key: str, blocks: dict[int, bytes]) -> None:
        for number, block in blocks.items():
            self.put(key, number, block)

    def clear(self) -> None:
        self._blocks.clear()
        self._bytes = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._blocks)


def blocks_of(start: int, data: bytes, block_bytes: int = BLOCK_BYTES) -> dict[int, bytes]:
    """`data`, an object's bytes from `start` (a block boundary), as blocks by number."""
    if start % block_bytes:
        raise ValueError(f"a range of blocks starts at a block boundary, not at {start}")
    first = start // block_bytes
    return {
        first + i: data[i * block_bytes : (i + 1) * block_bytes]
        for i in range(-(-len(data) // block_bytes))
    }
