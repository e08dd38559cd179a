"""Price tables as data: what a provider charges, per region, with where each figure came from.

Every figure carries its source and the date it was stated so docs/prices.md and
a report can cite it; nothing here computes a cost (see `whatif` and `measured`).
Units: USD; data sizes in GiB (2^30 bytes, the unit AWS and GCP bill "GB" in);
requests per single request (tables state them per 1,000 and are converted once).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True)
class Source:
    url: str
    stated: str  # when the price was stated (or the copy we read was made), ISO date or month
    note: str = ""


@dataclass(frozen=True)
class ObjectStoragePrices:
    """One object-storage class (S3 Standard, S3 Express One Zone, GCS Standard, ...)."""

    name: str
    put_per_1000: float  # PUT/COPY/POST/LIST class ("class A", "write operations")
    get_per_1000: float  # GET/HEAD class ("class B", "read operations")
    storage_per_gib_month: float
    upload_per_gib: float = 0.0  # per-GiB request data charges (S3 Express One Zone only)
    # DELETE (and S3's DeleteObjects) is free at AWS, GCS and Azure alike.
    delete_per_1000: float = 0.0
    retrieval_per_gib: float = 0.0
    source: Source = Source("", "")


@dataclass(frozen=True)
class PriceTable:
    provider: str
    region: str
    # Inter-zone transfer inside the region. AWS bills both sides (out and in);
    # GCP bills the sending side only; Azure stopped billing it in 2024.
    cross_zone_out_per_gib: float
    cross_zone_in_per_gib: float
    cross_zone_source: Source
    block_storage_per_gib_month: float  # the disk Kafka brokers keep their logs on
    block_storage_name: str
    block_storage_source: Source
    standard: ObjectStoragePrices
    express: ObjectStoragePrices | None = None

    @property
    def cross_zone_per_gib(self) -> float:
        """What one GiB crossing from one zone to another costs, both sides together."""
        return self.cross_zone_out_per_gib + self.cross_zone_in_per_gib

    def object_storage(self, storage_class: str) -> ObjectStoragePrices:
        if storage_class == "standard":
            return self.standard
        if storage_class == "express":
            if self.express is None:
                raise UnknownPrice(
                    f"{self.provider} {self.region} has no zonal express storage class in the "
                    "price tables; use --storage-class standard"
                )
            return self.express
        raise UnknownPrice(f"unknown storage class {storage_class!r}: use standard or express")


class UnknownPrice(ValueError):
    """The asked-for provider, region or storage class is not in the tables."""
