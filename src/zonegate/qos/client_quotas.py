"""Kafka's client quotas: which quota applies to a client, its windowed rate, the throttle time.

A copy of Kafka's behaviour (ClientQuotaManager, Rate and SampledStat of its
metrics library, QuotaUtils.throttleTime, ControllerMutationQuotaManager's
token bucket), on millisecond times the caller passes:

- A quota is set on an entity: a user, a client id, or both, each a name or
  the default (`None`). The quota a (user, client id) pair gets is found in
  Kafka's order: user+client, user+default client, user, default user+client,
  default user+default client, default user, client, default client.
- Clients that fall under the same entry share one rate (`metric_tags`): with
  a quota on client id `app`, every connection of `app` counts together.
- The rate is a sum over `window_num` samples of `window_s` each, divided by
  the time they cover (at least `window_num - 1` full windows, so a new
  client's first burst is spread over the whole window, as Kafka's).
- A client over its quota is throttled for (rate - quota) / quota x the
  window: the time it must stay silent for its rate to come back to the quota.
- Controller mutations (partitions created or deleted) are counted by a token
  bucket of `window_num x window_s x quota` tokens: with the bucket below zero,
  a strict request is refused (THROTTLING_QUOTA_EXCEEDED) and every request
  answers how long until it is at zero again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from zonegate.metastore.models import QuotaEntity as Entity

USER, CLIENT_ID, IP = "user", "client-id", "ip"
# Kafka's quota keys for users and client ids, and their types (QuotaConfig).
QUOTA_KEYS = {
    "producer_byte_rate": "long",
    "consumer_byte_rate": "long",
    "request_percentage": "double",
    "controller_mutation_rate": "double",
}
Tags = tuple[str, str]  # (user, client id) of a shared rate; "" when not part of it
_INACTIVE_S = 3600  # Kafka's InactiveSensorExpirationTimeSeconds


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    num: int = 11  # quota.window.num
    size_s: int = 1  # quota.window.size.seconds

    @property
    def size_ms(self) -> int:
        return self.size_s * 1000


def entity(user: str | None = "", client_id: str | None = "") -> Entity:
    """An entity from its parts: "" leaves a part out, None is its default."""
    parts: list[tuple[str, str | None]] = []
    if client_id != "":
        parts.append((CLIENT_ID, client_id))
    if user != "":
        parts.append((USER, user))
    return tuple(sorted(parts))


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_ms = now_ms
        self.value = 0.0
        self.events = 0


class WindowedRate:
    """Kafka's Rate over a WindowedSum: `window.num` samples (and one that overlaps)."""

    def __init__(self, window: QuotaWindow) -> None:
        self._window = window
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self._window.size_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self._window.num + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire = self._window.num * self._window.size_ms
        for s in self._samples:
            if now_ms - s.last_ms >= expire:
                s.reset(now_ms)

    def window_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        oldest = min(s.start_ms for s in self._samples)
        elapsed = now_ms - oldest
        full = elapsed // self._window.size_ms
        if full < self._window.num - 1:
            elapsed += (self._window.num - 1 - full) * self._window.size_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_ms(now_ms) / 1000.0)

    def idle_since(self, now_ms: int) -> int:
        return now_ms - max((s.last_ms for s in self._samples), default=now_ms)


def throttle_ms(rate: WindowedRate, value: float, bound: float, now_ms: int) -> int:
    """QuotaUtils.throttleTime: how long the client must stay silent."""
    return round((value - bound) / bound * rate.window_ms(now_ms))


@dataclass(slots=True)
class _Sensor:
    rate: WindowedRate
    last_ms: int
    throttled_ms: int = 0  # throttle time given, summed (for /metrics)
    tokens: float | None = None  # controller mutations' bucket
    tokens_at: int = 0


@dataclass
class QuotaManager:
    """One quota type (produce, fetch, request, controller mutation) of a node."""

    key: str
    window: QuotaWindow = field(default_factory=QuotaWindow)
    quotas: dict[Entity, float] = field(default_factory=dict)
    _sensors: dict[Tags, _Sensor] = field(default_factory=dict)

    def update(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        self.quotas = {e: values[self.key] for e, values in quotas.items() if self.key in values}

    @property
    def enabled(self) -> bool:
        return bool(self.quotas)

    def metric_tags(self, user: str, client_id: str) -> Tags:
        """ClientQuotaManager.quotaMetricTags: whose rate this client's requests add to."""
        q = self.quotas
        if entity(user, client_id) in q or entity(user, None) in q:
            return user, client_id
        if entity(user) in q:
            return user, ""
        if entity(None, client_id) in q or entity(None, None) in q:
            return user, client_id
        if entity(None) in q:
            return user, ""
        return "", client_id

    def limit(self, tags: Tags) -> float | None:
        """DefaultQuotaCallback.quotaLimit: the quota of a shared rate, or None."""
        user, client_id = tags
        if user and client_id:
            order = [entity(user, client_id), entity(user, None)]
            order += [entity(None, client_id), entity(None, None)]
        elif user:
            order = [entity(user), entity(None)]
        elif client_id:
            order = [entity(client_id=client_id), entity(client_id=None)]
        else:
            return None
        return next((self.quotas[e] for e in order if e in self.quotas), None)

    def _sensor(self, tags: Tags, now_ms: int) -> _Sensor:
        s = self._sensors.get(tags)
        if s is None:
            if len(self._sensors) > 1000:
                self._expire(now_ms)
            s = self._sensors[tags] = _Sensor(WindowedRate(self.window), now_ms)
        s.last_ms = now_ms
        return s

    def _expire(self, now_ms: int) -> None:
        for tags, s in list(self._sensors.items()):
            if now_ms - s.last_ms >= _INACTIVE_S * 1000:
                del self._sensors[tags]

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Records `value` and answers the throttle time in ms (0: within the quota).
        Without any quota of this type nothing is recorded, as Kafka's."""
        if not self.quotas:
            return 0
        tags = self.metric_tags(user, client_id)
        s = self._sensor(tags, now_ms)
        s.rate.record(value, now_ms)
        bound = self.limit(tags)
        if bound is None:
            return 0
        rate = s.rate.measure(now_ms)
        if rate <= bound:
            return 0
        ms = throttle_ms(s.rate, rate, bound, now_ms)
        s.throttled_ms += max(ms, 0)
        return max(ms, 0)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        if self.quotas:
            tags = self.metric_tags(user, client_id)
            self._sensor(tags, now_ms).rate.record(-value, now_ms)

    # -- controller mutations: a token bucket -------------------------------------------
    def take_tokens(
        self, user: str, client_id: str, permits: float, now_ms: int, *, strict: bool
    ) -> int:
        """ControllerMutationQuota.record. Strict (CreateTopics v6+, CreatePartitions
        v3+, DeleteTopics v5+): -1 when the bucket is below zero (the request is refused,
        nothing taken), else 0 after taking `permits`, whatever is left. Permissive
        (older versions): takes them and answers the throttle time in ms."""
        if not self.quotas:
            return 0
        tags = self.metric_tags(user, client_id)
        bound = self.limit(tags)
        if bound is None:
            return 0
        s = self._sensor(tags, now_ms)
        burst = self.window.num * self.window.size_s * bound
        if s.tokens is None:
            s.tokens, s.tokens_at = burst, now_ms
        s.tokens = min(burst, s.tokens + bound * (now_ms - s.tokens_at) / 1000.0)
        s.tokens_at = now_ms
        if strict and s.tokens < 0:
            return -1
        s.tokens = min(burst, s.tokens - permits)
        if strict or s.tokens >= 0:
            return 0
        return round(-s.tokens / bound * 1000)

    def mutation_throttle_ms(self, user: str, client_id: str, now_ms: int) -> int:
        """How long until the client's bucket is back at zero (0: it is)."""
        tags = self.metric_tags(user, client_id)
        bound = self.limit(tags)
        s = self._sensors.get(tags)
        if bound is None or s is None or s.tokens is None:
            return 0
        tokens = s.tokens + bound * (now_ms - s.tokens_at) / 1000.0
        return 0 if tokens >= 0 else round(-tokens / bound * 1000)

    def throttle_totals(self) -> dict[Tags, int]:
        return {t: s.throttled_ms for t, s in self._sensors.items() if s.throttled_ms}
