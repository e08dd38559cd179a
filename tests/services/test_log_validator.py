"""The record validator's rules, one by one: what is stored, and what a producer is told.

Pure: bytes, a topic's rules and a time in; no WAL, no catalog, no network.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest
from crc32c import crc32c
from kio.schema.errors import ErrorCode

from zonegate.records.batch import CRC_OFFSET, CRC_START, HEADER_SIZE, validate_batches
from zonegate.records.build import RecordSpec, build_batch
from zonegate.records.codecs import CompressionLevels, compress
from zonegate.records.decode import decode_records
from zonegate.services.log_validator import Accepted, Refused, validate
from zonegate.services.topic_configs import topic_rules
from zonegate.storage.topic_rules import ProduceRules

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
KAFKA = topic_rules({}).produce  # every config at Kafka's default
HOUR = 3_600_000
WINDOW = dataclasses.replace(KAFKA, timestamp_before_max_ms=HOUR, timestamp_after_max_ms=HOUR)
LOG_APPEND = dataclasses.replace(KAFKA, log_append_time=True)
COMPACTED = dataclasses.replace(WINDOW, keys_required=True)


def _records(n: int = 3, ts: int = NOW, key: bool = True) -> list[RecordSpec]:
    return [(b"k%d" % i if key else None, b"value %d" % i, (), ts + i) for i in range(n)]


def _accepted(records: bytes | None, rules: ProduceRules = KAFKA, now: int = NOW) -> Accepted:
    out = validate(records, rules, now, topic_partition="t-0")
    assert isinstance(out, Accepted), out
    return out


def _refused(records: bytes | None, rules: ProduceRules = KAFKA, now: int = NOW) -> Refused:
    out = validate(records, rules, now, topic_partition="t-0")
    assert isinstance(out, Refused), out
    return out


def _fix_crc(batch: bytearray) -> bytes:
    """Recomputes the CRC so a rule behind the CRC check is reached."""
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


# -- rules parsed from configs ---------------------------------------------------------


def test_rules_are_parsed_from_the_configs_in_force() -> None:
    assert KAFKA == ProduceRules(
        max_message_bytes=1048588,
        log_append_time=False,
        timestamp_before_max_ms=2**63 - 1,
        timestamp_after_max_ms=3_600_000,
        keys_required=False,
        codec=None,
    )
    rules = topic_rules(
        {
            "max.message.bytes": "500",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact,delete",
            "compression.type": "zstd",
        },
        {"message.timestamp.before.max.ms": "10", "max.message.bytes": "7"},
    ).produce
    assert rules == ProduceRules(500, True, 10, 3_600_000, True, 4)
    assert topic_rules({"compression.type": "uncompressed"}).produce.codec == 0
    assert not topic_rules({"cleanup.policy": "delete"}).produce.keys_required


# -- framing: magic, CRC, lengths, counts, codec ---------------------------------------


def _damaged(what: str) -> bytes:
    batch = bytearray(build_batch(_records()))
    if what == "magic":
        batch[16] = 1
    elif what == "crc":
        batch[-1] ^= 0xFF
    elif what == "short length":
        struct.pack_into(">i", batch, 8, 40)
    elif what == "long length":
        struct.pack_into(">i", batch, 8, len(batch))
    elif what == "trailing bytes":
        batch += b"\x00" * 10  # too few to name a magic
    elif what == "count":
        struct.pack_into(">i", batch, 57, 4)  # record count 4, last offset delta 2
        return _fix_crc(batch)
    elif what == "records":
        struct.pack_into(">ii", batch, 23, 3, 0)  # last offset delta 3 ...
        struct.pack_into(">i", batch, 57, 4)  # ... and 4 records declared, 3 held
        return _fix_crc(batch)
    elif what == "no records":
        struct.pack_into(">i", batch, 23, -1)
        struct.pack_into(">i", batch, 57, 0)
        return _fix_crc(batch)
    elif what == "codec":
        struct.pack_into(">h", batch, 21, 6)
        return _fix_crc(batch)
    return bytes(batch)


@pytest.mark.parametrize(
    ("what", "says"),
    [
        ("magic", "has magic 1; only magic 2 is supported"),
        ("crc", "fails its CRC32C check"),
        ("short length", "below the minimum of 49"),
        ("long length", "bytes past the end of the records"),
        ("trailing bytes", "too few for a batch header"),
        ("count", "has last offset delta 2 but 4 records"),
        ("records", "declares 4 records but holds 3"),
        ("no records", "has record count 0"),
        ("codec", "unknown compression codec 6"),
    ],
)
def test_a_damaged_batch_is_corrupt_message(what: str, says: str) -> None:
    refused = _refused(_damaged(what))
    assert refused.error == ErrorCode.corrupt_message
    assert says in refused.message
    assert refused.record_errors == ()


@pytest.mark.parametrize("records", [None, b""])
def test_no_records_is_corrupt_message(records: bytes | None) -> None:
    assert _refused(records) == Refused(ErrorCode.corrupt_message, "no record data")


def test_a_compressed_body_that_does_not_decompress_is_corrupt_message() -> None:
    # CreateTime: the records' timestamps must be read, so the body is opened.
    batch = bytearray(build_batch(_records(), compression=1))
    batch[70:80] = b"\xff" * 10  # inside the gzip stream
    refused = _refused(_fix_crc(batch))
    assert refused.error == ErrorCode.corrupt_message


# -- max.message.bytes, transactional and control batches -------------------------------


def test_a_batch_over_max_message_bytes_is_too_large() -> None:
    batch = build_batch(_records())
    exact = dataclasses.replace(KAFKA, max_message_bytes=len(batch))
    assert _accepted(batch, exact).batches[0].data == batch
    smaller = dataclasses.replace(KAFKA, max_message_bytes=len(batch) - 1)
    assert _refused(batch, smaller) == Refused(
        ErrorCode.message_too_large,
        f"batch of {len(batch)} bytes exceeds max.message.bytes={len(batch) - 1}",
    )


def test_the_size_rule_is_per_batch() -> None:
    one = build_batch(_records())
    rules = dataclasses.replace(KAFKA, max_message_bytes=len(one))
    assert len(_accepted(one + one, rules).batches) == 2


def test_control_batches_from_clients_are_invalid_record() -> None:
    """Kafka's LogValidator: only coordinators write markers; a client's control batch is
    INVALID_RECORD with Kafka's message, alone or after a good batch."""
    control = bytearray(build_batch(_records()))
    struct.pack_into(">h", control, 21, 0x20)
    for batch in (_fix_crc(control), build_batch(_records()) + _fix_crc(control)):
        assert _refused(batch) == Refused(
            ErrorCode.invalid_record,
            "Clients are not allowed to write control records in topic partition t-0",
        )


def test_transactional_batches_are_accepted_as_sent() -> None:
    """A transactional batch is stored as received; its transactional id is the produce
    handler's to check, whether it may open a transaction the leader's (KIP-890)."""
    txn = build_batch(
        _records(), producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    stored = _accepted(txn).batches[0]
    assert stored.data == txn
    assert stored.header.is_transactional


def test_a_producer_ids_batch_needs_a_sequence() -> None:
    """Kafka's LogValidator: a batch carrying a producer id with a negative base sequence
    is INVALID_RECORD; without a producer id, -1 is the norm."""
    bad = build_batch(_records(), producer_id=7, producer_epoch=0, base_sequence=-1)
    assert _refused(bad) == Refused(
        ErrorCode.invalid_record,
        "Invalid sequence number -1 in record batch with producerId 7 in topic partition t-0",
    )
    _accepted(build_batch(_records(), producer_id=7, producer_epoch=0, base_sequence=0))
    _accepted(build_batch(_records()))


def test_framing_is_checked_before_size_and_kind() -> None:
    """A request with a too large batch and a damaged one is answered for the damage."""
    big = build_batch(_records(50))
    rules = dataclasses.replace(KAFKA, max_message_bytes=len(big) - 1)
    assert _refused(big + _damaged("crc"), rules).error == ErrorCode.corrupt_message


# -- CreateTime: the window, and the header's max timestamp ----------------------------


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_create_time_records_inside_the_window_are_stored_as_sent(codec: int) -> None:
    batch = build_batch(
        [(b"a", b"1", (), NOW - HOUR), (b"b", b"2", (), NOW + HOUR)], compression=codec
    )
    out = _accepted(batch, WINDOW)
    assert out.log_append_time == -1
    (stored,) = out.batches
    assert stored.data == batch
    assert stored.max_timestamp == NOW + HOUR


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_records_outside_the_window_are_each_named(codec: int) -> None:
    old, new = NOW - HOUR - 1, NOW + HOUR + 1
    good = build_batch(_records(1))
    bad = build_batch(
        [(b"a", b"", (), old), (b"b", b"", (), NOW), (b"c", b"", (), new)], compression=codec
    )
    refused = _refused(good + bad, WINDOW)
    assert refused == Refused(
        ErrorCode.invalid_timestamp,
        "batch 1: 2 record(s) have timestamps outside the topic's window "
        f"(message.timestamp.after.max.ms={HOUR}, message.timestamp.before.max.ms={HOUR}); "
        f"the node's time is {NOW}",
        (
            (0, f"timestamp {old} of record 0 is more than {HOUR} ms old"),
            (2, f"timestamp {new} of record 2 is more than {HOUR} ms in the future"),
        ),
    )


def test_only_the_limit_broken_is_named() -> None:
    refused = _refused(build_batch(_records(2, ts=NOW - 2 * HOUR)), WINDOW)
    assert f"(message.timestamp.before.max.ms={HOUR})" in refused.message
    assert [i for i, _ in refused.record_errors] == [0, 1]


def test_a_wrong_header_max_timestamp_is_set_from_the_records() -> None:
    batch = bytearray(build_batch(_records(3)))
    struct.pack_into(">q", batch, 35, -1)  # the header's max timestamp: not trusted
    (stored,) = _accepted(_fix_crc(batch)).batches
    (h,) = validate_batches(stored.data)
    assert (h.timestamp_type, h.max_timestamp) == (0, NOW + 2)
    assert stored.max_timestamp == NOW + 2


def test_a_producers_log_append_time_on_a_create_time_topic_becomes_create_time() -> None:
    batch = build_batch(_records(2), timestamp_type=1)
    (stored,) = _accepted(batch).batches
    (h,) = validate_batches(stored.data)
    assert (h.timestamp_type, h.max_timestamp) == (0, NOW + 1)


# -- LogAppendTime -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", [0, 2])
def test_log_append_time_stamps_every_batch_with_the_nodes_time(codec: int) -> None:
    ancient = build_batch(_records(2, ts=1000), compression=codec)
    strict = dataclasses.replace(LOG_APPEND, timestamp_before_max_ms=0)  # not applied
    out = _accepted(ancient + ancient, strict)
    assert out.log_append_time == NOW
    for stored in out.batches:
        (h,) = validate_batches(stored.data)
        assert (h.timestamp_type, h.max_timestamp, h.compression) == (1, NOW, codec)
        assert stored.max_timestamp == NOW
        stamped = decode_records(stored.data)
        assert {r.timestamp for r in stamped} == {NOW}
        assert [(r.key, r.value) for r in stamped] == [(b"k0", b"value 0"), (b"k1", b"value 1")]


# -- compacted topics: keys required -----------------------------------------------------


def _keyless_message() -> str:
    return "Compacted topic cannot accept message without key in topic partition t-0"


@pytest.mark.parametrize("codec", [0, 3])
def test_a_compacted_topic_refuses_records_without_keys(codec: int) -> None:
    recs = _records(5)
    for i in (1, 2, 3, 4):
        recs[i] = (None, *recs[i][1:])
    refused = _refused(build_batch(recs, compression=codec), COMPACTED)
    m = _keyless_message()
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i in (1, 2, 3))
    assert refused == Refused(
        ErrorCode.invalid_record,
        "One or more records have been rejected due to 4 record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        tuple((i, m) for i in (1, 2, 3, 4)),
    )


def test_a_keyless_record_beside_one_out_of_the_window_is_invalid_timestamp() -> None:
    late = NOW + HOUR + 5
    batch = build_batch([(None, b"x", (), NOW), (b"k", b"y", (), late)])
    assert _refused(batch, COMPACTED) == Refused(
        ErrorCode.invalid_timestamp,
        "One or more records have been rejected due to invalid timestamp",
        (
            (0, _keyless_message()),
            (
                1,
                f"Timestamp {late} of message with offset 1 is out of range. The timestamp "
                f"should be within [{NOW - HOUR}, {NOW + HOUR}]",
            ),
        ),
    )


def test_log_append_time_compacted_topic_names_only_the_keyless() -> None:
    rules = dataclasses.replace(COMPACTED, log_append_time=True)
    batch = build_batch([(None, b"x", (), 5), (b"k", b"y", (), 6)])
    refused = _refused(batch, rules)
    assert refused.error == ErrorCode.invalid_record
    assert refused.record_errors == ((0, _keyless_message()),)


def test_a_compacted_topic_takes_keyed_records_and_the_others_keyless_ones() -> None:
    keyed = build_batch(_records(3))
    assert _accepted(keyed, COMPACTED).batches[0].data == keyed
    assert _accepted(build_batch(_records(3, key=False)), WINDOW).batches


def test_batches_are_judged_in_order() -> None:
    """The first broken rule answers: here the keyless first batch, not the late second."""
    keyless = build_batch(_records(1, key=False))
    late = build_batch(_records(1, ts=NOW + 2 * HOUR))
    assert _refused(keyless + late, COMPACTED).error == ErrorCode.invalid_record
    assert _refused(late + keyless, COMPACTED).message.startswith("batch 0: ")


# -- compression.type --------------------------------------------------------------------


@pytest.mark.parametrize(("sent", "topic"), [(0, 4), (1, 0), (2, 3), (4, 1)])
def test_a_topics_codec_recompresses_what_differs(sent: int, topic: int) -> None:
    batch = build_batch(_records(4), compression=sent, producer_id=9, base_sequence=3)
    (stored,) = _accepted(batch, dataclasses.replace(KAFKA, codec=topic)).batches
    (h,) = validate_batches(stored.data)
    assert (h.compression, h.producer_id, h.base_sequence, h.record_count) == (topic, 9, 3, 4)
    assert decode_records(stored.data) == decode_records(batch)
    assert stored.header.compression == sent  # the header as the producer sent it


@pytest.mark.parametrize(
    ("codec", "levels"),
    [
        (1, CompressionLevels(gzip=1)),
        (1, CompressionLevels(gzip=9)),
        (3, CompressionLevels(lz4=1)),
        (3, CompressionLevels(lz4=17)),
        (4, CompressionLevels(zstd=-5)),
        (4, CompressionLevels(zstd=19)),
    ],
)
def test_a_topics_codec_compresses_at_the_topics_level(
    codec: int, levels: CompressionLevels
) -> None:
    """compression.{gzip,lz4,zstd}.level (KIP-390): the body is what that codec makes
    at that level, not at the library's default."""
    records = [(b"k%d" % i, b"value " * 200, (), NOW) for i in range(20)]
    batch = build_batch(records, compression=0)
    rules = dataclasses.replace(KAFKA, codec=codec, levels=levels)
    (stored,) = _accepted(batch, rules).batches
    body = bytes(batch[HEADER_SIZE:])
    assert stored.data[HEADER_SIZE:] == compress(codec, body, levels)
    assert compress(codec, body, levels) != compress(codec, body)  # the level matters
    assert decode_records(stored.data) == decode_records(batch)


def test_the_producers_codec_or_the_same_one_is_kept_as_sent() -> None:
    batch = build_batch(_records(4), compression=3)
    assert _accepted(batch).batches[0].data == batch
    assert _accepted(batch, dataclasses.replace(KAFKA, codec=3)).batches[0].data == batch


# -- idempotent producers ----------------------------------------------------------------


def test_producer_fields_reach_the_leader_untouched() -> None:
    """Sequence numbers are the leader's to check (duplicates, gaps, fencing): the
    validator passes each batch's producer id, epoch and base sequence on as sent."""
    first = build_batch(_records(2), producer_id=42, producer_epoch=3, base_sequence=0)
    second = build_batch(_records(5), producer_id=42, producer_epoch=3, base_sequence=2)
    out = _accepted(first + second, LOG_APPEND)
    assert [
        (b.header.producer_id, b.header.producer_epoch, b.header.base_sequence) for b in out.batches
    ] == [(42, 3, 0), (42, 3, 2)]
    assert [b.header.record_count for b in out.batches] == [2, 5]
