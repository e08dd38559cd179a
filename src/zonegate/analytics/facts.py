"""Usage records summed into facts: the one step of the report that reads every record.

Facts are the records summed by (schema_version, UTC day, kind, node zone, peer
zone, topic, client id, S3 purpose, principal, outage window: the UTC hour of a
client row whose bytes crossed zones because the client's zone was lost, "" on
every other row). They are small, since records collapse over
intervals, nodes and the client's and leader's zones (what Kafka's leaders would
have made cross, client to leader, is kept as a sum), so every report table is built from
them on the driver (`tables`). Two engines compute the same facts: this module,
in this process with Arrow (a stream of record chunks, each summed, the partial
sums summed again; memory is bounded by the facts, not the records), and
`spark_engine` for inputs that need a cluster.
"""

from __future__ import annotations

import asyncio
import io
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from zonegate.analytics.source import UsageLocation, local_path
from zonegate.usage.schema import ARROW_SCHEMA, OUTAGE, UsageInputError, conform

if TYPE_CHECKING:
    from zonegate.storage.instrumented import InstrumentedObjectStore

FACT_KEYS = (
    "schema_version",
    "day",
    "kind",
    "node_zone",
    "peer_zone",
    "topic",
    "client_id",
    "s3_purpose",
    "principal",  # schema 3; "" in older records
    # Schema 4: "YYYY-MM-DD HH:00" (UTC) of the interval of a row whose cross_zone_reason
    # is an outage, so the report can say when and where a lost zone's clients crossed;
    # "" elsewhere, so facts do not grow by the hour in normal times.
    "outage_window",
)
RECORD_SUMS = (
    "bytes_in",
    "bytes_out",
    "requests",
    "s3_put_requests",
    "s3_get_requests",
    "s3_other_requests",
    "s3_put_bytes",
    "s3_get_bytes",
    "s3_list_requests",
    "s3_delete_requests",
)
# Produce and Fetch bytes (both ways) whose client and partition leader were in
# different zones (schema 2, where the leader is the partition's), and those whose
# zones are not both known (schema 1 named one leader per topic): the report's
# Kafka baseline takes the first as measured and prices the second by its formula.
LEADER_SUMS = ("leader_cross_bytes", "leader_unknown_bytes")
FACTS_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("day", pa.string()),
        *((k, pa.string()) for k in FACT_KEYS[2:]),
        ("records", pa.int64()),
        *((c, pa.int64()) for c in RECORD_SUMS),
        *((c, pa.int64()) for c in LEADER_SUMS),
        # stored_bytes (a gauge) times the interval's length in seconds, summed.
        ("stored_byte_seconds", pa.float64()),
    ]
)
_SUMMED = ("records", *RECORD_SUMS, *LEADER_SUMS, "stored_byte_seconds")
_READ_COLUMNS = [
    *(k for k in FACT_KEYS if k not in ("day", "outage_window")),
    "cross_zone_reason",
    "client_zone",
    "leader_zone",
    "interval_start",
    "interval_end",
    *RECORD_SUMS,
    "stored_bytes",
]
# Records summed per chunk: large enough that the per-chunk cost vanishes, small
# enough to keep memory low (10M records: the whole process peaked at 214 MB, and
# at 406 MB with chunks of 1M records).
CHUNK_ROWS = 1 << 18


def facts_of(records: pa.Table) -> pa.Table:
    """Facts of one chunk of records (ARROW_SCHEMA columns; others are ignored)."""
    start = records.column("interval_start")
    seconds = pc.divide(
        pc.subtract(records.column("interval_end").cast(pa.int64()), start.cast(pa.int64())),
        1000.0,
    )
    kind = records.column("kind")
    client_zone = records.column("client_zone")
    leader_zone = records.column("leader_zone")
    both = pc.add(records.column("bytes_in"), records.column("bytes_out"))
    data = pc.is_in(kind, pa.array(["produce_data", "fetch_data"]))
    known = pc.and_(
        pc.greater_equal(records.column("schema_version"), 2),
        pc.and_(pc.not_equal(client_zone, ""), pc.not_equal(leader_zone, "")),
    )
    crossed = pc.and_(data, pc.and_(known, pc.not_equal(client_zone, leader_zone)))
    unknown = pc.and_(data, pc.invert(known))
    t = pa.table(
        {
            **{
                k: records.column(k)
                for k in FACT_KEYS
                if k not in ("day", "s3_purpose", "principal", "outage_window")
            },
            # Schema-1 objects read as the current schema lack it (null): no purpose.
            "s3_purpose": records.column("s3_purpose").fill_null(""),
            # Schema-1 and -2 objects lack it: no principal was recorded.
            "principal": records.column("principal").fill_null(""),
            # Schema 1 to 3 objects lack the reason: no outage was recorded.
            "outage_window": pc.if_else(
                pc.equal(records.column("cross_zone_reason").fill_null(""), OUTAGE),
                pc.strftime(start, format="%Y-%m-%d %H:00"),
                "",
            ),
            "leader_cross_bytes": pc.if_else(crossed, both, 0),
            "leader_unknown_bytes": pc.if_else(unknown, both, 0),
            # Days are UTC days: the timestamps are UTC, and a date32 cast keeps them so.
            "day": start.cast(pa.date32()).cast(pa.string()),
            **{c: records.column(c) for c in RECORD_SUMS},
            "stored_byte_seconds": pc.multiply(
                records.column("stored_bytes").cast(pa.float64()), seconds
            ),
        }
    )
    summed = t.group_by(list(FACT_KEYS), use_threads=False).aggregate(
        [([], "count_all"), *((c, "sum") for c in _SUMMED[1:])]
    )
    return _conformed(summed)


def merge(parts: list[pa.Table]) -> pa.Table:
    """Sum facts of several chunks into one table of facts."""
    if not parts:
        return FACTS_SCHEMA.empty_table()
    t = pa.concat_tables(parts)
    return _conformed(
        t.group_by(list(FACT_KEYS), use_threads=False).aggregate([(c, "sum") for c in _SUMMED])
    )


def _conformed(summed: pa.Table) -> pa.Table:
    # group_by names its outputs after the aggregation ("bytes_in_sum", "count_all") and
    # puts the keys last; a sum over nothing but nulls (a column an object lacked) is 0.
    names = {f"{c}_sum": c for c in _SUMMED} | {"count_all": "records"}
    t = summed.rename_columns([names.get(n, n) for n in summed.column_names])
    cols = [t.column(c).fill_null(0) if c in _SUMMED else t.column(c) for c in FACTS_SCHEMA.names]
    return pa.Table.from_arrays(cols, schema=FACTS_SCHEMA)


def sum_chunks(
    chunks: Iterable[pa.Table], on_chunk: Callable[[int], None] | None = None
) -> pa.Table:
    """Facts of a stream of record tables, summed chunk by chunk."""
    parts: list[pa.Table] = []
    pending: list[pa.Table] = []
    rows = 0
    for chunk in chunks:
        pending.append(chunk)
        rows += chunk.num_rows
        if rows >= CHUNK_ROWS:
            parts.append(facts_of(pa.concat_tables(pending)))
            pending, rows = [], 0
            if on_chunk is not None:
                on_chunk(sum(p.num_rows for p in parts))
            if len(parts) > 16:  # keep the partial sums from growing with the input
                parts = [merge(parts)]
    if pending:
        parts.append(facts_of(pa.concat_tables(pending)))
    return merge(parts)


def _local_chunks(loc: UsageLocation) -> Iterator[pa.Table]:
    import pyarrow.parquet as pq

    base = local_path(loc.url).rstrip("/")
    workers = min(8, os.cpu_count() or 2)

    def read(key: str) -> pa.Table:
        # The schema reads every object as the current one: a missing column is null
        # (a missing schema_version then stops the report), extra columns are dropped.
        return pq.read_table(f"{base}/{key}", columns=_READ_COLUMNS, schema=ARROW_SCHEMA)

    # Objects are read a few at a time on threads, in order. pyarrow's dataset scanner
    # was no faster here and held about 1 GB at 10M records, whatever its readahead.
    with ThreadPoolExecutor(workers) as pool:
        pending: deque[Future[pa.Table]] = deque()
        for key in loc.keys:
            pending.append(pool.submit(read, key))
            if len(pending) >= 4 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


async def _get_all(store: InstrumentedObjectStore, keys: Sequence[str]) -> list[bytes]:
    return list(await asyncio.gather(*(store.get(k) for k in keys)))


def _s3_chunks(loc: UsageLocation, in_flight: int = 16) -> Iterator[pa.Table]:
    import pyarrow.parquet as pq

    from zonegate.storage.store_url import open_object_store

    loop = asyncio.new_event_loop()
    store = open_object_store(loc.url, endpoint_url=loc.endpoint_url)
    try:
        for i in range(0, len(loc.keys), in_flight):
            keys = loc.keys[i : i + in_flight]
            bodies = loop.run_until_complete(_get_all(store, keys))
            for key, body in zip(keys, bodies, strict=True):
                where = f"{loc.url.rstrip('/')}/{key}"
                yield conform(pq.read_table(io.BytesIO(body)), where).select(_READ_COLUMNS)
    finally:
        loop.run_until_complete(store.close())
        loop.close()


def arrow_facts(loc: UsageLocation, on_chunk: Callable[[int], None] | None = None) -> pa.Table:
    """Facts of the records at `loc`, computed in this process."""
    local = loc.url.startswith("file:")
    try:
        return sum_chunks(_local_chunks(loc) if local else _s3_chunks(loc), on_chunk)
    except UsageInputError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise UsageInputError(f"cannot read the usage records under {loc.url}: {exc}") from exc
