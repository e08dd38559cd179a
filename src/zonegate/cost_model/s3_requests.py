"""How many S3 requests of each purpose a node makes for a given traffic: the storage core's
request model, shared by the what-if model (`whatif`) and benchmarks/storage.py (which
checks it against the usage records of a measured run).

Pure functions; the purposes are the usage records' (runtime/io_class.py). Each
formula follows what the node does (docs/cost-model.md, "S3 requests"):

- `wal`: a node seals a WAL object at the seal size or age; with group commit
  (the default) also as soon as no upload is in flight, so one object per
  upload cycle at most, and with producers whose in-flight window is full, one
  per half window (`WalSealing`);
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


@dataclass(frozen=True)
class WalSealing:
    """What sets how many WAL objects a node seals: its writer's rule
    (wal_s3/wal_writer.py) and how its producers send.

    The writer seals an object at `seal_bytes`, at `seal_age_s` after its first
    batch, and with group commit (`--wal-seal-when-idle`, on by default) as soon
    as no upload is in flight: when an upload finishes with data waiting, or at
    the first append after one finished with none. So under group commit one
    object covers one upload cycle (`put_s`: the PUT, plus sealing and encoding).

    `window_requests` describes producers that send as fast as they are
    acknowledged (a benchmark's, or any producer whose `max.in.flight` window is
    full): the produce requests they keep unacknowledged at the node, summed over
    producers (librdkafka: 5 per connection when idempotent). Their requests
    wait in the writer, so the object size is set by that window, not by time:
    an object's acknowledgements release requests that arrive while the next
    object uploads, so two consecutive objects together hold the window, and an
    object holds half of it on average (all of it when it is one request).
    `None`: producers send at their own pace (the what-if model's workload).
    """

    seal_bytes: float
    seal_age_s: float
    group_commit: bool = True
    put_s: float = 0.1
    request_bytes: float = 16_384
    window_requests: float | None = None

    def __post_init__(self) -> None:
        for name in ("seal_bytes", "seal_age_s", "put_s", "request_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name):g}")
        if self.window_requests is not None and self.window_requests < 1:
            raise ValueError(f"window_requests must be at least 1, got {self.window_requests:g}")


def node_wal_objects_per_second(bytes_s: float, s: WalSealing) -> float:
    """WAL objects one node seals per second while `bytes_s` arrive steadily in produce
    requests of `s.request_bytes`, never fewer than the size seals alone:

    - an object holds at least one request: at most `q` = bytes_s / request_bytes;
    - sealed by age (no group commit, or an upload slower than the age): an object
      opens at the first request after the last seal (1/q later on average, for
      Poisson arrivals) and is sealed `seal_age_s` after: 1 / (seal_age_s + 1/q);
    - with group commit, producers at their own pace: an upload cycle `c` =
      put_s is followed at once by the next seal if a request arrived meanwhile
      (probability 1 - e^(-qc)), else by the wait for the next request (1/q):
      1 / (c + e^(-qc)/q), which is 1/c at high rates and q at low ones;
    - producers with a full window: 2q / window (q / window without group commit,
      where the whole window waits for the age);
    - size: at least bytes_s / seal_bytes.
    """
    if bytes_s <= 0:
        return 0.0
    q = bytes_s / s.request_bytes
    k = s.window_requests
    age_sealed = 1.0 / (s.seal_age_s + 1.0 / q)
    if not s.group_commit:
        rate = min(age_sealed, q / k if k is not None else math.inf)
    elif k is not None:
        rate = q / max(1.0, k / 2)
    elif s.put_s >= s.seal_age_s:
        rate = age_sealed  # the age seals while uploads are in flight, so never idle
    else:
        rate = 1.0 / (s.put_s + math.exp(-q * s.put_s) / q)
    return max(bytes_s / s.seal_bytes, rate)


def wal_objects(nbytes: float, seconds: float, *, nodes: int, sealing: WalSealing) -> float:
    """WAL objects sealed while `nbytes` arrive steadily over `seconds`, spread evenly
    over `nodes` nodes."""
    if nbytes <= 0 or seconds <= 0:
        return 0.0
    return nodes * seconds * node_wal_objects_per_second(nbytes / seconds / nodes, sealing)


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
