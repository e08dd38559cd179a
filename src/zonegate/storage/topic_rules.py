"""A topic's configs as typed values: what produce, the read path and the storage jobs obey.

Kafka's equivalent is `LogConfig`, which also lives in its storage module. Only
the shapes are here; the catalog parses them from the configs in force whenever
a topic or the defaults change (`topic_rules` in services/topic_configs.py),
so no code reads a config string at use. They sit this low because both
`services/` (the validator, the read path) and `maintenance/` (retention,
compaction, cleaning), which may not import each other, take them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from zonegate.records.codecs import KAFKA_LEVELS, CompressionLevels
from zonegate.storage.cleaner import CleanerConfig


@dataclass(frozen=True, slots=True)
class ProduceRules:
    """What produce checks and changes in a topic's batches (services/log_validator.py)."""

    # max.message.bytes: the largest batch, header included (also the limit a
    # stored batch is decoded within)
    max_message_bytes: int
    log_append_time: bool  # message.timestamp.type=LogAppendTime: the node stamps batches
    # message.timestamp.before/after.max.ms: how far a CreateTime record may lie
    # behind or ahead of the node's time
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    keys_required: bool  # cleanup.policy has compact: a record without a key is refused
    codec: int | None  # compression.type as a codec id (records/rewrite.py); None: producer
    levels: CompressionLevels = KAFKA_LEVELS  # compression.{gzip,lz4,zstd}.level


class Segmenting(NamedTuple):
    """segment.ms and segment.bytes: how the leader draws a partition's segments and
    compaction cuts its chunks. A tuple, as the leader takes it."""

    segment_ms: int
    segment_bytes: int


@dataclass(frozen=True, slots=True)
class RetentionRule:
    """A topic's retention configs in force (Kafka's meanings; -1 turns a limit off)."""

    retention_ms: int
    retention_bytes: int


@dataclass(frozen=True, slots=True)
class TopicRules:
    """Everything a topic's configs decide, grouped by who obeys it."""

    produce: ProduceRules
    segmenting: Segmenting
    # None when the topic keeps everything: no `delete` in cleanup.policy, or both
    # limits off
    retention: RetentionRule | None
    cleaning: CleanerConfig | None  # a compacted topic's key-based cleaning; None if not
    # file.delete.delay.ms, when the topic or a default set at run time
    # (log.segment.delete.delay.ms) gives one: how long object GC keeps the topic's
    # objects once unreferenced. None: the node's --log-segment-delete-delay-ms.
    file_delete_delay_ms: int | None = None
