"""Decodes the records of batches: the slow path (ListOffsets by timestamp, tests, tools).

Produce and fetch never come here; they move batches as bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from zonegate.records.batch import HEADER_SIZE, BatchHeader, CorruptBatch, validate_batches
from zonegate.records.codecs import CodecError, decompress


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


# A compressed body may grow to this many times its size, or to the topic's
# max.message.bytes if that is more: producers bound the uncompressed size of
# their batches (librdkafka's batch.size, Java's by estimate), so a legitimate
# batch fits, while a few kilobytes claiming gigabytes are refused before they
# are made. docs/robustness.md has the reasoning.
EXPANSION_LIMIT = 16
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def body_limit(compressed_bytes: int, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> int:
    """The most bytes the body of a compressed batch may decompress to."""
    return max(max_message_bytes, EXPANSION_LIMIT * compressed_bytes)


def decode_records(
    batch: bytes | memoryview, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> list[Record]:
    """The records of `batch`, validated first, with absolute offsets and timestamps.

    A blob of several batches gives the records of all of them, in order.
    Raises CorruptBatch for anything that does not decode exactly, and for a
    compressed body larger than `body_limit` allows.
    """
    data = bytes(batch)
    out: list[Record] = []
    pos = 0
    for h in validate_batches(data, cleaned=True):
        out += _decode(h, data[pos + HEADER_SIZE : pos + h.size], max_message_bytes)
        pos += h.size
    return out


def _decode(h: BatchHeader, payload: bytes, max_message_bytes: int) -> list[Record]:
    try:
        body = decompress(h.compression, payload, body_limit(len(payload), max_message_bytes))
    except CodecError as exc:
        raise CorruptBatch(str(exc)) from exc
    reader = BodyReader(body)
    out = []
    for i in range(h.record_count):
        try:
            length = reader.varint()
            end = reader.pos + length
            reader.skip(1)  # record attributes: unused in v2
            ts_delta = reader.varint()
            off_delta = reader.varint()
            key = reader.bytes()
            value = reader.bytes()
            n_headers = reader.varint()
            if n_headers < 0:
                raise CorruptBatch(f"header count {n_headers}")
            headers = []
            for _ in range(n_headers):
                hk = reader.bytes()
                if hk is None:
                    raise CorruptBatch("a header has a null key")
                headers.append((hk.decode("utf-8", "replace"), reader.bytes()))
            if reader.pos != end:
                raise CorruptBatch(f"length {length} does not match its fields")
        except CorruptBatch as exc:
            raise CorruptBatch(f"record {i} of batch at offset {h.base_offset}: {exc}") from None
        # LogAppendTime: the broker's time, kept once in the header, is every record's.
        ts = h.max_timestamp if h.timestamp_type == 1 else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, tuple(headers)))
    if reader.pos != len(body):
        raise CorruptBatch(
            f"batch at offset {h.base_offset} has {len(body) - reader.pos} bytes "
            f"after its {h.record_count} records"
        )
    return out


class BodyReader:
    """A cursor over a decompressed body; every read is bounds-checked."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def varint(self) -> int:
        raw = 0
        shift = 0
        data, pos = self.data, self.pos
        while True:
            if pos >= len(data):
                raise CorruptBatch("varint runs past the end of the records")
            b = data[pos]
            pos += 1
            raw |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return (raw >> 1) ^ -(raw & 1)
            shift += 7
            if shift > 63:
                raise CorruptBatch("varint is longer than 10 bytes")

    def skip(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise CorruptBatch("record runs past the end of the records")
        self.pos += n

    def bytes(self) -> bytes | None:
        n = self.varint()
        if n < 0:
            return None
        start = self.pos
        self.skip(n)
        return self.data[start : self.pos]
