"""The catalog parses each topic's rules when topics or defaults change, so the write
path, the read path and the storage jobs read typed rules and never a config string."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from zonegate.maintenance.targets import LedPartitions, RetentionRule
from zonegate.metastore.api import open_metastore
from zonegate.metastore.models import TopicInfo
from zonegate.services.catalog import Catalog
from zonegate.services.topic_configs import InvalidConfig

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


def test_a_config_change_reaches_what_the_storage_jobs_are_told(tmp_path: Path) -> None:
    """The jobs read the catalog's parsed rules (maintenance/targets.py): a change made
    here, or by another node, is what they see on their next pass."""

    async def body(here: Catalog, there: Catalog) -> None:
        await here.create("t", 1, {"segment.ms": "60000"})
        led = LedPartitions(here, node_id=1)
        (p,) = here.partitions()
        assert led.segmenting(p.stream_id) == (60_000, 1_073_741_824)
        assert [t.cleaning for t in led.compaction_targets()] == [None]
        assert [rule for _, rule in led.retention_targets()] == [RetentionRule(604_800_000, -1)]

        await there.refresh()
        await there.alter_configs(
            "t",
            {"cleanup.policy": "compact,delete", "min.compaction.lag.ms": "5"},
            replace=False,
            validate_only=False,
        )
        await there.alter_defaults(
            "", {"log.retention.bytes": "1000"}, replace=False, validate_only=False
        )
        assert await here.refresh()
        (target,) = led.compaction_targets()
        assert target.cleaning is not None and target.cleaning.min_compaction_lag_ms == 5
        assert (target.segment_ms, target.segment_bytes) == (60_000, 1_073_741_824)
        assert [rule for _, rule in led.retention_targets()] == [RetentionRule(604_800_000, 1000)]

        # A bad value is refused and changes nothing anyone obeys.
        before = here.rules(_t(here))
        with pytest.raises(InvalidConfig):
            await here.alter_configs("t", {"segment.ms": "0"}, replace=False, validate_only=False)
        with pytest.raises(InvalidConfig):
            await here.alter_defaults(
                "", {"log.roll.ms": "soon"}, replace=False, validate_only=False
            )
        assert here.rules(_t(here)) == before
        assert led.segmenting(p.stream_id) == (60_000, 1_073_741_824)

        # This node's own default reaches its jobs, not the other node's.
        await here.alter_defaults("1", {"log.roll.ms": "1000"}, replace=False, validate_only=False)
        assert led.segmenting(p.stream_id) == (60_000, 1_073_741_824)  # the topic's own wins
        await here.alter_configs("t", {"segment.ms": None}, replace=False, validate_only=False)
        assert led.segmenting(p.stream_id) == (1000, 1_073_741_824)
        await there.refresh()
        assert LedPartitions(there, node_id=1).segmenting(p.stream_id) == (
            604_800_000,
            1_073_741_824,
        )

    _run(tmp_path, body)


def _t(catalog: Catalog) -> TopicInfo:
    t = catalog.get("t")
    assert t is not None
    return t
