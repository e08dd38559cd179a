"""The transaction metrics a node exposes (docs/transactions.md "Admin and metrics"): the
coordinator shards it holds, their open transactions and the age of the oldest, and per
partition it leads with a transaction open, how far the last stable offset lags the high
watermark (what read_committed consumers are held back by). broker/metrics.py adds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily

from zonegate.txn_coordinator.role import TxnCoordinator


def txn_metrics(
    coordinator: TxnCoordinator,
    lso_lags: Mapping[int, int],
    partition_of: Callable[[int], tuple[str, int] | None],
    node: str,
    now_ms: int,
) -> Iterator[GaugeMetricFamily]:
    shards = GaugeMetricFamily(
        "zonegate_txn_shards_held",
        "Transaction coordinator shards this node holds",
        labels=["node"],
    )
    shards.add_metric([node], len(coordinator.hosts))
    yield shards
    count, oldest = coordinator.open_transactions()
    open_ = GaugeMetricFamily(
        "zonegate_txn_open_transactions",
        "Open transactions (ongoing or ending) of the shards this node holds",
        labels=["node"],
    )
    open_.add_metric([node], count)
    yield open_
    age = GaugeMetricFamily(
        "zonegate_txn_oldest_open_seconds",
        "Age of the oldest open transaction of the shards this node holds (0: none)",
        labels=["node"],
    )
    age.add_metric([node], 0.0 if oldest is None else max(now_ms - oldest, 0) / 1000)
    yield age
    lag = GaugeMetricFamily(
        "zonegate_lso_lag_offsets",
        "High watermark minus last stable offset, per led partition with a transaction open",
        labels=["node", "topic", "partition"],
    )
    for stream_id, behind in sorted(lso_lags.items()):
        tp = partition_of(stream_id)
        if tp is not None:
            lag.add_metric([node, tp[0], str(tp[1])], behind)
    yield lag
