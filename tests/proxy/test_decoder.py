"""The bounded request decoder: the same messages as kio's reader, and no trust in lengths.

Equivalence is checked against kio's writer and native reader on generated
messages of every request version the node serves; malformed input (the
frames of issue 12, nulls where the schema has none, every truncation,
corrupted counts, random bytes) must come out as `MalformedMessage` and
nothing else.
"""

from __future__ import annotations

import datetime
import io
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i32Timedelta

import zonegate.proxy.handlers  # noqa: F401  (registers the served versions)
from zonegate.proxy.codec import decode_request, peek_header
from zonegate.proxy.codec import request_type as load_request_schema
from zonegate.proxy.codec import response_type as load_response_schema
from zonegate.proxy.decoder import MalformedMessage, message_reader
from zonegate.proxy.errors import PeerProtocolError
from zonegate.proxy.registry import REGISTRY

pytestmark = pytest.mark.unit

st.register_type_strategy(Records, st.binary(max_size=64))

# Served and refused versions alike are decoded (refused ones to answer UNSUPPORTED_VERSION);
# those Kafka 4 removed come from zonegate's own legacy schemas, the rest from kio.
SERVED = [
    (reg.api_key, v)
    for reg in [*REGISTRY, *REGISTRY.refused()]
    for v in range(reg.min_version, reg.max_version + 1)
]
# The frame of issue 12: CreatePartitions v2 whose topic array claims 16 million elements.
ISSUE_12_FRAME = bytes.fromhex("0000001b0025000212c8bbf1000000fabed9dd48911090cc68a7e89be0e68d")


def _encode(msg: object) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(msg))(buf, msg)
    return buf.getvalue()


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_same_messages_as_kio(api_key: int, version: int) -> None:
    """Whatever kio writes, this decoder reads back as kio's native reader does."""
    for loader in (load_request_schema, load_response_schema):
        _check_equivalence(loader(api_key, version))


def _check_equivalence(cls: type) -> None:
    native = entity_reader(cls)
    ours = message_reader(cls)

    @settings(
        max_examples=4,
        suppress_health_check=list(HealthCheck),
        deadline=None,
        database=None,
        derandomize=True,
    )
    @given(st.from_type(cls))
    def check(msg: object) -> None:
        data = _encode(msg)
        expected, end = native(data, 0)
        got, pos = ours(data, 0)
        assert pos == end == len(data)
        assert got == expected

    check()


def test_issue_12_frame_is_refused_by_name() -> None:
    body = ISSUE_12_FRAME[4:]
    header, offset = peek_header(body)
    assert (header.api_key, header.api_version) == (37, 2)
    with pytest.raises(PeerProtocolError, match=r"elements cannot fit in the \d+ bytes left"):
        decode_request(body, header, offset)


@pytest.mark.parametrize(
    ("api_key", "version", "field"),
    [(0, 9, "topic_data"), (15, 5, "groups"), (20, 6, "topics"), (20, 3, "topic_names")],
)
def test_null_array_where_schema_has_none(api_key: int, version: int, field: str) -> None:
    """Produce, DescribeGroups and DeleteTopics raised TypeError on a null array (issue 12)."""
    cls = load_request_schema(api_key, version)
    # A flexible array of count 0 (unsigned varint 0) is null; the rest zeroed is fine.
    payload = b"\x00" * 64
    if api_key == 0:
        payload = b"\x00" + struct.pack(">hi", -1, 1000) + b"\x00" + b"\x00"
    elif not cls.__flexible__:
        payload = struct.pack(">ii", -1, 1000)  # a legacy null array: count -1
    refused = f"{field}: count -1 where the schema allows no null"
    with pytest.raises(MalformedMessage, match=refused):
        message_reader(cls)(payload, 0)


def _produce() -> bytes:
    return _encode(
        ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            topic_data=(
                TopicProduceData(
                    name="t",
                    partition_data=(PartitionProduceData(index=0, records=Records(b"x" * 300)),),
                ),
            ),
        )
    )


def test_every_truncation_is_malformed() -> None:
    data = _produce()
    reader = message_reader(ProduceRequest)
    for cut in range(len(data)):
        with pytest.raises(MalformedMessage):
            reader(data[:cut], 0)


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_random_and_mutated_bytes_only_ever_raise_malformed(api_key: int, version: int) -> None:
    cls = load_request_schema(api_key, version)
    reader = message_reader(cls)

    @settings(max_examples=3, suppress_health_check=list(HealthCheck), deadline=None, database=None)
    @given(st.from_type(cls), st.randoms(use_true_random=False))
    def check(msg: object, rng: random.Random) -> None:
        data = _encode(msg)
        for _ in range(40):
            mutated = bytearray(data)
            how = rng.randrange(4)
            if how == 0 and mutated:  # flip bytes
                for _ in range(rng.randint(1, 4)):
                    mutated[rng.randrange(len(mutated))] = rng.getrandbits(8)
            elif how == 1:  # truncate
                del mutated[rng.randrange(len(mutated) + 1) :]
            elif how == 2:  # random bytes
                mutated = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(64)))
            elif mutated:  # a huge or negative count somewhere
                pos = rng.randrange(len(mutated))
                mutated[pos : pos + 4] = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe"])
            try:
                reader(bytes(mutated), 0)
            except MalformedMessage:
                pass

    check()


def test_huge_counts_fail_before_allocating() -> None:
    """Counts of 2^31-1 in every array position of a real request are refused at once."""
    data = bytearray(_produce())
    reader = message_reader(ProduceRequest)
    for pos in range(len(data) - 4):
        mutated = bytes(data[:pos]) + b"\x7f\xff\xff\xff" + bytes(data[pos + 4 :])
        try:
            reader(mutated, 0)
        except MalformedMessage:
            pass
