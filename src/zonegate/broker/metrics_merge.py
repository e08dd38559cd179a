"""One node's /metrics from its processes' (docs/cores.md): the node process's text
with its workers' added in.

Counters and histograms add up across processes, and so do the gauges that measure
a process's own resources (connections, caches, request memory, QoS queues). Every
other gauge (partitions led, ready, the controller, lag, live nodes) says something
of the node as a whole and is the node process's alone. Pure: text in, text out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

PER_PROCESS_GAUGES = frozenset(
    {
        "zonegate_connections",
        "zonegate_log_cache_bytes",
        "zonegate_block_cache_bytes",
        "zonegate_request_memory_bytes",
        "zonegate_qos_queue_depth",
    }
)
_ADDITIVE_TYPES = frozenset({"counter", "histogram", "summary", "gaugehistogram"})
Labels = tuple[tuple[str, str], ...]


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families


def merge(
    node_text: str,
    worker_texts: Sequence[str],
    extra: Sequence[Metric] = (),
    retired: Sequence[str] = (),
) -> bytes:
    """The node process's metrics with its workers' added in (module doc), then `extra`.
    `retired`: the last texts of workers that exited; their counters and histograms
    still count, so the node's never go down when a worker is restarted."""
    heads: dict[str, tuple[str, str]] = {}  # family -> (documentation, type)
    # family -> series (labels without `le`) -> sample (name, labels) -> value, in the
    # order first seen, so a histogram's buckets stay together and in order.
    values: dict[str, dict[Labels, dict[tuple[str, Labels], float]]] = {}
    texts = [(node_text, "node"), *((t, "worker") for t in worker_texts)]
    texts += [(t, "retired") for t in retired]
    for text, whose in texts:
        for family in text_string_to_metric_families(text):
            counts = family.type in _ADDITIVE_TYPES
            if whose == "worker" and not (counts or family.name in PER_PROCESS_GAUGES):
                continue
            if whose == "retired" and not counts:
                continue
            heads.setdefault(family.name, (family.documentation, family.type))
            series = values.setdefault(family.name, {})
            for s in family.samples:
                labels = tuple(sorted(s.labels.items()))
                key = tuple(kv for kv in labels if kv[0] != "le")
                samples = series.setdefault(key, {})
                samples[(s.name, labels)] = samples.get((s.name, labels), 0.0) + s.value
    families: list[Metric] = []
    for name, (doc, kind) in heads.items():
        metric = Metric(name, doc, kind)
        for samples in values[name].values():
            for (sample, labels), value in samples.items():
                metric.add_sample(sample, dict(labels), value)
        families.append(metric)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families([*families, *extra]))
    return generate_latest(registry)


def gauge_total(text: str, name: str) -> float:
    """The sum of a gauge's series in one process's text (0 when it has none)."""
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return sum(s.value for s in family.samples)
    return 0.0
