"""Prometheus metrics of one node, read from its own counters at scrape time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from zonegate.broker.txn_metrics import txn_metrics
from zonegate.proxy.registry import REGISTRY
from zonegate.runtime.histogram import Histogram
from zonegate.runtime.io_class import IO_CLASSES

if TYPE_CHECKING:
    from zonegate.broker.node import Node

Metric = CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily
_LABELS = ["node", "node_zone", "kind", "client_zone", "peer_zone", "leader_zone", "topic"]


class NodeCollector(Collector):
    def __init__(self, node: Node) -> None:
        self._node = node

    def collect(self) -> Iterator[Metric]:
        node = self._node
        acc = node.accounting
        bytes_in = CounterMetricFamily(
            "zonegate_traffic_received_bytes", "Bytes this node received", labels=_LABELS
        )
        bytes_out = CounterMetricFamily(
            "zonegate_traffic_sent_bytes", "Bytes this node sent", labels=_LABELS
        )
        requests = CounterMetricFamily(
            "zonegate_traffic_requests", "Requests this node served or sent", labels=_LABELS
        )
        merged: dict[tuple[str, str, str, str, str, str, str], list[int]] = {}
        for k, c in list(acc.totals.items()):
            labels = (
                str(acc.node_id),
                acc.node_zone,
                k.kind,
                k.client_zone,
                k.peer_zone,
                k.leader_zone,
                k.topic,
            )
            row = merged.setdefault(labels, [0, 0, 0])
            row[0] += c.bytes_in
            row[1] += c.bytes_out
            row[2] += c.requests
        for labels, (i, o, r) in merged.items():
            bytes_in.add_metric(list(labels), i)
            bytes_out.add_metric(list(labels), o)
            requests.add_metric(list(labels), r)
        yield bytes_in
        yield bytes_out
        yield requests
        cross = CounterMetricFamily(
            "zonegate_cross_zone_bytes", "Bytes sent or received across zones", labels=["node"]
        )
        cross.add_metric([str(acc.node_id)], acc.cross_zone_bytes())
        yield cross
        s3 = node.store.stats()
        store = CounterMetricFamily(
            "zonegate_object_store_requests", "Object store requests", labels=["node", "op"]
        )
        for op, n in (
            ("put", s3.put_requests),
            ("get", s3.get_requests),
            ("other", s3.other_requests),
        ):
            store.add_metric([str(acc.node_id), op], n)
        yield store
        cache = GaugeMetricFamily("zonegate_log_cache_bytes", "Log cache size", labels=["node"])
        cache.add_metric([str(acc.node_id)], node.log_cache.size_bytes)
        yield cache
        hits = CounterMetricFamily(
            "zonegate_log_cache_lookups", "Log cache lookups", labels=["node", "result"]
        )
        hits.add_metric([str(acc.node_id), "hit"], node.log_cache.hits)
        hits.add_metric([str(acc.node_id), "miss"], node.log_cache.misses)
        yield hits
        yield from _read_caches_and_purposes(node, str(acc.node_id))
        per_fetch = node.reader.gets_per_fetch
        gets = HistogramMetricFamily(
            "zonegate_fetch_object_gets",
            "Object-store GETs each read pass of a Fetch took (bounded per pass)",
            labels=["node"],
        )
        cumulative = 0
        buckets = []
        for bound, count in zip(per_fetch.BUCKETS, per_fetch.counts, strict=False):
            cumulative += count
            buckets.append((str(bound), cumulative))
        buckets.append(("+Inf", cumulative + per_fetch.counts[-1]))
        gets.add_metric([str(acc.node_id)], buckets, per_fetch.total)
        yield gets
        yield from _storage_metrics(node, str(acc.node_id))
        yield from _operations(node, str(acc.node_id))
        yield from _qos_metrics(node, str(acc.node_id))
        yield from txn_metrics(
            node.txn_coordinator,
            node.local_leader.lso_lags(),
            node.topic_partition,
            str(acc.node_id),
            node.clock.wall_ms(),
        )


def _read_caches_and_purposes(node: Node, me: str) -> Iterator[Metric]:
    """The block cache (docs/storage.md, "Caches and readahead"), and the object store's
    GETs and PUTs by purpose (runtime/io_class.py)."""
    blocks = node.block_cache
    size = GaugeMetricFamily(
        "zonegate_block_cache_bytes", "Block cache size (stream objects' blocks)", labels=["node"]
    )
    size.add_metric([me], blocks.size_bytes)
    yield size
    lookups = CounterMetricFamily(
        "zonegate_block_cache_lookups",
        "Block cache lookups of 1 MiB blocks of stream objects",
        labels=["node", "result"],
    )
    lookups.add_metric([me, "hit"], blocks.hits)
    lookups.add_metric([me, "miss"], blocks.misses)
    yield lookups
    requests = CounterMetricFamily(
        "zonegate_object_store_class_requests",
        "Object-store GETs and PUTs (attempts) by I/O class: what they were for",
        labels=["node", "op", "io_class"],
    )
    sizes = CounterMetricFamily(
        "zonegate_object_store_class_bytes",
        "Bytes of object-store GETs and PUTs by I/O class",
        labels=["node", "op", "io_class"],
    )
    for (op, io_class), counts in sorted(list(node.store.by_class.items())):
        requests.add_metric([me, op, io_class], counts.requests)
        sizes.add_metric([me, op, io_class], counts.bytes)
    yield requests
    yield sizes


def _histogram(
    name: str, doc: str, labels: list[str], rows: Iterable[tuple[list[str], Histogram]]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, h in rows:
        family.add_metric(values, h.cumulative(), h.sum)
    return family


def _api_name(api_key: object) -> str:
    """Kafka's name of an API ("Produce", "JoinGroup"), from its handler's module."""
    reg = REGISTRY.lookup(api_key) if isinstance(api_key, int) else None
    if reg is None:
        return str(api_key)
    module = reg.handler.__module__.rsplit(".", 1)[-1]
    return "".join(w.capitalize() for w in module.split("_"))


def _operations(node: Node, me: str) -> Iterator[Metric]:
    """Latencies, sizes, placement, lag, connections and errors (docs/operations.md)."""
    requests = node.server.metrics
    yield _histogram(
        "zonegate_request_latency_seconds",
        "Kafka requests from read to answered, by API",
        ["node", "api"],
        (([me, _api_name(k)], h) for k, h in list(requests.latency.by_label.items())),
    )
    stages = (
        ("wal_seal_wait", node.wal.seal_wait),
        ("put", node.wal.put_latency),
        ("leader_commit", node.produce.leader_commit),
    )
    yield _histogram(
        "zonegate_produce_stage_seconds",
        "Produce latency by stage: a WAL object's wait for its seal, its PUT, the leaders' "
        "commit of its batches",
        ["node", "stage"],
        (([me, stage], h) for stage, h in stages),
    )
    yield _histogram(
        "zonegate_object_store_latency_seconds",
        "Object-store operations, retries included, by operation",
        ["node", "op"],
        (([me, str(op)], h) for op, h in list(node.store.latency.by_label.items())),
    )
    yield _histogram(
        "zonegate_wal_object_bytes",
        "Size of each sealed WAL object",
        ["node"],
        [([me], node.wal.object_bytes)],
    )
    led = GaugeMetricFamily(
        "zonegate_partitions_led", "Partitions this node leads", labels=["node"]
    )
    mine = node.config.node_id
    led.add_metric([me], sum(1 for p in node.catalog.partitions() if p.leader_node == mine))
    yield led
    lag = GaugeMetricFamily(
        "zonegate_consumer_group_lag",
        "Records between a group's committed offset and the high watermark, for the groups "
        "this node coordinates",
        labels=["node", "group", "topic", "partition"],
    )
    for (group, topic, partition), n in list(node.group_lag.lag.items()):
        lag.add_metric([me, group, topic, str(partition)], n)
    yield lag
    conns = GaugeMetricFamily(
        "zonegate_connections", "Open Kafka client connections", labels=["node"]
    )
    conns.add_metric([me], len(node.server.connections))
    yield conns
    errors = CounterMetricFamily(
        "zonegate_errors",
        "Error codes in Kafka answers (top-level, per topic and per partition), by API",
        labels=["node", "api", "code", "error"],
    )
    for (api_key, code), n in list(requests.errors.items()):
        errors.add_metric([me, _api_name(api_key), str(code), _error_name(code)], n)
    yield errors
    ready = GaugeMetricFamily(
        "zonegate_ready", "1 while /readyz answers 200, else 0", labels=["node", "node_zone"]
    )
    ready.add_metric([me, node.config.zone], 1.0 if node.is_ready() else 0.0)
    yield ready
    fenced = CounterMetricFamily(
        "zonegate_leader_fenced_commits",
        "Partitions' index commits this node's leader made at an epoch the store had "
        "moved past (the partition moved away meanwhile): refused, answered "
        "NOT_LEADER_OR_FOLLOWER, retried by the producer at the new leader",
        labels=["node"],
    )
    fenced.add_metric([me], node.local_leader.fenced_commits)
    yield fenced
    cut = GaugeMetricFamily(
        "zonegate_node_cut_off",
        "1 while the controller holds this node cut off from the other zones' nodes "
        "(its partitions and groups led elsewhere: docs/operations.md), else 0",
        labels=["node", "node_zone"],
    )
    mine_row = node.membership.node(node.config.node_id)
    cut.add_metric([me, node.config.zone], 1.0 if mine_row and mine_row.cut_off_ms else 0.0)
    yield cut
    zones = GaugeMetricFamily(
        "zonegate_zone_live_nodes",
        "Per zone the metadata store knows, its nodes whose lease this node sees running "
        "(0 for a lost zone, whose own series vanish with it)",
        labels=["node", "zone"],
    )
    for zone, count in sorted(node.membership.live_by_zone().items()):
        zones.add_metric([me, zone], float(count))
    yield zones
    active = GaugeMetricFamily(
        "zonegate_controller_active",
        "1 on the node holding the controller lease, else 0 (Kafka's ActiveControllerCount)",
        labels=["node"],
    )
    active.add_metric([me], 1.0 if node.controller.is_active else 0.0)
    yield active


def _qos_metrics(node: Node, me: str) -> Iterator[Metric]:
    """The object-store scheduler, per lane (put, get) and I/O class (docs/qos.md)."""
    labels = ["node", "lane", "io_class"]
    granted_bytes = CounterMetricFamily(
        "zonegate_qos_granted_bytes", "Object-store bytes granted", labels=labels
    )
    granted = CounterMetricFamily(
        "zonegate_qos_granted_requests", "Object-store requests granted", labels=labels
    )
    depth = GaugeMetricFamily(
        "zonegate_qos_queue_depth", "Object-store requests waiting for their grant", labels=labels
    )
    waits = HistogramMetricFamily(
        "zonegate_qos_wait_seconds",
        "Time object-store requests waited for their grant",
        labels=labels,
    )
    for lane_name, lane in node.qos.lanes.items():
        for cls in IO_CLASSES:
            values = [me, lane_name, cls]
            st = lane.stats(cls)
            granted_bytes.add_metric(values, st.granted_bytes)
            granted.add_metric(values, st.granted_requests)
            depth.add_metric(values, lane.queue_depth(cls))
            waits.add_metric(values, st.wait.cumulative(), st.wait.sum)
    yield granted_bytes
    yield granted
    yield depth
    yield waits
    server = node.server
    memory = GaugeMetricFamily(
        "zonegate_request_memory_bytes",
        "Bytes of requests read and not yet answered (queued.max.request.bytes bounds them)",
        labels=["node", "kind"],
    )
    memory.add_metric([me, "held"], server.memory.used)
    memory.add_metric([me, "most"], server.memory.most)
    memory.add_metric([me, "capacity"], server.memory.capacity)
    yield memory
    refused = CounterMetricFamily(
        "zonegate_connections_refused",
        "Connections closed at once: max.connections or max.connections.per.ip reached",
        labels=["node"],
    )
    refused.add_metric([me], server.connections_refused)
    yield refused
    throttle = CounterMetricFamily(
        "zonegate_client_throttle_ms",
        "Throttle time given to clients over their Kafka quotas, by quota",
        labels=["node", "quota", "user", "client_id"],
    )
    for manager in (node.quotas.produce, node.quotas.fetch, node.quotas.request):
        for (user, client), ms in manager.throttle_totals().items():
            throttle.add_metric([me, manager.key, user, client], ms)
    yield throttle
    denials = CounterMetricFamily(
        "zonegate_authorizer_denials",
        "Requests the authorizer refused (ACLs), by resource type and operation",
        labels=["node", "resource_type", "operation"],
    )
    for (resource_type, operation), count in sorted(node.authorizer.denials.items()):
        denials.add_metric([me, resource_type, operation], count)
    yield denials
    acls = GaugeMetricFamily(
        "zonegate_acls", "ACLs in this node's copy (authorizer on)", labels=["node"]
    )
    acls.add_metric([me], node.authorizer.acl_count)
    yield acls


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return "unknown"


def _storage_metrics(node: Node, node_id: str) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    """Retention and object GC (docs/storage.md). GC runs on the controller only: the
    object counts are as of that node's last pass, and zero on the others."""
    jobs = node.maintenance
    gc, ret, comp = jobs.gc.stats, jobs.retention.stats, jobs.compactor.stats
    objects = GaugeMetricFamily(
        "zonegate_storage_objects",
        "Objects in the store by kind, as of the last GC pass",
        labels=["node", "kind"],
    )
    size = GaugeMetricFamily(
        "zonegate_storage_bytes",
        "Bytes in the store by kind, as of the last GC pass",
        labels=["node", "kind"],
    )
    for kind, (n, b) in sorted(gc.stored.items()):
        objects.add_metric([node_id, kind], n)
        size.add_metric([node_id, kind], b)
    yield objects
    yield size
    for name, help_text, value, family in (
        (
            "zonegate_gc_pending_objects",
            "Objects nothing names, waiting out the grace",
            gc.pending_objects,
            GaugeMetricFamily,
        ),
        (
            "zonegate_gc_pending_bytes",
            "Bytes of objects waiting out the grace",
            gc.pending_bytes,
            GaugeMetricFamily,
        ),
        (
            "zonegate_gc_deleted_objects",
            "Objects object GC deleted",
            gc.deleted_objects,
            CounterMetricFamily,
        ),
        (
            "zonegate_gc_deleted_bytes",
            "Bytes object GC deleted",
            gc.deleted_bytes,
            CounterMetricFamily,
        ),
        (
            "zonegate_gc_deleted_usage_objects",
            "Usage records deleted past their retention",
            gc.deleted_usage_objects,
            CounterMetricFamily,
        ),
        (
            "zonegate_compaction_backlog_bytes",
            "Bytes of the partitions this node leads still in WAL objects (last pass)",
            comp.backlog_bytes,
            GaugeMetricFamily,
        ),
        (
            "zonegate_compaction_oldest_seconds",
            "Age of the oldest data of a partition this node leads still in a WAL object",
            comp.oldest_ms / 1000,
            GaugeMetricFamily,
        ),
        (
            "zonegate_compaction_passes",
            "Compaction passes finished (the backlog figures are as of the last)",
            comp.passes,
            CounterMetricFamily,
        ),
        (
            "zonegate_compaction_bytes",
            "Bytes rewritten from WAL objects into stream objects",
            comp.bytes_compacted,
            CounterMetricFamily,
        ),
        (
            "zonegate_compaction_objects",
            "Stream objects written and swapped in",
            comp.objects_written,
            CounterMetricFamily,
        ),
        (
            "zonegate_compaction_merged_objects",
            "Small stream objects of a partition written again into a later one (size tiers)",
            comp.objects_merged,
            CounterMetricFamily,
        ),
        (
            "zonegate_compaction_refused_swaps",
            "Rewrites wasted: the range changed or the leader moved before the swap",
            comp.swaps_refused,
            CounterMetricFamily,
        ),
        (
            "zonegate_compaction_busy_seconds",
            "Wall time spent rewriting (reads, build, upload, swap)",
            comp.seconds_busy,
            CounterMetricFamily,
        ),
        (
            "zonegate_cleaning_runs",
            "Key-based cleanings of compacted partitions swapped in",
            jobs.compactor.cleaning.cleanings,
            CounterMetricFamily,
        ),
        (
            "zonegate_cleaning_read_bytes",
            "Bytes of batches key-based cleaning read and rewrote",
            jobs.compactor.cleaning.bytes_read,
            CounterMetricFamily,
        ),
        (
            "zonegate_cleaning_written_bytes",
            "Bytes of cleaned stream objects written",
            jobs.compactor.cleaning.bytes_written,
            CounterMetricFamily,
        ),
        (
            "zonegate_retention_deleted_segments",
            "Segments retention dropped",
            ret.segments_deleted,
            CounterMetricFamily,
        ),
        (
            "zonegate_retention_deleted_bytes",
            "Bytes of batches retention dropped",
            ret.bytes_deleted,
            CounterMetricFamily,
        ),
        (
            "zonegate_retention_split_objects",
            "Stream objects at a partition's head split by segment once retention cut into them",
            jobs.splitter.stats.objects_split,
            CounterMetricFamily,
        ),
        (
            "zonegate_retention_split_bytes",
            "Bytes rewritten splitting stream objects at partitions' heads",
            jobs.splitter.stats.bytes_rewritten,
            CounterMetricFamily,
        ),
    ):
        metric = family(name, help_text, labels=["node"])
        metric.add_metric([node_id], value)
        yield metric


def node_registry(node: Node) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(node))
    return registry
