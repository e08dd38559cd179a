"""Produce (key 0), v3-11: validate, stage in the WAL, have the leader sequence, then answer.

Every batch is checked (magic 2, CRC32C, lengths, record count) before
anything is staged; a bad batch fails only its partition with CORRUPT_MESSAGE.
Batches are stored as received, never decompressed. The answer waits until
the WAL object holding the batches is in the object store and the leader has
committed their index entries: acks=1 and acks=-1 both mean "durable and
indexed". acks=0 is processed the same way but never answered.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch, AppendResult
from zonegate.proxy.codec import EncodedBody
from zonegate.proxy.context import RequestContext
from zonegate.proxy.registry import REGISTRY
from zonegate.records.batch import BatchHeader, CorruptBatch, validate_batches
from zonegate.services.topic_configs import effective
from zonegate.wal_s3.wal_writer import WalEntryLocation

log = logging.getLogger(__name__)
API_KEY = 0


@dataclass(slots=True)
class _PartitionWork:
    topic: str
    index: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    stream_id: int = -1
    headers: list[BatchHeader] | None = None
    staged: list[asyncio.Future[WalEntryLocation]] | None = None
    result: AppendResult | None = None


def _check(ctx: RequestContext, work: _PartitionWork, records: bytes | None) -> None:
    node = ctx.node
    topic = node.catalog.get(work.topic)
    if topic is None or not 0 <= work.index < len(topic.partitions):
        work.error = ErrorCode.unknown_topic_or_partition
        return
    if not records:
        work.error, work.message = ErrorCode.corrupt_message, "no record data"
        return
    max_bytes = int(effective(topic.configs, "max.message.bytes"))
    try:
        headers = validate_batches(records)
    except CorruptBatch as exc:
        work.error, work.message = ErrorCode.corrupt_message, str(exc)
        log.info("produce to %s-%d rejected: %s", work.topic, work.index, exc)
        return
    for h in headers:
        if h.size > max_bytes:
            work.error = ErrorCode.message_too_large
            work.message = f"batch of {h.size} bytes exceeds max.message.bytes={max_bytes}"
            return
        if h.is_transactional or h.is_control:
            work.error = ErrorCode.invalid_record
            work.message = "transactional batches are not supported"
            return
    work.stream_id = topic.partitions[work.index].stream_id
    work.headers = headers


@REGISTRY.register(API_KEY, 3, 11)
async def handle(ctx: RequestContext, request: Any) -> Any:
    node = ctx.node
    works: list[_PartitionWork] = []
    # Validate and stage every partition with no await in between: the WAL keeps
    # the order in which requests staged their batches, and the leader relies on it.
    for topic_data in request.topic_data:
        for pd in topic_data.partition_data:
            work = _PartitionWork(topic_data.name, pd.index)
            works.append(work)
            _check(ctx, work, pd.records)
            if work.headers is None:
                continue
            records: bytes = pd.records
            staged = []
            pos = 0
            for h in work.headers:
                staged.append(node.wal.append(work.stream_id, records[pos : pos + h.size]))
                pos += h.size
            work.staged = staged

    # The WAL resolves futures in seal order, so awaiting them in staging order
    # suspends about once (they mostly share one object), without gather's wrapper.
    locations: list[WalEntryLocation | BaseException] = []
    try:
        for w in works:
            for f in w.staged or ():
                try:
                    locations.append(await f)
                except Exception as exc:
                    locations.append(exc)
    except asyncio.CancelledError:
        # The connection went away: no one will read the rest (as gather would do).
        for w in works:
            for f in w.staged or ():
                f.cancel()
        raise
    appends: list[AppendBatch] = []
    owners: list[_PartitionWork] = []
    it = iter(locations)
    for w in works:
        if not w.staged or w.headers is None:
            continue
        locs = [next(it) for _ in w.staged]
        failed = next((x for x in locs if isinstance(x, BaseException)), None)
        if failed is not None:
            log.warning("WAL upload failed for %s-%d: %s", w.topic, w.index, failed)
            w.error, w.message = ErrorCode.kafka_storage_error, str(failed)
            continue
        for h, loc in zip(w.headers, locs, strict=True):
            assert isinstance(loc, WalEntryLocation)
            appends.append(
                AppendBatch(
                    stream_id=w.stream_id,
                    leader_epoch=ANY_EPOCH,
                    object_key=loc.object_key,
                    position=loc.position,
                    length=loc.length,
                    record_count=h.record_count,
                    max_timestamp=h.max_timestamp,
                    producer_id=h.producer_id,
                    producer_epoch=h.producer_epoch,
                    base_sequence=h.base_sequence,
                )
            )
            owners.append(w)
    if appends:
        try:
            results = await node.leader.append(appends)
        except Exception as exc:
            log.exception("leader append failed")
            results = [AppendResult(ErrorCode.kafka_storage_error)] * len(appends)
            for w in owners:
                w.message = str(exc)
        for w, r in zip(owners, results, strict=True):
            # A partition with several batches answers with its first batch's offset
            # and the first error, as Kafka does.
            if w.result is None:
                w.result = r
            if r.error != ErrorCode.none and w.error == ErrorCode.none:
                w.error = r.error

    if request.acks == 0:
        return None
    return _encode_answer(ctx.api_version, works)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# index, error code, base offset, log append time (-1: CreateTime) [, log start offset (v5+)]
_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_NO_RECORD_ERRORS = {False: _I32.pack(0), True: b"\x01"}


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string: int16 length, or unsigned varint length + 1 when flexible."""
    if value is None:
        return b"\x00" if flexible else _I16.pack(-1)
    raw = value.encode()
    return (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _encode_answer(version: int, works: list[_PartitionWork]) -> EncodedBody:
    """ProduceResponse v3-11, encoded by hand: the same bytes kio writes for the same
    answer (tests/proxy/test_produce_answer.py checks every version), at a fraction
    of the CPU. No throttling, log append time -1 (CreateTime), no record errors,
    and the v10+ tagged fields (current leader, node endpoints) left out, as kio
    leaves out defaults."""
    flexible = version >= 9
    by_topic: dict[str, list[_PartitionWork]] = {}
    for w in works:
        by_topic.setdefault(w.topic, []).append(w)
    out: list[bytes] = [_uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))]
    for topic, parts in by_topic.items():
        out.append(_string(topic, flexible))
        out.append(_uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts)))
        for w in parts:
            r = w.result
            ok = w.error == ErrorCode.none and r is not None
            base = r.base_offset if ok and r is not None else -1
            if version >= 5:
                start = r.log_start_offset if ok and r is not None else -1
                out.append(_PARTITION_V5.pack(w.index, w.error, base, -1, start))
            else:
                out.append(_PARTITION_V3.pack(w.index, w.error, base, -1))
            if version >= 8:
                out.append(_NO_RECORD_ERRORS[flexible])
                out.append(_string(w.message, flexible))
            if flexible:
                out.append(b"\x00")  # partition: no tagged fields
        if flexible:
            out.append(b"\x00")  # topic: no tagged fields
    out.append(_I32.pack(0))  # throttle_time_ms
    if flexible:
        out.append(b"\x00")  # response: no tagged fields
    return EncodedBody(flexible, b"".join(out))
