"""A config change is shown by the node that acknowledged it, whatever refresh of
its catalog was under way: a refresh that read the store before the change was
written must not put the old configs back over it (the AlterConfigs-then-
DescribeConfigs race an old Go client met once in ~40 runs on a busy machine)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from zonegate.metastore.api import MetaStore, open_metastore
from zonegate.metastore.models import TopicInfo
from zonegate.services.catalog import Catalog

pytestmark = pytest.mark.unit


class _GatedStore:
    """The store, with its next read of the topics or of the defaults (`hold`: that
    method's name) held until released, after the read: the answer is the store's
    state from before the hold."""

    def __init__(self, meta: MetaStore) -> None:
        self._meta = meta
        self.hold = ""
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._meta, name)

    async def _gate(self, read: Callable[[], Awaitable[Any]]) -> Any:
        answer = await read()
        if self.hold == read.__name__:
            self.hold = ""
            self.held.set()
            await self.release.wait()
        return answer

    async def list_topics(self) -> list[TopicInfo]:
        return await self._gate(self._meta.list_topics)  # type: ignore[no-any-return]

    async def get_cluster_configs(self) -> dict[str, dict[str, str]]:
        return await self._gate(self._meta.get_cluster_configs)  # type: ignore[no-any-return]


def _run(tmp: Path, body: Callable[[Catalog, Catalog, _GatedStore], Awaitable[None]]) -> None:
    async def main() -> None:
        meta = open_metastore(f"sqlite:///{tmp / 'meta.db'}")
        try:
            gated = _GatedStore(meta)
            here = Catalog(gated, lambda n, _: [1] * n, node_id=1)
            other = Catalog(meta, lambda n, _: [1] * n, node_id=2)
            await here.load()
            await other.load()
            await body(here, other, gated)
        finally:
            await meta.close()

    asyncio.run(main())


async def _during_a_stale_refresh(
    here: Catalog, other: Catalog, gated: _GatedStore, hold: str, change: Awaitable[object]
) -> None:
    """Runs `change` on `here` while a refresh of `here` holds a read of the store
    (`hold`) taken before it, then lets that refresh finish."""
    await other.create("elsewhere", 1, {})  # moves the version: the refresh reloads
    gated.hold = hold
    refreshing = asyncio.create_task(here.refresh())
    await gated.held.wait()
    await change
    gated.release.set()
    await refreshing


def test_a_topic_config_change_survives_a_refresh_that_read_before_it(tmp_path: Path) -> None:
    async def body(here: Catalog, other: Catalog, gated: _GatedStore) -> None:
        await here.create("t", 1, {})
        change = here.alter_configs(
            "t", {"retention.ms": "1234"}, replace=False, validate_only=False
        )
        await _during_a_stale_refresh(here, other, gated, "list_topics", change)
        t = await here.lookup("t")
        assert t is not None and t.configs.get("retention.ms") == "1234"
        rules = here.rules(t).retention
        assert rules is not None and rules.retention_ms == 1234
        # The refresh read again, so it also took the other node's change.
        assert here.get("elsewhere") is not None

    _run(tmp_path, body)


def test_a_default_change_survives_a_refresh_that_read_before_it(tmp_path: Path) -> None:
    async def body(here: Catalog, other: Catalog, gated: _GatedStore) -> None:
        change = here.alter_defaults(
            "", {"log.retention.ms": "4321"}, replace=False, validate_only=False
        )
        await _during_a_stale_refresh(here, other, gated, "get_cluster_configs", change)
        assert here.defaults_at("") == {"retention.ms": "4321"}

    _run(tmp_path, body)


@pytest.mark.parametrize("by", ["name", "id"])
def test_two_lookups_of_a_topic_made_elsewhere_both_find_it(tmp_path: Path, by: str) -> None:
    """Two lookups miss the cache at once and both refresh it: the one whose refresh finds
    the cache already reloaded by the other (nothing left to reload) must still answer
    the topic. It answered None, and the README's consumer, whose Metadata requests met
    so right after `kcat -P` made the topic, saw its partition count go from 1 to 0 and
    stopped with UNKNOWN_TOPIC_OR_PARTITION."""

    async def body(here: Catalog, other: Catalog, gated: _GatedStore) -> None:
        made = await other.create("hello", 1, {})

        async def lookup() -> TopicInfo | None:
            if by == "name":
                return await here.lookup("hello")
            return await here.by_id_fresh(made.topic_id)

        gated.hold = "list_topics"
        first = asyncio.create_task(lookup())
        await gated.held.wait()  # the first has read the store, not yet applied it
        assert await lookup() is not None  # the second reloads the cache meanwhile
        gated.release.set()
        assert await first is not None

    _run(tmp_path, body)
