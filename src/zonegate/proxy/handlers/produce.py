"""Produce (key 0), v3-12: the write path (services/write_path.py), then the answer.

A bad batch fails only its partition (CORRUPT_MESSAGE and the reason). The
answer waits until the batches are in the object store and indexed by their
partitions' leaders: acks=1 and acks=-1 both mean "durable and indexed".
acks=0 is processed the same way but never answered. A topic the principal may not
WRITE gets TOPIC_AUTHORIZATION_FAILED on each of its partitions and nothing of it is
written, as Kafka's KafkaApis.handleProduceRequest.

A request with transactional batches (the first batch of some partition has the
transactional bit, as Kafka's RequestUtils.hasTransactionalRecords looks) needs a
transactional id the principal may WRITE, else every partition is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is written, as Kafka 4. The id and the
request's version go with the batches to their leaders, which verify them with the
transaction coordinator (KIP-890: v12 adds the partition to the transaction itself).
"""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.kafka_errors import error_info
from zonegate.proxy.authz import TOPIC, TRANSACTIONAL_ID, authorize, authorized_by_name
from zonegate.proxy.codec import EncodedBody
from zonegate.proxy.context import RequestContext
from zonegate.proxy.registry import REGISTRY
from zonegate.services.api import AclOperation, ProducedPartition, ProducePartition

API_KEY = 0


@REGISTRY.register(API_KEY, 3, 12)
async def handle(ctx: RequestContext, request: Any) -> Any:
    transactional_id = request.transactional_id
    if _has_transactional_records(request) and (
        transactional_id is None
        or not authorize(ctx, AclOperation.WRITE, TRANSACTIONAL_ID, transactional_id)
    ):
        if request.acks == 0:
            return None
        return _encode_answer(
            ctx.api_version,
            [
                ProducedPartition(
                    t.name, pd.index, _TXN_DENIED, error_info(_TXN_DENIED).description
                )
                for t in request.topic_data
                for pd in t.partition_data
            ],
        )
    allowed = authorized_by_name(
        ctx, AclOperation.WRITE, TOPIC, request.topic_data, lambda t: t.name
    )
    parts = [
        ProducePartition(topic_data.name, pd.index, pd.records)
        for topic_data in request.topic_data
        if topic_data.name in allowed
        for pd in topic_data.partition_data
    ]
    answers = (
        await ctx.services.produce.produce(
            parts,
            client=ctx.client.describe(),
            transactional_id=transactional_id,
            produce_version=ctx.api_version,
        )
        if parts
        else []
    )
    if len(allowed) < len({t.name for t in request.topic_data}):
        answers = _with_refused(request, allowed, answers)
    # Kafka records the whole request's size against producer_byte_rate, after the
    # append; an acks=0 producer over its quota is muted without an answer.
    ctx.throttle.at_least(
        ctx.services.quotas.record_produce(ctx.principal, ctx.client_id or "", ctx.request_bytes)
    )
    if request.acks == 0:
        return None
    return _encode_answer(ctx.api_version, answers)


_TXN_DENIED = ErrorCode.transactional_id_authorization_failed
_TXN_DENIED_MESSAGE = error_info(_TXN_DENIED).description
_MAGIC_AT, _ATTRIBUTES_AT, _TRANSACTIONAL = 16, 21, 0x10


def _has_transactional_records(request: Any) -> bool:
    """Whether the first batch of some partition is transactional (magic 2's attributes;
    a malformed batch is the validator's to refuse)."""
    for t in request.topic_data:
        for pd in t.partition_data:
            records = pd.records
            if (
                records
                and len(records) > _ATTRIBUTES_AT + 1
                and records[_MAGIC_AT] == 2
                and records[_ATTRIBUTES_AT + 1] & _TRANSACTIONAL
            ):
                return True
    return False


def _with_refused(
    request: Any, allowed: set[str], answers: list[ProducedPartition]
) -> list[ProducedPartition]:
    """The answers in the request's order, the refused topics' partitions among them."""
    done = iter(answers)
    out = []
    for topic_data in request.topic_data:
        for pd in topic_data.partition_data:
            if topic_data.name in allowed:
                out.append(next(done))
            else:
                out.append(
                    ProducedPartition(
                        topic_data.name, pd.index, ErrorCode.topic_authorization_failed
                    )
                )
    return out


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# index, error code, base offset, log append time (-1: CreateTime) [, log start offset (v5+)]
_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")


def _record_errors(errors: tuple[tuple[int, str | None], ...], flexible: bool) -> bytes:
    """v8+ record_errors (KIP-467): (batch index, message) of each record refused."""
    if not errors:
        return b"\x01" if flexible else _I32.pack(0)
    out = [_uvarint(len(errors) + 1) if flexible else _I32.pack(len(errors))]
    for index, message in errors:
        out.append(_I32.pack(index))
        out.append(_string(message, flexible))
        if flexible:
            out.append(b"\x00")  # no tagged fields
    return b"".join(out)


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


def _encode_answer(version: int, answers: list[ProducedPartition]) -> EncodedBody:
    """ProduceResponse v3-11, encoded by hand: the same bytes kio writes for the same
    answer (tests/proxy/test_produce_answer.py checks every version), at a fraction
    of the CPU. The v10+ tagged fields (current leader, node endpoints) are left
    out, as kio leaves out defaults; the throttle time's place is remembered."""
    flexible = version >= 9
    by_topic: dict[str, list[ProducedPartition]] = {}
    for a in answers:
        by_topic.setdefault(a.topic, []).append(a)
    out: list[bytes] = [_uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))]
    for topic, parts in by_topic.items():
        out.append(_string(topic, flexible))
        out.append(_uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts)))
        for a in parts:
            if version >= 5:
                out.append(
                    _PARTITION_V5.pack(
                        a.partition, a.error, a.base_offset, a.log_append_time, a.log_start_offset
                    )
                )
            else:
                out.append(
                    _PARTITION_V3.pack(a.partition, a.error, a.base_offset, a.log_append_time)
                )
            if version >= 8:
                out.append(_record_errors(a.record_errors, flexible))
                out.append(_string(a.message, flexible))
            if flexible:
                out.append(b"\x00")  # partition: no tagged fields
        if flexible:
            out.append(b"\x00")  # topic: no tagged fields
    throttle_at = sum(len(b) for b in out)
    out.append(_I32.pack(0))  # throttle_time_ms: the listener writes it (proxy/throttling.py)
    if flexible:
        out.append(b"\x00")  # response: no tagged fields
    return EncodedBody(flexible, b"".join(out), throttle_at)
