"""The price tables themselves, one entry per (provider, region), and the lookup by name.

Data only. Each figure's source and the date it was stated are repeated, with
the reasoning, in docs/prices.md; change both together.
"""

from __future__ import annotations

from zonegate.cost_model.prices import ObjectStoragePrices, PriceTable, Source, UnknownPrice

_AWS_EC2 = Source(
    "https://aws.amazon.com/ec2/pricing/on-demand/",
    "2026-04-16",
    "USD 0.01/GB in each direction between AZs of one region, as quoted by "
    "https://www.automq.com/blog/kafka-cross-az-hidden-cost (2026-04-16)",
)
_AWS_S3_STANDARD = Source(
    "https://aws.amazon.com/s3/pricing/",
    "2016-12-01",
    "long-standing list price (first 50 TB tier); not re-read from the live page",
)
_AWS_S3_EXPRESS = Source(
    "https://aws.amazon.com/s3/faqs/",
    "2025-04-10",
    "figures from the S3 FAQ's Express One Zone worked example; the date is that of the "
    "April 2025 Express One Zone price reduction (from memory, not on the page)",
)
_AWS_GP3 = Source(
    "https://aws.amazon.com/ebs/pricing/",
    "2020-12-01",
    "gp3 list price since its launch; not re-read from the live page",
)
_GCP_NET = Source(
    "https://cloud.google.com/vpc/network-pricing",
    "2026-04-16",
    "USD 0.01/GB inter-zone egress (sender side only), as quoted by "
    "https://www.automq.com/blog/kafka-cross-az-hidden-cost (2026-04-16)",
)
_GCP_GCS = Source(
    "https://cloud.google.com/storage/pricing-examples",
    "undated copy",
    "Standard storage USD 0.020/GB, class A USD 0.005/1,000, class B USD 0.0004/1,000 "
    "(the page's simple example, us-east1; us-central1 has the same Standard rate)",
)
_GCP_PD = Source(
    "https://cloud.google.com/compute/disks-image-pricing",
    "unverified",
    "pd-balanced list price recalled, not read from a copy of the page",
)
_AZURE_NET = Source(
    "https://blog.vjirovsky.cz/azure-may-2024-cost-storage/",
    "2024-05",
    "Microsoft announced at Build 2024 that it would not charge for inter-AZ transfer",
)
_AZURE_BLOB = Source(
    "https://azure.microsoft.com/en-us/pricing/details/storage/blobs/",
    "unverified",
    "Hot LRS list prices recalled, not read from a copy of the page",
)
_AZURE_DISK = Source(
    "https://azure.microsoft.com/en-us/pricing/details/managed-disks/",
    "unverified",
    "Premium SSD v2 capacity list price recalled, not read from a copy of the page",
)

_AWS_STANDARD = ObjectStoragePrices(
    name="S3 Standard",
    put_per_1000=0.005,
    get_per_1000=0.0004,
    storage_per_gib_month=0.023,
    source=_AWS_S3_STANDARD,
)
_AWS_EXPRESS = ObjectStoragePrices(
    name="S3 Express One Zone",
    put_per_1000=0.00113,
    get_per_1000=0.00003,
    storage_per_gib_month=0.11,
    upload_per_gib=0.0032,
    retrieval_per_gib=0.0006,
    source=_AWS_S3_EXPRESS,
)


def _aws(region: str, gp3: float, express: bool) -> PriceTable:
    return PriceTable(
        provider="aws",
        region=region,
        cross_zone_out_per_gib=0.01,
        cross_zone_in_per_gib=0.01,
        cross_zone_source=_AWS_EC2,
        block_storage_per_gib_month=gp3,
        block_storage_name="EBS gp3",
        block_storage_source=_AWS_GP3,
        standard=_AWS_STANDARD,
        express=_AWS_EXPRESS if express else None,
    )


PRICE_TABLES: tuple[PriceTable, ...] = (
    _aws("us-east-1", 0.08, express=True),
    _aws("us-west-2", 0.08, express=True),
    PriceTable(
        provider="gcp",
        region="us-central1",
        cross_zone_out_per_gib=0.01,
        cross_zone_in_per_gib=0.0,
        cross_zone_source=_GCP_NET,
        block_storage_per_gib_month=0.10,
        block_storage_name="pd-balanced",
        block_storage_source=_GCP_PD,
        standard=ObjectStoragePrices(
            name="GCS Standard",
            put_per_1000=0.005,
            get_per_1000=0.0004,
            storage_per_gib_month=0.020,
            source=_GCP_GCS,
        ),
    ),
    PriceTable(
        provider="azure",
        region="eastus",
        cross_zone_out_per_gib=0.0,
        cross_zone_in_per_gib=0.0,
        cross_zone_source=_AZURE_NET,
        block_storage_per_gib_month=0.08,
        block_storage_name="Premium SSD v2",
        block_storage_source=_AZURE_DISK,
        standard=ObjectStoragePrices(
            name="Blob Hot LRS",
            put_per_1000=0.005,
            get_per_1000=0.0004,
            storage_per_gib_month=0.018,
            source=_AZURE_BLOB,
        ),
    ),
)


def known_regions() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in PRICE_TABLES:
        out.setdefault(t.provider, []).append(t.region)
    return out


def default_region(provider: str) -> str:
    """The provider's first region, or "" for an unknown provider (price_table then says so)."""
    regions = known_regions().get(provider)
    return regions[0] if regions else ""


def price_table(provider: str, region: str) -> PriceTable:
    """The table for `provider`/`region`, or `UnknownPrice` naming what is known."""
    regions = known_regions()
    if provider not in regions:
        raise UnknownPrice(
            f"unknown provider {provider!r}: known providers are {', '.join(sorted(regions))}"
        )
    for t in PRICE_TABLES:
        if t.provider == provider and t.region == region:
            return t
    raise UnknownPrice(
        f"unknown region {region!r} for {provider}: known regions are "
        f"{', '.join(regions[provider])}"
    )
