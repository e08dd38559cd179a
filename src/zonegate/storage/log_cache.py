"""Recently written or read WAL objects kept whole in memory, bounded by bytes.

A tail consumer reads what producers wrote a moment ago; this node usually
wrote that object itself, so the fetch is served with no object-store GET.
"""

from __future__ import annotations

from collections import OrderedDict


class LogCache:
    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._objects: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def put(self, key: str, data: bytes) -> None:
        if len(data) > self._max:
            return
        old = self._objects.pop(key, None)
        if old is not None:
            self._bytes -= len(old)
        self._objects[key] = data
        self._bytes += len(data)
        while self._bytes > self._max:
            _, evicted = self._objects.popitem(last=False)
            self._bytes -= len(evicted)

    def get(self, key: str) -> bytes | None:
        data = self._objects.get(key)
        if data is None:
            self.misses += 1
            return None
        self._objects.move_to_end(key)
        self.hits += 1
        return data

    @property
    def size_bytes(self) -> int:
        return self._bytes
