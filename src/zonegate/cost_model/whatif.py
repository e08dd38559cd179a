"""What-if model: the monthly cost of one workload under Kafka, an S3-WAL broker and zonegate.

Pure functions of a `Workload`, a `PriceTable` and the model's `Assumptions`;
docs/cost-model.md explains every formula. Traffic is assumed steady and
clients and partition leaders spread evenly over the zones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zonegate.cost_model.breakdown import MONTH_S, CostBreakdown
from zonegate.cost_model.kafka import kafka_cost
from zonegate.cost_model.prices import GIB, MIB, ObjectStoragePrices, PriceTable
from zonegate.cost_model.s3_requests import (
    ByPurpose,
    Requests,
    WalSealing,
    gc_pass,
    node_wal_objects_per_second,
)


@dataclass(frozen=True)
class Workload:
    ingress_mib_s: float
    fanout: float = 1.0  # consumer groups each reading everything produced
    zones: int = 3
    retention_hours: float = 72.0
    partitions: int = 100
    wal_seal_bytes: int = 8 * MIB
    wal_seal_age_ms: float = 250.0
    nodes_per_zone: int = 1
    days: float = 30.0

    def __post_init__(self) -> None:
        for name in ("ingress_mib_s", "fanout", "retention_hours"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name):g}")
        for name in ("zones", "nodes_per_zone", "partitions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("wal_seal_bytes", "wal_seal_age_ms", "days"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name):g}")

    @property
    def seconds(self) -> float:
        return self.days * 86_400

    @property
    def ingress_bytes_s(self) -> float:
        return self.ingress_mib_s * MIB

    @property
    def nodes(self) -> int:
        return self.zones * self.nodes_per_zone


@dataclass(frozen=True)
class Assumptions:
    """Figures the workload does not name; defaults are the node's defaults or Kafka's."""

    kafka_rf: int = 3
    produce_batch_bytes: int = 16_384  # producer batch.size: one WAL batch summary each
    rpc_bytes_per_batch: int = 64  # Append/ReadIndex bytes per batch, request plus answer
    stream_object_bytes: int = 16 * MIB  # compaction output object size (the node's default)
    compaction_interval_s: float = 300.0  # how often a partition's WAL ranges are compacted
    gc_interval_s: float = 60.0  # object GC passes (one per cluster: the controller's)
    usage_interval_s: float = 60.0  # each node writes one usage-record object per interval
    usage_retention_days: float = 30.0
    # False (zonegate): compaction reads each partition's range out of each WAL object
    # holding its batches, one ranged GET each. True (WarpStream's agents): compaction
    # reads each WAL file once, whole.
    compaction_reads_whole_objects: bool = False
    # True (zonegate's default, --wal-seal-when-idle): a node seals a WAL object as
    # soon as no upload is in flight, so one object per upload cycle (`wal_put_s`)
    # while data keeps coming. False (WarpStream's agents): only at the size or age.
    wal_group_commit: bool = True
    # One WAL upload cycle on S3 Standard (the PUT of a few MiB, plus sealing): an
    # assumption, not a measurement; a running node shows its own as
    # zonegate_produce_stage_seconds{stage="put"} (`zonegate cost --wal-put-ms`).
    wal_put_s: float = 0.1
    # True (zonegate): every GC pass LISTs the WAL objects, the stream objects and the
    # usage records. False (WarpStream): deletions follow the metadata, no LIST.
    gc_lists_objects: bool = True


@dataclass(frozen=True)
class Scenario:
    name: str
    cost: CostBreakdown


@dataclass(frozen=True)
class S3Requests:
    puts: float
    gets: float
    put_bytes: float
    get_bytes: float
    lists: float = 0.0
    deletes: float = 0.0


def wal_sealing(w: Workload, a: Assumptions) -> WalSealing:
    """The workload's WAL sealing rule; producers at their own pace, one produce
    request per `produce_batch_bytes` batch."""
    return WalSealing(
        seal_bytes=w.wal_seal_bytes,
        seal_age_s=w.wal_seal_age_ms / 1000,
        group_commit=a.wal_group_commit,
        put_s=a.wal_put_s,
        request_bytes=a.produce_batch_bytes,
    )


def wal_objects_per_second(w: Workload, a: Assumptions | None = None) -> float:
    """Every node seals at the size or the age, and with group commit after each upload
    (s3_requests.node_wal_objects_per_second); traffic is spread evenly over nodes."""
    per_node = w.ingress_bytes_s / w.nodes
    return w.nodes * node_wal_objects_per_second(per_node, wal_sealing(w, a or Assumptions()))


def compaction_objects_per_second(w: Workload, a: Assumptions) -> float:
    """Each cycle writes every partition's new data as stream objects of bounded size."""
    if w.ingress_bytes_s == 0:
        return 0.0
    per_partition = w.ingress_bytes_s * a.compaction_interval_s / w.partitions
    per_cycle = w.partitions * math.ceil(per_partition / a.stream_object_bytes)
    return per_cycle / a.compaction_interval_s


def compaction_gets_per_second(w: Workload, a: Assumptions) -> float:
    """Compaction's reads of WAL ranges: one ranged GET per WAL object holding some of a
    partition's batches (a batch lands in one object), for every partition; or one
    GET per WAL object when compaction reads objects whole."""
    wal = wal_objects_per_second(w, a)
    if a.compaction_reads_whole_objects or w.ingress_bytes_s == 0:
        return wal
    batches_per_partition = w.ingress_bytes_s / w.partitions / a.produce_batch_bytes
    return w.partitions * min(wal, batches_per_partition)


def s3_requests_by_purpose(w: Workload, a: Assumptions, *, tail_reads_from_s3: bool) -> ByPurpose:
    """Requests over the period by the usage records' purposes (runtime/io_class.py).

    With zone routing, a node serves consumers of its zone from WAL objects other
    nodes wrote, so each node reads every other node's WAL objects once (block cache
    and readahead); without it the leader wrote them and serves tail reads from its
    log cache. GC lists the WAL objects not yet compacted, the stream objects
    retained and the usage records kept, every pass, and deletes every WAL object
    (once compacted) and every stream object (once past retention).
    """
    out = ByPurpose()
    wal_s = wal_objects_per_second(w, a)
    compacted_s = compaction_objects_per_second(w, a)
    out.add("wal", Requests(puts=wal_s * w.seconds))
    out.add(
        "compaction",
        Requests(puts=compacted_s * w.seconds, gets=compaction_gets_per_second(w, a) * w.seconds),
    )
    if tail_reads_from_s3 and w.fanout > 0:
        out.add("tail_read", Requests(gets=wal_s * (w.nodes - 1) * w.seconds))
    passes = w.seconds / a.gc_interval_s
    retention_s = w.retention_hours * 3600
    listed = {
        "wal/": wal_s * a.compaction_interval_s,
        "streams/": compacted_s * retention_s,
        "usage/": w.nodes * a.usage_retention_days * 86_400 / a.usage_interval_s,
    }
    if not a.gc_lists_objects:
        listed = {}
    per_pass = gc_pass(listed, (wal_s + compacted_s) * a.gc_interval_s)
    out.add("gc", Requests(lists=per_pass.lists * passes, deletes=per_pass.deletes * passes))
    out.add("usage_records", Requests(puts=w.nodes * w.seconds / a.usage_interval_s))
    return out


def s3_wal_requests(w: Workload, a: Assumptions, *, tail_reads_from_s3: bool) -> S3Requests:
    """All requests over the period (`s3_requests_by_purpose` summed), and the bytes:
    WAL and compaction each upload every byte once; compaction reads every byte once,
    and with zone routing every other node reads it once more."""
    by = s3_requests_by_purpose(w, a, tail_reads_from_s3=tail_reads_from_s3)
    total = Requests()
    for r in by.purposes.values():
        total = total.add(r)
    data = w.ingress_bytes_s * w.seconds
    tail_bytes = data * (w.nodes - 1) if tail_reads_from_s3 and w.fanout > 0 else 0.0
    return S3Requests(
        puts=total.puts,
        gets=total.gets,
        put_bytes=2 * data,
        get_bytes=data + tail_bytes,
        lists=total.lists,
        deletes=total.deletes,
    )


def object_storage_cost(
    req: S3Requests, stored_byte_seconds: float, s3: ObjectStoragePrices
) -> CostBreakdown:
    return CostBreakdown(
        s3_put=(req.puts + req.lists) / 1000 * s3.put_per_1000
        + req.deletes / 1000 * s3.delete_per_1000
        + req.put_bytes / GIB * s3.upload_per_gib,
        s3_get=req.gets / 1000 * s3.get_per_1000 + req.get_bytes / GIB * s3.retrieval_per_gib,
        s3_storage=stored_byte_seconds / GIB / MONTH_S * s3.storage_per_gib_month,
    )


def _retained_byte_seconds(w: Workload) -> float:
    # Steady state: retention's worth of data is held for the whole period.
    return w.ingress_bytes_s * w.retention_hours * 3600 * w.seconds


def kafka_scenario(
    w: Workload, prices: PriceTable, a: Assumptions, *, fetch_from_follower: bool
) -> CostBreakdown:
    produced = w.ingress_bytes_s * w.seconds
    return kafka_cost(
        produced,
        produced * w.fanout,
        _retained_byte_seconds(w),
        w.zones,
        prices,
        rf=a.kafka_rf,
        fetch_from_follower=fetch_from_follower,
    )


def s3_wal_scenario(
    w: Workload, prices: PriceTable, a: Assumptions, storage_class: str
) -> CostBreakdown:
    """An S3-WAL broker without zone routing: no replication, but clients still reach leaders."""
    produced = w.ingress_bytes_s * w.seconds
    remote = (w.zones - 1) / w.zones
    cross = (produced + produced * w.fanout) * remote
    s3 = object_storage_cost(
        s3_wal_requests(w, a, tail_reads_from_s3=False),
        _retained_byte_seconds(w),
        prices.object_storage(storage_class),
    )
    return CostBreakdown(
        cross_zone_transfer=cross / GIB * prices.cross_zone_per_gib,
        s3_put=s3.s3_put,
        s3_get=s3.s3_get,
        s3_storage=s3.s3_storage,
    )


def zonegate_scenario(
    w: Workload, prices: PriceTable, a: Assumptions, storage_class: str
) -> CostBreakdown:
    """Data crosses zones only through S3; batch summaries and index reads cross as RPCs."""
    batches = w.ingress_bytes_s * w.seconds / a.produce_batch_bytes
    remote = (w.zones - 1) / w.zones
    append_bytes = batches * a.rpc_bytes_per_batch * remote
    index_bytes = batches * a.rpc_bytes_per_batch * (w.zones - 1) if w.fanout > 0 else 0.0
    s3 = object_storage_cost(
        s3_wal_requests(w, a, tail_reads_from_s3=True),
        _retained_byte_seconds(w),
        prices.object_storage(storage_class),
    )
    return CostBreakdown(
        cross_zone_transfer=(append_bytes + index_bytes) / GIB * prices.cross_zone_per_gib,
        s3_put=s3.s3_put,
        s3_get=s3.s3_get,
        s3_storage=s3.s3_storage,
    )


def compare(
    w: Workload,
    prices: PriceTable,
    a: Assumptions | None = None,
    *,
    storage_class: str = "standard",
) -> list[Scenario]:
    """The four scenarios `zonegate cost` shows, over the workload's period."""
    a = a or Assumptions()
    return [
        Scenario(
            f"Kafka RF={a.kafka_rf}",
            kafka_scenario(w, prices, a, fetch_from_follower=False),
        ),
        Scenario(
            f"Kafka RF={a.kafka_rf} + FFF",
            kafka_scenario(w, prices, a, fetch_from_follower=True),
        ),
        Scenario("S3-WAL, no zone routing", s3_wal_scenario(w, prices, a, storage_class)),
        Scenario("zonegate", zonegate_scenario(w, prices, a, storage_class)),
    ]


# WarpStream's published figure: object-storage API calls under USD 40 a day at
# 140 MiB/s written with 3 consumer groups (warpstream.com/blog/warpstream-benchmarks-
# and-tco, March 2024, as quoted in issue 29; the page was not re-read here). Its
# agents, one per zone, flush a file every 250 ms or 4 MiB (no group commit);
# compaction reads files whole; deletions follow the metadata store (no LIST); each
# zone reads a file once.
WARPSTREAM_API_USD_PER_DAY = 40.0
WARPSTREAM_WORKLOAD = Workload(
    ingress_mib_s=140, fanout=3, zones=3, wal_seal_bytes=4 * MIB, wal_seal_age_ms=250, days=1
)
WARPSTREAM_ASSUMPTIONS = Assumptions(
    compaction_reads_whole_objects=True, gc_lists_objects=False, wal_group_commit=False
)


def s3_request_usd(
    w: Workload, a: Assumptions, s3: ObjectStoragePrices, *, tail_reads_from_s3: bool = True
) -> dict[str, float]:
    """USD of the requests alone (no per-GiB charges) over the period, by purpose."""
    by = s3_requests_by_purpose(w, a, tail_reads_from_s3=tail_reads_from_s3)
    return {purpose: r.usd(s3) for purpose, r in by.purposes.items()}
