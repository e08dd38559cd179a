"""Test doubles for the object store: in memory, and with chosen PUTs held until released."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from zonegate.storage.objects import (
    DeletionUnit,
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    check_range,
)

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
    """Run one async test body; a hang fails the test instead of the session."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout_s)

    return asyncio.run(bounded())


class MemoryStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.closed = False

    async def put(self, key: str, data: bytes) -> None:
        self.objects[key] = bytes(data)

    async def put_new(self, key: str, data: bytes) -> str:
        await self.put(key, data)
        return key

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        if key in self.objects:
            return False
        self.objects[key] = bytes(data)
        return True

    async def get(self, key: str) -> bytes:
        try:
            return self.objects[key]
        except KeyError:
            raise ObjectNotFound(key) from None

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        return (await self.get(key))[start : start + length]

    async def delete_many(self, keys: Sequence[str]) -> None:
        for k in keys:
            self.objects.pop(k, None)

    async def list(self, prefix: str) -> builtins.list[ObjectInfo]:
        return sorted(
            (ObjectInfo(k, len(v)) for k, v in self.objects.items() if k.startswith(prefix)),
            key=lambda i: i.key,
        )

    def deletion_unit(self, key: str) -> DeletionUnit:
        return DeletionUnit(key)

    async def close(self) -> None:
        self.closed = True


class GatedStore:
    """Wraps a store; the PUTs numbered in `held` (0 = first PUT) wait for `release(n)`.

    Records when each PUT started and finished so tests can see concurrency
    and completion order.
    """

    def __init__(self, inner: ObjectStore, held: Sequence[int] = ()) -> None:
        self.inner = inner
        self._gates = {n: asyncio.Event() for n in held}
        self.started: list[str] = []
        self.finished: list[str] = []
        self.running = 0
        self.max_running = 0

    def release(self, n: int) -> None:
        self._gates[n].set()

    async def put(self, key: str, data: bytes) -> None:
        n = len(self.started)
        self.started.append(key)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            gate = self._gates.get(n)
            if gate is not None:
                await gate.wait()
            await self.inner.put(key, data)
            self.finished.append(key)
        finally:
            self.running -= 1

    async def put_new(self, key: str, data: bytes) -> str:
        await self.put(key, data)  # held like any PUT, and where it was asked to go
        return key

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        return await self.inner.put_if_absent(key, data)

    async def get(self, key: str) -> bytes:
        return await self.inner.get(key)

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        return await self.inner.get_range(key, start, length)

    async def delete_many(self, keys: Sequence[str]) -> None:
        await self.inner.delete_many(keys)

    async def list(self, prefix: str) -> builtins.list[ObjectInfo]:
        return await self.inner.list(prefix)

    def deletion_unit(self, key: str) -> DeletionUnit:
        return self.inner.deletion_unit(key)

    async def close(self) -> None:
        await self.inner.close()


async def spin(turns: int = 20) -> None:
    """Let other tasks run a few steps (no wall-clock sleep)."""
    for _ in range(turns):
        await asyncio.sleep(0)
