"""The usage-record schema (docs/usage-records.md, schema_version 4) as Arrow and Spark see it.

Readers accept exactly the versions listed here and stop, naming the version,
on any other. Version 1 records (before S3 requests were counted by purpose),
version 2 ones (before the principal) and version 3 ones (before the reason a
client's bytes crossed zones) are read as version 4 ones with the columns they
lack at their defaults.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 4
KNOWN_VERSIONS = frozenset({1, 2, 3, SCHEMA_VERSION})
USAGE_PREFIX = "usage/"

KINDS = ("produce_data", "fetch_data", "forward_rpc", "other", "s3", "storage")
CLIENT_KINDS = ("produce_data", "fetch_data", "other")

_UTC_MS = pa.timestamp("ms", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("interval_start", _UTC_MS),
        ("interval_end", _UTC_MS),
        ("cluster", pa.string()),
        ("node_id", pa.int32()),
        ("node_zone", pa.string()),
        ("kind", pa.string()),
        ("client_zone", pa.string()),
        ("leader_zone", pa.string()),
        ("peer_zone", pa.string()),
        ("topic", pa.string()),
        ("client_id", pa.string()),
        ("bytes_in", pa.int64()),
        ("bytes_out", pa.int64()),
        ("requests", pa.int64()),
        ("s3_put_requests", pa.int64()),
        ("s3_get_requests", pa.int64()),
        ("s3_other_requests", pa.int64()),
        ("s3_put_bytes", pa.int64()),
        ("s3_get_bytes", pa.int64()),
        ("stored_bytes", pa.int64()),
        # Version 2: S3 requests by purpose (`s3` rows), LIST and DeleteObjects apart.
        ("s3_purpose", pa.string()),
        ("s3_list_requests", pa.int64()),
        ("s3_delete_requests", pa.int64()),
        # Version 3: the authenticated principal of the client's requests (User:alice;
        # User:ANONYMOUS where nobody authenticated), "" on node and S3 rows.
        ("principal", pa.string()),
        # Version 4: why a client's bytes crossed zones (CROSS_ZONE_REASONS), "" where
        # they did not (or on node and S3 rows).
        ("cross_zone_reason", pa.string()),
    ]
)
# Why a client row's node is in another zone than the client. OUTAGE: the client's own
# zone had no live node serving its listener when the node answered (a zone lost, its
# clients served elsewhere); ROUTED: it had one, but the client reached this node (its
# bootstrap list, or zone routing off).
OUTAGE = "outage"
ROUTED = "routed"
CROSS_ZONE_REASONS = ("", OUTAGE, ROUTED)
# What a version-1 record holds in the columns version 2 added.
V2_DEFAULTS: dict[str, str | int] = {
    "s3_purpose": "",
    "s3_list_requests": 0,
    "s3_delete_requests": 0,
}
# What a version-1 or version-2 record holds in the column version 3 added: no
# principal was recorded.
V3_DEFAULTS: dict[str, str | int] = {"principal": ""}
# What an older record holds in the column version 4 added: no reason was recorded
# (the report takes its cross-zone client bytes as not an outage's).
V4_DEFAULTS: dict[str, str | int] = {"cross_zone_reason": ""}
COLUMNS = tuple(ARROW_SCHEMA.names)

# The same schema as a Spark DDL string (kept here so pyspark need not be imported).
_SPARK_TYPES = {
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.string(): "string",
    _UTC_MS: "timestamp",
}
SPARK_DDL = ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in ARROW_SCHEMA)


class UsageInputError(Exception):
    """The usage location cannot give a complete, trustworthy report; the message says why."""


class UnknownSchemaVersion(UsageInputError):
    def __init__(self, versions: list[int], where: str = "") -> None:
        at = f" in {where}" if where else ""
        super().__init__(
            f"usage records{at} have schema_version {', '.join(map(str, sorted(versions)))}; "
            f"this reader knows only {', '.join(map(str, sorted(KNOWN_VERSIONS)))} "
            "(docs/usage-records.md): upgrade zonegate to report on them"
        )
        self.versions = versions


def check_versions(versions: list[int], where: str = "") -> None:
    unknown = [v for v in versions if v not in KNOWN_VERSIONS]
    if unknown:
        raise UnknownSchemaVersion(unknown, where)


def conform(table: pa.Table, where: str) -> pa.Table:
    """Check one object's version, then return exactly the current columns in order (an
    older object's missing ones at their defaults)."""
    if "schema_version" not in table.column_names:
        raise UsageInputError(f"{where} has no schema_version column: not a usage record")
    versions = table.column("schema_version").unique().to_pylist()
    check_versions([int(v) for v in versions if v is not None], where)
    for name, default in {**V2_DEFAULTS, **V3_DEFAULTS, **V4_DEFAULTS}.items():
        if name not in table.column_names:
            field = ARROW_SCHEMA.field(name)
            table = table.append_column(field, pa.array([default] * table.num_rows, field.type))
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise UsageInputError(f"{where} lacks columns {', '.join(missing)}")
    return table.select(list(COLUMNS)).cast(ARROW_SCHEMA)
