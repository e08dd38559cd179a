"""A tenant mix priced: several tenants on one zonegate cluster, each tenant's cost and the total.

Each tenant has its own produce rate, fan-out, retention and zone spread (how many
of the cluster's zones its clients are in). What a tenant alone causes is priced
for it alone: the leader RPCs of its batches that cross zones (Appends to leaders
spread over all the cluster's zones; index reads from each zone its consumers are
in), its stored bytes, and what Kafka would cost it. What the nodes do for all
tenants at once is priced once, for the cluster's combined workload (a node seals
WAL objects of every tenant's batches together, so the PUTs are not a sum of
tenants' own), and shared out: S3 PUT-side charges and compaction GETs by bytes
produced, tail-read GETs by bytes produced among tenants that consume at all.
Tenants' costs therefore add up to the total. Formulas: docs/cost-model.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from zonegate.cost_model.breakdown import MONTH_S, CostBreakdown
from zonegate.cost_model.kafka import kafka_cost
from zonegate.cost_model.prices import GIB, PriceTable
from zonegate.cost_model.whatif import Assumptions, Workload, object_storage_cost, s3_wal_requests

_FIELDS = {"fanout": float, "zones": int, "retention-hours": float}


@dataclass(frozen=True)
class Tenant:
    name: str
    ingress_mib_s: float
    fanout: float = 1.0
    zones: int | None = None  # zones its clients are in (None: all the cluster's)
    retention_hours: float | None = None  # None: the cluster's

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a tenant needs a name")
        if self.ingress_mib_s < 0 or self.fanout < 0:
            raise ValueError(f"tenant {self.name}: rates must not be negative")
        if self.zones is not None and self.zones < 1:
            raise ValueError(f"tenant {self.name}: zones must be at least 1, got {self.zones}")
        if self.retention_hours is not None and self.retention_hours < 0:
            raise ValueError(f"tenant {self.name}: retention-hours must not be negative")


def parse_tenant(text: str) -> Tenant:
    """`NAME=MIB_S[,fanout=N][,zones=N][,retention-hours=H]` -> Tenant; ValueError names
    what is wrong."""
    head, *rest = text.split(",")
    name, sep, rate = head.partition("=")
    if not sep:
        raise ValueError(f"--tenant {text!r}: expected NAME=MIB_S[,fanout=N,zones=N,...]")
    try:
        kwargs: dict[str, float | int] = {"ingress_mib_s": float(rate)}
        for item in rest:
            key, _, value = item.partition("=")
            key = key.strip()
            if key not in _FIELDS:
                raise ValueError(f"unknown field {key!r} (known: {', '.join(_FIELDS)})")
            kwargs[key.replace("-", "_")] = _FIELDS[key](value)
        return Tenant(name.strip(), **kwargs)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValueError(f"--tenant {text!r}: {exc}") from None


@dataclass(frozen=True)
class TenantCost:
    tenant: Tenant
    zones: int  # its zone spread, within the cluster's
    zonegate: CostBreakdown
    kafka: CostBreakdown  # Kafka RF=3 moving and keeping its bytes


@dataclass(frozen=True)
class TenantMix:
    cluster: Workload  # the combined workload the shared charges were priced for
    tenants: list[TenantCost]

    @property
    def zonegate(self) -> CostBreakdown:
        return _sum(t.zonegate for t in self.tenants)

    @property
    def kafka(self) -> CostBreakdown:
        return _sum(t.kafka for t in self.tenants)


def _sum(parts: Iterable[CostBreakdown]) -> CostBreakdown:
    items = list(parts)
    names = [f.name for f in dataclasses.fields(CostBreakdown)]
    return CostBreakdown(**{n: sum(getattr(p, n) for p in items) for n in names})


def combined(tenants: list[Tenant], base: Workload) -> Workload:
    """The cluster's workload: the tenants' rates summed, fan-out and retention weighted by
    bytes produced (every other field the base's)."""
    total = sum(t.ingress_mib_s for t in tenants)
    if total == 0:
        return dataclasses.replace(base, ingress_mib_s=0.0)
    return dataclasses.replace(
        base,
        ingress_mib_s=total,
        fanout=sum(t.ingress_mib_s * t.fanout for t in tenants) / total,
        retention_hours=sum(t.ingress_mib_s * _retention(t, base) for t in tenants) / total,
    )


def _retention(t: Tenant, base: Workload) -> float:
    return base.retention_hours if t.retention_hours is None else t.retention_hours


def price_mix(
    tenants: list[Tenant],
    base: Workload,
    prices: PriceTable,
    a: Assumptions | None = None,
    *,
    storage_class: str = "standard",
) -> TenantMix:
    """Each tenant's zonegate and Kafka cost over `base`'s period on `base.zones` zones."""
    if not tenants:
        raise ValueError("no tenant to price")
    if len({t.name for t in tenants}) != len(tenants):
        raise ValueError("tenant names must differ")
    a = a or Assumptions()
    w = combined(tenants, base)
    s3 = prices.object_storage(storage_class)
    shared = object_storage_cost(s3_wal_requests(w, a, tail_reads_from_s3=True), 0.0, s3)
    no_tail = object_storage_cost(s3_wal_requests(w, a, tail_reads_from_s3=False), 0.0, s3)
    tail_get = shared.s3_get - no_tail.s3_get
    produced = sum(t.ingress_mib_s for t in tenants)
    consuming = sum(t.ingress_mib_s for t in tenants if t.fanout > 0)
    zones = base.zones
    remote = (zones - 1) / zones
    out = []
    for t in tenants:
        share = t.ingress_mib_s / produced if produced else 1 / len(tenants)
        tail_share = t.ingress_mib_s / consuming if consuming and t.fanout > 0 else 0.0
        spread = min(t.zones or zones, zones)
        data = t.ingress_mib_s * (1 << 20) * base.seconds
        batches = data / a.produce_batch_bytes
        # Appends reach leaders spread over every zone; each zone with consumers reads
        # the index from leaders in the other zones (zonegate_scenario with spread = zones).
        append = batches * a.rpc_bytes_per_batch * remote
        index = batches * a.rpc_bytes_per_batch * spread * remote if t.fanout > 0 else 0.0
        # Steady state: retention's worth of its data held for the whole period.
        stored = data * _retention(t, base) * 3600
        zg = CostBreakdown(
            cross_zone_transfer=(append + index) / GIB * prices.cross_zone_per_gib,
            s3_put=shared.s3_put * share,
            s3_get=no_tail.s3_get * share + tail_get * tail_share,
            s3_storage=stored / GIB / MONTH_S * s3.storage_per_gib_month,
        )
        kafka = kafka_cost(
            data, data * t.fanout, stored, zones, prices, rf=a.kafka_rf, fetch_from_follower=False
        )
        out.append(TenantCost(t, spread, zg, kafka))
    return TenantMix(w, out)


def render_mix(mix: TenantMix, prices: PriceTable, storage_class: str) -> str:
    """`zonegate cost --tenant ...`'s table: a row per tenant, then the total."""
    w = mix.cluster
    head = [
        f"USD / {w.days:g} days",
        "MiB/s",
        "fan-out",
        "zones",
        "Cross-zone",
        "S3 PUT",
        "S3 GET",
        "S3 storage",
        "zonegate",
        f"Kafka RF={Assumptions().kafka_rf}",
    ]

    def cells(
        name: str, rate: float, fanout: str, zones: str, zg: CostBreakdown, k: float
    ) -> list[str]:
        money = (zg.cross_zone_transfer, zg.s3_put, zg.s3_get, zg.s3_storage, zg.total, k)
        return [name, f"{rate:g}", fanout, zones, *(f"{x:,.2f}" for x in money)]

    rows = [
        cells(
            c.tenant.name,
            c.tenant.ingress_mib_s,
            f"{c.tenant.fanout:g}",
            str(c.zones),
            c.zonegate,
            c.kafka.total,
        )
        for c in mix.tenants
    ]
    total = cells(
        "Total", w.ingress_mib_s, f"{w.fanout:.3g}", str(w.zones), mix.zonegate, mix.kafka.total
    )
    widths = [max(len(r[i]) for r in [head, *rows, total]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(
            [r[0].ljust(widths[0]), *(c.rjust(wd) for c, wd in zip(r[1:], widths[1:], strict=True))]
        )

    rule = "  ".join("-" * wd for wd in widths)
    s3 = prices.object_storage(storage_class)
    title = (
        f"{len(mix.tenants)} tenants on one cluster over {w.zones} zones, {w.nodes_per_zone} "
        f"node(s) per zone; {prices.provider} {prices.region}, {s3.name}"
    )
    note = (
        "Own: cross-zone leader RPCs, storage, Kafka. Shared (priced for the combined "
        "workload, split by bytes produced): S3 PUT and GET requests."
    )
    return "\n".join([title, "", line(head), rule, *map(line, rows), rule, line(total), "", note])
