"""The storage jobs' pure policies and what they are told of the led partitions: no store,
no network, no clock but the numbers passed in."""

from __future__ import annotations

import uuid

import pytest

from zonegate.maintenance.gc import GcSettings, _Unit, decide, expired_usage
from zonegate.maintenance.targets import KAFKA_SEGMENTING, LedPartitions, RetentionRule
from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.services.topic_configs import topic_rules
from zonegate.storage.cleaner import CleanerConfig
from zonegate.storage.objects import ObjectInfo
from zonegate.storage.topic_rules import TopicRules

pytestmark = pytest.mark.unit

_GC = GcSettings(unreferenced_grace_ms=60_000, orphan_grace_ms=600_000)
NOW = 1_700_000_000_000


def test_gc_records_a_newly_unreferenced_unit_and_deletes_it_only_after_both_graces() -> None:
    units = {"wal/a": _Unit(None, 100, NOW - 3_600_000), "wal/b": _Unit(None, 50, NOW - 3_600_000)}
    first = decide(units, {"wal/b"}, {}, NOW, _GC)
    assert first.add == {"wal/a": (NOW, 100)} and first.due == [] and first.stale == []
    assert first.next_due_ms == NOW + 60_000  # the unreferenced grace, from now
    pending = {"wal/a": (NOW, 100)}
    assert decide(units, {"wal/b"}, pending, NOW + 59_999, _GC).due == []
    later = decide(units, {"wal/b"}, pending, NOW + 60_000, _GC)
    assert later.due == ["wal/a"] and later.add == {} and later.next_due_ms is None


def test_gc_waits_out_the_orphan_grace_from_the_upload() -> None:
    """An object just uploaded may still be committed: unreferenced long enough is not
    enough, its upload must be `orphan_grace_ms` old too."""
    units = {"wal/new": _Unit(None, 10, NOW - 1_000)}
    pending = {"wal/new": (NOW - 120_000, 10)}
    d = decide(units, set(), pending, NOW, _GC)
    assert d.due == [] and d.next_due_ms == NOW - 1_000 + 600_000


def test_gc_drops_the_rows_of_units_named_again_or_gone() -> None:
    units = {"wal/back": _Unit(None, 1, 0)}
    pending = {"wal/back": (NOW - 1, 1), "wal/gone": (NOW - 1, 1)}
    d = decide(units, {"wal/back"}, pending, NOW, _GC)
    assert sorted(d.stale) == ["wal/back", "wal/gone"] and d.due == [] and d.add == {}


def test_usage_records_expire_by_the_day_in_their_key() -> None:
    day = 86_400_000
    infos = [
        ObjectInfo("usage/date=2023-11-10/node=1/a.parquet", 1, 0),
        ObjectInfo("usage/date=2023-11-12/node=1/b.parquet", 1, 0),
        ObjectInfo("usage/other", 1, 0),
    ]
    # NOW is 2023-11-14T22:13Z: two days' retention keeps the 12th, not the 10th.
    assert expired_usage(infos, NOW, 2 * day) == ["usage/date=2023-11-10/node=1/a.parquet"]


class _Catalog:
    """A catalog of topics and their rules, as maintenance/targets.py reads it."""

    changes = 0  # never changes after it is built

    def __init__(self, *topics: TopicInfo) -> None:
        self._topics = {t.name: t for t in topics}

    def partitions(self) -> list[PartitionInfo]:
        return [p for t in self._topics.values() for p in t.partitions]

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_stream(self, stream_id: int) -> PartitionInfo | None:
        return next((p for p in self.partitions() if p.stream_id == stream_id), None)

    def rules(self, topic: TopicInfo) -> TopicRules:
        return topic_rules(topic.configs)


def _topic(name: str, leaders: list[int], first_stream: int, **configs: str) -> TopicInfo:
    tid = uuid.uuid4()
    parts = tuple(
        PartitionInfo(tid, name, i, first_stream + i, node, 0) for i, node in enumerate(leaders)
    )
    return TopicInfo(tid, name, parts, {k.replace("_", "."): v for k, v in configs.items()})


def test_jobs_are_told_of_the_partitions_this_node_leads_with_their_configs() -> None:
    catalog = _Catalog(
        _topic("plain", [1, 2], 10, segment_ms="60000", retention_ms="3600000"),
        _topic("keyed", [1], 20, cleanup_policy="compact", min_compaction_lag_ms="5"),
        _topic("both", [1], 30, cleanup_policy="compact,delete", retention_bytes="1000"),
    )
    led = LedPartitions(catalog, node_id=1)
    targets = {t.stream_id: t for t in led.compaction_targets()}
    assert sorted(targets) == [10, 20, 30]  # not 11: node 2 leads it
    assert (targets[10].segment_ms, targets[10].cleaning) == (60_000, None)
    keyed = targets[20].cleaning
    assert isinstance(keyed, CleanerConfig) and keyed.min_compaction_lag_ms == 5
    rules = {p.stream_id: rule for p, rule in led.retention_targets()}
    # "keyed" keeps everything (no `delete` in its policy).
    assert rules == {
        10: RetentionRule(3_600_000, -1),
        30: RetentionRule(604_800_000, 1000),
    }
    assert led.segmenting(10) == (60_000, 1_073_741_824)
    assert led.segmenting(999) == KAFKA_SEGMENTING  # no such partition: Kafka's defaults


def test_a_topic_with_both_retention_limits_off_is_no_retention_target() -> None:
    catalog = _Catalog(
        _topic("forever", [1], 1, retention_ms="-1", retention_bytes="-1"),
        _topic("t", [1], 2, retention_bytes="5"),
    )
    rules = {p.stream_id: rule for p, rule in LedPartitions(catalog, 1).retention_targets()}
    assert rules == {2: RetentionRule(604_800_000, 5)}


def test_gc_waits_each_topics_file_delete_delay() -> None:
    """file.delete.delay.ms per topic: a stream object waits its topic's delay, a WAL
    object (which mixes topics) the longest of any topic, the node's own for topics
    that set none."""
    catalog = _Catalog(
        _topic("quick", [1], 10, **{"file.delete.delay.ms": "1000"}),
        _topic("slow", [1], 20, **{"file.delete.delay.ms": "300000"}),
        _topic("plain", [1], 30),
    )
    delays = LedPartitions(catalog, 1).file_delete_delays(60_000)
    assert (delays.of("streams/10/x"), delays.of("streams/20/x")) == (1000, 300_000)
    assert delays.of("streams/30/x") == 60_000  # the node's own
    assert delays.of("wal/abc") == 300_000  # the longest
    assert delays.of("streams/99/x") == 300_000  # a stream no topic holds any more
    old = NOW - 3_600_000
    units = {k: _Unit(None, 1, old) for k in ("streams/10/a", "streams/30/a", "wal/a")}
    pending = {k: (NOW, 1) for k in units}
    assert decide(units, set(), pending, NOW + 1000, _GC, delays).due == ["streams/10/a"]
    assert decide(units, set(), pending, NOW + 60_000, _GC, delays).due == [
        "streams/10/a",
        "streams/30/a",
    ]
    assert len(decide(units, set(), pending, NOW + 300_000, _GC, delays).due) == 3
    # No topics: every unit waits the node's own delay.
    assert LedPartitions(_Catalog(), 1).file_delete_delays(60_000).of("wal/a") == 60_000


def test_gc_lets_a_stream_object_seen_named_go_without_the_orphan_grace() -> None:
    """A stream object has one commit (its swap): seen named once, nothing of it is pending,
    and once unreferenced it waits only the unreferenced grace; a WAL object (many
    partitions' commits) and a stream object never seen named wait the orphan grace."""
    young = NOW - 1_000
    units = {
        "streams/1/a": _Unit(None, 10, young),
        "streams/1/b": _Unit(None, 10, young),
        "wal/n/c": _Unit(None, 10, young),
    }
    pending = {k: (NOW - 60_000, 10) for k in units}
    committed = {"streams/1/a", "wal/n/c"}
    d = decide(units, set(), pending, NOW, _GC, None, committed)
    assert d.due == ["streams/1/a", "wal/n/c"]  # the caller names only stream objects
    assert decide(units, set(), pending, NOW, _GC).due == []
