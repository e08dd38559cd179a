"""Fixed-bucket histograms the node's parts fill on their hot paths and the metrics
endpoint reads at scrape time (broker/metrics.py turns them into Prometheus
histograms).

No Prometheus client below the assembly: an observation is a bisect and two
additions, with no lock (every part observes on its own event loop's thread;
a scrape reads a count that is at worst one observation behind).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence

# Seconds: from a fraction of a millisecond (a local-store commit) to S3's tail.
LATENCY_BUCKETS_S = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
# Bytes: a WAL object holds one small batch at least, 8 MiB (the seal size) at most.
SIZE_BUCKETS_BYTES = tuple(float(1 << n) for n in range(10, 25, 2))  # 1 KiB .. 16 MiB


class Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last is above every bound
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus's buckets: (upper bound, observations at or below it), +Inf last."""
        out, running = [], 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            out.append((repr(bound), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


class Histograms:
    """One histogram per label value (an API, a stage, an operation)."""

    __slots__ = ("_bounds", "by_label")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        self._bounds = tuple(bounds)
        self.by_label: dict[Hashable, Histogram] = {}

    def observe(self, label: Hashable, value: float) -> None:
        h = self.by_label.get(label)
        if h is None:
            h = self.by_label[label] = Histogram(self._bounds)
        h.observe(value)
