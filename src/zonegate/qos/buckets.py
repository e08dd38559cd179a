"""Token buckets on the caller's clock: a rate per second and a burst, refilled continuously.

A bucket may go into debt: a request larger than the burst (an 8 MiB WAL object
under a 4 MiB burst) is let through when the bucket is above zero, and the debt
delays whatever comes next. That keeps the long-run rate exact without ever
refusing a request for being big. A rate of 0 means no limit. Time is whatever
the caller passes (`Clock.monotonic()`), so tests move it by hand.
"""

from __future__ import annotations


class TokenBucket:
    __slots__ = ("burst", "level", "rate", "_at")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate < 0 or burst < 0:
            raise ValueError(f"rate and burst must be >= 0, got {rate}, {burst}")
        self.rate = float(rate)
        self.burst = float(burst) if burst > 0 else float(rate)
        self.level = self.burst
        self._at = now

    @property
    def unlimited(self) -> bool:
        return self.rate == 0

    def refill(self, now: float) -> None:
        if now > self._at:
            self.level = min(self.burst, self.level + (now - self._at) * self.rate)
        self._at = max(self._at, now)

    def ready(self, now: float) -> bool:
        """Whether a request may take tokens now (the bucket is above zero)."""
        if self.unlimited:
            return True
        self.refill(now)
        return self.level > 0

    def take(self, amount: float) -> None:
        if not self.unlimited:
            self.level -= amount

    def seconds_until_ready(self, now: float) -> float:
        if self.unlimited:
            return 0.0
        self.refill(now)
        if self.level > 0:
            return 0.0
        # Just above zero, not at it: `ready` needs level > 0.
        return (-self.level) / self.rate + 1e-6
