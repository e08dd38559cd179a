"""The catalog parses each topic's produce rules when topics or defaults change, so the
write path reads typed rules and never a config string."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from zonegate.metastore.api import open_metastore
from zonegate.services.catalog import Catalog

pytestmark = pytest.mark.unit


def _run(tmp: Path, body: Callable[[Catalog, Catalog], Awaitable[None]]) -> None:
    """`body` with two nodes' catalogs over one metadata store."""

    async def main() -> None:
        meta = open_metastore(f"sqlite:///{tmp / 'meta.db'}")
        try:
            here = Catalog(meta, lambda n, _: [1] * n, node_id=1)
            there = Catalog(meta, lambda n, _: [1] * n, node_id=2)
            await here.load()
            await there.load()
            await body(here, there)
        finally:
            await meta.close()

    asyncio.run(main())


def test_rules_follow_topic_configs_and_defaults(tmp_path: Path) -> None:
    async def body(here: Catalog, there: Catalog) -> None:
        t = await here.create("t", 1, {"cleanup.policy": "compact"})
        assert here.rules(t).produce.keys_required and here.rules(t).produce.codec is None

        t = await here.alter_configs(
            "t", {"compression.type": "lz4"}, replace=False, validate_only=False
        )
        assert (here.rules(t).produce.keys_required, here.rules(t).produce.codec) == (True, 3)

        await here.alter_defaults(
            "", {"message.max.bytes": "2000"}, replace=False, validate_only=False
        )
        assert here.rules(t).produce.max_message_bytes == 2000

        # Another node learns of all of it on its next refresh.
        assert await there.refresh()
        seen = there.get("t")
        assert seen is not None
        assert there.rules(seen) == here.rules(t)

        # This node's own default wins over the cluster's, on this node only.
        await here.alter_defaults(
            "1", {"log.message.timestamp.type": "LogAppendTime"}, replace=False, validate_only=False
        )
        assert here.rules(t).produce.log_append_time
        await there.refresh()
        assert not there.rules(seen).produce.log_append_time

        # A deleted topic's rules are still answered for a caller holding it.
        await here.delete("t")
        assert here.rules(t).produce.codec == 3

    _run(tmp_path, body)

