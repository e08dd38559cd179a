"""Bad input gets Kafka's error code or a closed connection with a log line.

After each, the node keeps serving.
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid

import pytest
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.e2e import clients
from tests.e2e.conftest import NodeFactory
from tests.kafka_raw import RawConnection
from tests.node_harness import RunningNode
from zonegate.records.build import build_batch

pytestmark = pytest.mark.e2e
T = datetime.timedelta(seconds=10)


def _still_serves(node: RunningNode) -> None:
    conn = RawConnection(node.port)
    md = conn.request(
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    )
    assert md.brokers[0].port == node.port
    conn.close()
    assert node.alive()


def _create(
    conn: RawConnection, name: str, partitions: int = 1, rf: int = 1, configs: tuple = ()
) -> tuple[ErrorCode, str | None]:
    from kio.schema.create_topics.v7.request import CreatableTopicConfig

    resp = conn.request(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=rf,
                    assignments=(),
                    configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs),
                ),
            ),
            timeout=T,
            validate_only=False,
        )
    )
    return resp.topics[0].error_code, resp.topics[0].error_message


def _produce(
    conn: RawConnection, parts: dict[tuple[str, int], bytes]
) -> dict[tuple[str, int], ErrorCode]:
    by_topic: dict[str, list[PartitionProduceData]] = {}
    for (t, p), data in parts.items():
        by_topic.setdefault(t, []).append(PartitionProduceData(index=p, records=data))
    resp = conn.request(
        ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout=T,
            topic_data=tuple(
                TopicProduceData(name=t, partition_data=tuple(ps)) for t, ps in by_topic.items()
            ),
        )
    )
    return {(t.name, p.index): p.error_code for t in resp.responses for p in t.partition_responses}


def _batch(n: int = 3) -> bytes:
    return build_batch([(b"k", b"v" * 10, (), int(time.time() * 1000))] * n)


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


_METADATA_V12_HEADER = b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x01x\x00"


@pytest.mark.parametrize(
    "frame,reason",
    [
        (_frame(struct.pack(">hhih", 9999, 0, 1, -1)), "unknown API key"),
        (_frame(struct.pack(">hhih", 3, 99, 1, -1)), "unsupported version"),
        (struct.pack(">i", 200 * 1024 * 1024), "socket.request.max.bytes"),
        (_frame(_METADATA_V12_HEADER + b"\xff" * 16), "cannot decode"),
        (_frame(b"\x00\x03"), "shorter than a header"),
    ],
    ids=["unknown-key", "unknown-version", "oversized", "garbage-body", "short-header"],
)
def test_malformed_frames_close_the_connection(
    node: RunningNode, frame: bytes, reason: str
) -> None:
    conn = RawConnection(node.port)
    conn.send_bytes(frame)
    assert conn.is_closed_by_peer()
    conn.close()
    deadline = time.monotonic() + 5
    while reason not in node.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reason in node.log_text()
    _still_serves(node)


def test_truncated_frame_then_disconnect(node: RunningNode) -> None:
    conn = RawConnection(node.port)
    conn.send_bytes(struct.pack(">i", 1000) + b"\x00\x03\x00")
    conn.close()
    _still_serves(node)


def test_api_versions_with_unknown_version_gets_v0_error(node: RunningNode) -> None:
    conn = RawConnection(node.port)
    conn.send_bytes(struct.pack(">ihhih", 10, 18, 99, 7, -1))
    frame = conn.read_frame()
    cid, err = struct.unpack(">ih", frame[:6])
    assert (cid, err) == (7, ErrorCode.unsupported_version)
    conn.close()


def test_corrupt_batch_fails_only_its_partition(node: RunningNode) -> None:
    conn = RawConnection(node.port)
    assert _create(conn, "corrupt", 2)[0] == ErrorCode.none
    bad = bytearray(_batch())
    bad[-1] ^= 0xFF  # breaks the CRC
    result = _produce(conn, {("corrupt", 0): _batch(), ("corrupt", 1): bytes(bad)})
    assert result == {("corrupt", 0): ErrorCode.none, ("corrupt", 1): ErrorCode.corrupt_message}
    got = clients.kp_consume(node.bootstrap, "corrupt", {0: 3})
    assert len(got) == 3
    conn.close()
    _still_serves(node)


def test_produce_to_missing_topic_with_auto_create_off(node_factory: NodeFactory) -> None:
    node = node_factory(["--auto-create-topics", "false"])
    conn = RawConnection(node.port)
    assert _produce(conn, {("nope", 0): _batch()}) == {
        ("nope", 0): ErrorCode.unknown_topic_or_partition
    }
    md = conn.request(
        MetadataRequest(
            topics=(MetadataRequestTopic(name="nope", topic_id=uuid.UUID(int=0)),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
    )
    assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    conn.close()


@pytest.mark.parametrize("name", ["", ".", "..", "bad name", "a/b", "x" * 250, "ünïcode"])
def test_invalid_topic_names(node: RunningNode, name: str) -> None:
    conn = RawConnection(node.port)
    assert _create(conn, name)[0] == ErrorCode.invalid_topic_exception
    md = conn.request(
        MetadataRequest(
            topics=(MetadataRequestTopic(name=name, topic_id=uuid.UUID(int=0)),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
    )
    assert md.topics[0].error_code == ErrorCode.invalid_topic_exception
    conn.close()


def test_negative_and_bad_partitions(node: RunningNode) -> None:
    conn = RawConnection(node.port)
    assert _create(conn, "neg", -5)[0] == ErrorCode.invalid_partitions
    assert _create(conn, "zero", 0)[0] == ErrorCode.invalid_partitions
    assert _create(conn, "rf0", 1, rf=0)[0] == ErrorCode.invalid_replication_factor
    assert _create(conn, "ok", 2)[0] == ErrorCode.none
    assert _create(conn, "ok", 2)[0] == ErrorCode.topic_already_exists
    code, msg = _create(conn, "cfg", 1, configs=(("no.such.config", "1"),))
    assert code == ErrorCode.invalid_config and "no.such.config" in (msg or "")
    code, msg = _create(conn, "cfg", 1, configs=(("retention.ms", "soon"),))
    assert code == ErrorCode.invalid_config and "retention.ms" in (msg or "")
    result = _produce(conn, {("ok", -1): _batch(), ("ok", 2): _batch(), ("ok", 1): _batch()})
    assert result == {
        ("ok", -1): ErrorCode.unknown_topic_or_partition,
        ("ok", 2): ErrorCode.unknown_topic_or_partition,
        ("ok", 1): ErrorCode.none,
    }
    resp = conn.request(
        CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name="ok", count=1, assignments=None),),
            timeout=T,
            validate_only=False,
        )
    )
    assert resp.results[0].error_code == ErrorCode.invalid_partitions
    resp = conn.request(
        CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name="ok", count=5, assignments=None),),
            timeout=T,
            validate_only=False,
        )
    )
    assert resp.results[0].error_code == ErrorCode.none
    assert _produce(conn, {("ok", 4): _batch()}) == {("ok", 4): ErrorCode.none}
    # validate_only: the same checks, nothing added.
    for name, count, code in (
        ("ok", 5, ErrorCode.invalid_partitions),
        ("ok", 20_000, ErrorCode.policy_violation),  # adds more than 10,000 at once
        ("nope", 9, ErrorCode.unknown_topic_or_partition),
        ("ok", 9, ErrorCode.none),
    ):
        resp = conn.request(
            CreatePartitionsRequest(
                topics=(CreatePartitionsTopic(name=name, count=count, assignments=None),),
                timeout=T,
                validate_only=True,
            )
        )
        assert resp.results[0].error_code == code, (name, count)
    assert _produce(conn, {("ok", 5): _batch()}) == {
        ("ok", 5): ErrorCode.unknown_topic_or_partition
    }
    conn.close()


def _validate_create(conn: RawConnection, counts: dict[str, int]) -> list[tuple[ErrorCode, str]]:
    resp = conn.request(
        CreateTopicsRequest(
            topics=tuple(
                CreatableTopic(
                    name=name, num_partitions=n, replication_factor=1, assignments=(), configs=()
                )
                for name, n in counts.items()
            ),
            timeout=T,
            validate_only=True,
        )
    )
    return [(t.error_code, t.error_message or "") for t in resp.topics]


def test_partitions_per_request_capped_as_kafka(node: RunningNode) -> None:
    """No cap on a topic's partitions; at most 10,000 made per request, as Kafka's
    controller: more gets POLICY_VIOLATION with its message, for every topic named."""
    conn = RawConnection(node.port)
    too_many = (ErrorCode.policy_violation, "Excessively large number of partitions per request.")
    assert _validate_create(conn, {"big": 100_000}) == [too_many]
    assert _validate_create(conn, {"a": 5000, "b": 5001}) == [too_many, too_many]
    assert _validate_create(conn, {"a": 5000, "b": 5000}) == [(ErrorCode.none, "")] * 2
    assert _create(conn, "grows", 1)[0] == ErrorCode.none
    for count, code in ((10_001, ErrorCode.none), (10_002, ErrorCode.policy_violation)):
        resp = conn.request(
            CreatePartitionsRequest(
                topics=(CreatePartitionsTopic(name="grows", count=count, assignments=None),),
                timeout=T,
                validate_only=True,
            )
        )
        assert resp.results[0].error_code == code, count
    assert resp.results[0].error_message == "Unable to perform excessively large batch operation."
    conn.close()
