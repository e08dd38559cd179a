"""Writes the node's usage records (docs/usage-records.md) as Parquet into the object store.

Every interval (`flush`, run by the node's supervisor) the accounting deltas,
the object-store request deltas (one `s3` row per S3 purpose) and the bytes the
node's led partitions reference become one Parquet object under `usage/date=YYYY-MM-DD/node=N/`.
Nothing else is needed to compute traffic and cost later.
"""

from __future__ import annotations

import datetime
import io
import logging
import secrets
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.runtime.io_class import io_class, s3_purpose
from zonegate.storage.instrumented import InstrumentedObjectStore, PurposeCounts
from zonegate.usage.accounting import Accounting
from zonegate.usage.schema import ARROW_SCHEMA, SCHEMA_VERSION

log = logging.getLogger(__name__)
# One definition of the record schema, shared with the report that reads it
# (the module imports only pyarrow, never pyspark).
USAGE_SCHEMA = ARROW_SCHEMA


class UsageWriter:
    def __init__(
        self,
        store: InstrumentedObjectStore,
        accounting: Accounting,
        *,
        cluster: str,
        stored_bytes: Callable[[], int],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._clock = clock
        self._store = store
        self._acc = accounting
        self._cluster = cluster
        self._stored_bytes = stored_bytes
        self._start_ms = clock.wall_ms()
        self._last_s3 = store.purpose_counts()
        self.objects_written = 0

    def _rows(self, end_ms: int) -> list[dict[str, Any]]:
        acc = self._acc
        common = {
            "schema_version": SCHEMA_VERSION,
            "interval_start": self._start_ms,
            "interval_end": end_ms,
            "cluster": self._cluster,
            "node_id": acc.node_id,
            "node_zone": acc.node_zone,
        }
        zero_s3 = {
            "s3_put_requests": 0,
            "s3_get_requests": 0,
            "s3_other_requests": 0,
            "s3_put_bytes": 0,
            "s3_get_bytes": 0,
            "stored_bytes": 0,
            "s3_purpose": "",
            "s3_list_requests": 0,
            "s3_delete_requests": 0,
            "principal": "",
            "cross_zone_reason": "",
        }
        rows: list[dict[str, Any]] = []
        for k, c in acc.drain_interval().items():
            rows.append(
                {
                    **common,
                    "kind": k.kind,
                    "client_zone": k.client_zone,
                    "leader_zone": k.leader_zone,
                    "peer_zone": k.peer_zone,
                    "topic": k.topic,
                    "client_id": k.client_id,
                    "bytes_in": c.bytes_in,
                    "bytes_out": c.bytes_out,
                    "requests": c.requests,
                    **zero_s3,
                    "principal": k.principal,
                    "cross_zone_reason": k.cross_zone_reason,
                }
            )
        now = self._store.purpose_counts()
        for purpose, counts in sorted(now.items()):
            d = counts.minus(self._last_s3.get(purpose, PurposeCounts()))
            other = d.list_requests + d.delete_requests
            if not any((d.put_requests, d.get_requests, other)):
                continue
            rows.append(
                {
                    **common,
                    "kind": "s3",
                    "client_zone": "",
                    "leader_zone": "",
                    "peer_zone": acc.node_zone,
                    "topic": "",
                    "client_id": "",
                    "bytes_in": d.get_bytes,
                    "bytes_out": d.put_bytes,
                    "requests": d.put_requests + d.get_requests + other,
                    **zero_s3,
                    "s3_put_requests": d.put_requests,
                    "s3_get_requests": d.get_requests,
                    "s3_other_requests": other,
                    "s3_put_bytes": d.put_bytes,
                    "s3_get_bytes": d.get_bytes,
                    "s3_purpose": purpose,
                    "s3_list_requests": d.list_requests,
                    "s3_delete_requests": d.delete_requests,
                }
            )
        self._last_s3 = now
        stored = self._stored_bytes()
        if stored:
            rows.append(
                {
                    **common,
                    "kind": "storage",
                    "client_zone": "",
                    "leader_zone": acc.node_zone,
                    "peer_zone": acc.node_zone,
                    "topic": "",
                    "client_id": "",
                    "bytes_in": 0,
                    "bytes_out": 0,
                    "requests": 0,
                    **zero_s3,
                    "stored_bytes": stored,
                }
            )
        return rows

    async def flush(self) -> str | None:
        end_ms = self._clock.wall_ms()
        rows = self._rows(end_ms)
        start_ms, self._start_ms = self._start_ms, end_ms
        if not rows:
            return None
        table = pa.Table.from_pylist(rows, schema=USAGE_SCHEMA)
        buf = io.BytesIO()
        pq.write_table(table, buf)
        day = datetime.datetime.fromtimestamp(start_ms / 1000, datetime.UTC).date().isoformat()
        key = f"usage/date={day}/node={self._acc.node_id}/{start_ms}-{secrets.token_hex(6)}.parquet"
        with io_class("housekeeping"), s3_purpose("usage_records"):
            await self._store.put(key, buf.getvalue())
        self.objects_written += 1
        return key
