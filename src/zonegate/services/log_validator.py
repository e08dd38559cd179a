"""Kafka's produce-time record rules (what Kafka's LogValidator does), with no I/O.

`validate` takes one partition's records as the producer sent them, the topic's
`ProduceRules` (parsed once, services/topic_configs.py) and the node's time, and
answers either the batches as they will be stored or the refusal the producer
gets: Kafka's error code, a message and, for the per-record rules, each offending
record by its index in the batch (KIP-467's record_errors).

The rules, in the order they are applied (the first broken one answers):
- the batches' framing (records/batch.py `validate_batches`): magic 2, lengths,
  CRC32C, record count, codec; CORRUPT_MESSAGE;
- each batch within max.message.bytes (MESSAGE_TOO_LARGE), not a control batch
  (INVALID_RECORD: only coordinators write markers, as Kafka's LogValidator says to
  clients), nor a producer id's batch with a negative base sequence (INVALID_RECORD,
  Kafka's message). Transactional batches pass; their transactional id is the produce
  handler's to check, and whether they may open a transaction the leader's (KIP-890);
- then batch by batch: a compacted topic's records must have keys
  (INVALID_RECORD); CreateTime records within the topic's timestamp window
  (INVALID_TIMESTAMP), or the batch stamped for LogAppendTime; the batch
  recompressed when the topic names a codec.

Batches are stored as received otherwise; a compressed one is decompressed only
to read what the topic asks of its records (docs/storage.md, "Timestamps").
Sequence numbers of idempotent producers are the leader's to check, not these.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.records.batch import BatchHeader, CorruptBatch, validate_batches
from zonegate.records.rewrite import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    keyless_records,
    recompress,
    record_times,
    stamp,
)
from zonegate.storage.topic_rules import ProduceRules

RecordErrors = tuple[tuple[int, str | None], ...]  # (record index in its batch, message)


# Not frozen: a frozen dataclass's __init__ costs a setattr call per field, on every
# produce batch (records/batch.py); nothing changes a StoredBatch after it is made.
@dataclass(slots=True)
class StoredBatch:
    """A batch as it is stored: its bytes (rewritten when the topic asks), its header as
    received (the producer's id, epoch and sequence, its record count), and the max
    timestamp of its records."""

    data: bytes
    header: BatchHeader
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class Accepted:
    batches: tuple[StoredBatch, ...]
    log_append_time: int = -1  # the node's time for a LogAppendTime topic, else -1


@dataclass(frozen=True, slots=True)
class Refused:
    """What the producer is answered for the partition; nothing of it is stored."""

    error: ErrorCode
    message: str
    record_errors: RecordErrors = ()


def validate(
    records: bytes | None, rules: ProduceRules, now: int, *, topic_partition: str
) -> Accepted | Refused:
    """One partition's records checked against `rules` at wall time `now` (ms);
    `topic_partition` ("topic-0") is named in the compacted topic's message, as Kafka's."""
    if not records:
        return Refused(ErrorCode.corrupt_message, "no record data")
    try:
        return _validate(records, rules, now, topic_partition)
    except CorruptBatch as exc:
        return Refused(ErrorCode.corrupt_message, str(exc))


def _validate(
    records: bytes, rules: ProduceRules, now: int, topic_partition: str
) -> Accepted | Refused:
    max_bytes = rules.max_message_bytes
    times: list[tuple[int, int] | None] = []
    headers = validate_batches(records, times)
    for h in headers:
        if h.size > max_bytes:
            return Refused(
                ErrorCode.message_too_large,
                f"batch of {h.size} bytes exceeds max.message.bytes={max_bytes}",
            )
        if h.is_control:
            return Refused(
                ErrorCode.invalid_record,
                f"Clients are not allowed to write control records in topic partition "
                f"{topic_partition}",
            )
        if h.producer_id >= 0 and h.base_sequence < 0:
            return Refused(
                ErrorCode.invalid_record,
                f"Invalid sequence number {h.base_sequence} in record batch with producerId "
                f"{h.producer_id} in topic partition {topic_partition}",
            )
    before, after = rules.timestamp_before_max_ms, rules.timestamp_after_max_ms
    out: list[StoredBatch] = []
    pos = 0
    for h, span in zip(headers, times, strict=True):
        data = records[pos : pos + h.size]
        pos += h.size
        if rules.keys_required and (keyless := keyless_records(h, data, max_bytes)):
            window = None if rules.log_append_time else (now, before, after)
            return _refuse_keyless(h, data, max_bytes, keyless, window, topic_partition)
        if rules.log_append_time:
            stamped = bytearray(data)
            stamp(stamped, LOG_APPEND_TIME, now)
            data, max_ts = bytes(stamped), now
        else:
            if span is None:  # compressed: its records must be read
                ts = record_times(h, data, max_bytes)
                span = (min(ts), max(ts))
            lo, max_ts = span
            if lo < now - before or max_ts > now + after:
                return _refuse_timestamps(h, data, max_bytes, now, before, after, len(out))
            # The header's max timestamp is the producer's word; the records' is kept.
            if max_ts != h.max_timestamp or h.timestamp_type != CREATE_TIME:
                stamped = bytearray(data)
                stamp(stamped, CREATE_TIME, max_ts)
                data = bytes(stamped)
        if rules.codec is not None and rules.codec != h.compression:
            data = recompress(h, data, rules.codec, max_bytes, rules.levels)
        out.append(StoredBatch(data, h, max_ts))
    return Accepted(tuple(out), now if rules.log_append_time else -1)


def _refuse_keyless(
    h: BatchHeader,
    data: bytes,
    max_bytes: int,
    keyless: list[int],
    window: tuple[int, int, int] | None,
    topic_partition: str,
) -> Refused:
    """INVALID_RECORD naming each record without a key (KIP-467), as Kafka's
    LogValidator answers a batch for a compacted topic (validateKey, then
    processRecordErrors); a keyed record of the batch outside the timestamp window
    (CreateTime: `window` is (now, before, after)) is named too, and then the error
    is INVALID_TIMESTAMP, as there."""
    message = (
        f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    )
    errors = {i: message for i in keyless}
    if window is not None:
        now, before, after = window
        for i, t in enumerate(record_times(h, data, max_bytes)):
            if i not in errors and not now - before <= t <= now + after:
                errors[i] = (
                    f"Timestamp {t} of message with offset {i} is out of range. The "
                    f"timestamp should be within [{now - before}, {now + after}]"
                )
    listed: RecordErrors = tuple(sorted(errors.items()))
    if len(errors) > len(keyless):
        return Refused(
            ErrorCode.invalid_timestamp,
            "One or more records have been rejected due to invalid timestamp",
            listed,
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in listed[:3])
    return Refused(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(listed)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]",
        listed,
    )


def _refuse_timestamps(
    h: BatchHeader,
    data: bytes,
    max_bytes: int,
    now: int,
    before: int,
    after: int,
    batch_index: int,
) -> Refused:
    """INVALID_TIMESTAMP naming each record outside the window (KIP-467), as Kafka's
    broker answers a batch with records older than message.timestamp.before.max.ms or
    newer than message.timestamp.after.max.ms."""
    errors: list[tuple[int, str | None]] = []
    limits: set[str] = set()
    for i, t in enumerate(record_times(h, data, max_bytes)):
        if t < now - before:
            limits.add(f"message.timestamp.before.max.ms={before}")
            errors.append((i, f"timestamp {t} of record {i} is more than {before} ms old"))
        elif t > now + after:
            limits.add(f"message.timestamp.after.max.ms={after}")
            errors.append((i, f"timestamp {t} of record {i} is more than {after} ms in the future"))
    return Refused(
        ErrorCode.invalid_timestamp,
        f"batch {batch_index}: {len(errors)} record(s) have timestamps outside the "
        f"topic's window ({', '.join(sorted(limits))}); the node's time is {now}",
        tuple(errors),
    )
