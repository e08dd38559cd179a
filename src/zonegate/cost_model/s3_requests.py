"""How many S3 requests of each purpose a node makes for a given traffic: the storage core's
request model, shared by the what-if model (`whatif`) and benchmarks/storage.py (which
checks it against the usage records of a measured run).

Pure functions; the purposes are the usage records' (runtime/io_class.py). Each
formula follows what the node does (docs/cost-model.md, "S3 requests"):

- `wal`: a node seals a WAL object at the seal size or age; with group commit
  (the default) also as soon as the previous upload is done, so under steady
  traffic one object per upload time;
- `compaction` and reads of WAL ranges (`tail_read`, catch-up before
  compaction): a partition's range is one ranged GET per WAL object holding
  some of its batches (the producer's batches of a partition land in at most
  one object each); a partition's data becomes stream objects of at most
  `stream_object_bytes`, one PUT each;
- `catch_up_read` of stream objects: one GET per readahead (16 MiB) of a
  partition read cold through the block cache;
- `gc`: per pass, one LIST per 1000 keys of each prefix listed (at least one),
  and one DeleteObjects per 1000 keys deleted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from zonegate.cost_model.prices import ObjectStoragePrices

READAHEAD_BYTES = 16 << 20  # storage/block_cache.py: one GET per readahead of a cold reader
KEYS_PER_REQUEST = 1000  # LIST pages and DeleteObjects batches


@dataclass
class Requests:
    """S3 requests of one purpose (counts may be fractional: rates over a period)."""

    puts: float = 0.0
    gets: float = 0.0
    lists: float = 0.0
    deletes: float = 0.0

    def add(self, other: Requests) -> Requests:
        return Requests(
            self.puts + other.puts,
            self.gets + other.gets,
            self.lists + other.lists,
            self.deletes + other.deletes,
        )

    def usd(self, s3: ObjectStoragePrices) -> float:
        """The requests' charges (LIST in the PUT class; per-GiB charges are not here)."""
        return (
            (self.puts + self.lists) * s3.put_per_1000
            + self.gets * s3.get_per_1000
            + self.deletes * s3.delete_per_1000
        ) / 1000


@dataclass
class ByPurpose:
    """Requests by purpose, as the usage records split them."""

    purposes: dict[str, Requests] = field(default_factory=dict)

    def add(self, purpose: str, r: Requests) -> None:
        self.purposes[purpose] = self.purposes.get(purpose, Requests()).add(r)

    def usd(self, s3: ObjectStoragePrices) -> float:
        return sum(r.usd(s3) for r in self.purposes.values())


def wal_objects(
    nbytes: float,
    seconds: float,
    *,
    nodes: int,
    seal_bytes: float,
    seal_age_s: float,
    upload_s: float | None = None,
) -> float:
    """WAL objects sealed while `nbytes` arrive steadily over `seconds` at `nodes` nodes.

    Each node seals at `seal_bytes` or after `seal_age_s`, whichever comes first; with
    group commit (`upload_s`, the time one upload takes) it seals as soon as the
    previous upload is done, so an object every min(age, upload time).
    """
    if nbytes <= 0 or seconds <= 0:
        return 0.0
    every_s = seal_age_s if upload_s is None else min(seal_age_s, upload_s)
    per_node_bytes_s = nbytes / seconds / nodes
    return nodes * seconds * max(per_node_bytes_s / seal_bytes, 1.0 / every_s)


def range_gets(partition_bytes: float, batch_bytes: float, objects: float) -> float:
    """GETs reading one partition's range out of `objects` WAL objects: one per object
    holding some of its batches, at most one object per batch."""
    if partition_bytes <= 0:
        return 0.0
    return min(objects, math.ceil(partition_bytes / batch_bytes))


def stream_object_puts(partition_bytes: float, stream_object_bytes: float) -> float:
    """Stream objects compaction writes for one partition's data."""
    return math.ceil(partition_bytes / stream_object_bytes) if partition_bytes > 0 else 0.0


def stream_reads(partition_bytes: float) -> float:
    """GETs of a cold catch-up read of one partition's stream objects (readahead)."""
    return math.ceil(partition_bytes / READAHEAD_BYTES) if partition_bytes > 0 else 0.0


def gc_pass(listed: dict[str, float], deleted: float) -> Requests:
    """One GC pass: LISTs of each prefix (`listed`: keys under it), DeleteObjects of
    `deleted` keys."""
    lists = sum(max(1.0, math.ceil(n / KEYS_PER_REQUEST)) for n in listed.values())
    return Requests(lists=lists, deletes=math.ceil(deleted / KEYS_PER_REQUEST))
