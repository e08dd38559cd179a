"""A consumer catching up on 10,000 small batches costs bounded object-store work (issue 12).

`zonegate serve` (three zones in one process, as the embedded default) on
moto's S3 server. 10,000 produce requests, each with a one-record batch for
each of three partitions, so a partition's batches lie apart in many WAL
objects (the case that cost one GET per batch). The node restarts, so its
log cache is empty, and a confluent-kafka consumer with default fetch
settings reads partition 0 from offset 0. Before the change its first record
came after 49.6 s, 18,926 GETs were issued for 12,000 batches, fetches timed
out, and healthy nodes lost their partitions. Here: no read pass of a Fetch
takes more than 16 GETs, about one GET per WAL object is issued, the first
record comes within seconds, everything is read, and no partition moves.
"""

from __future__ import annotations

import datetime
import re
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.e2e import clients
from tests.e2e.conftest import NodeFactory
from tests.node_harness import free_port_block
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server
from zonegate.proxy.codec import decode_response, encode_request, response_type
from zonegate.records.build import build_batch

pytestmark = pytest.mark.e2e

TOPIC = "catch-up"
REQUESTS = 10_000
CONNECTIONS = 4
MAX_GETS = 16


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3Server]:
    with MotoS3Server(default_bucket="zonegate-catch-up") as server:
        yield server


def _produce_interleaved(port: int) -> None:
    """REQUESTS acks=1 produce requests, pipelined over a few connections."""
    timeout = datetime.timedelta(seconds=30)
    # Timestamps of now: records older than the topic's retention.ms (7 days) are the
    # retention job's to delete, and a run slow enough to meet its pass (5 min) then read
    # nothing (fixed 2023 timestamps did that in CI once the date moved past them).
    now_ms = int(time.time() * 1000)

    def request(i: int) -> bytes:
        batch = build_batch([(b"k%d" % i, b"v" * 40, (), now_ms + i)])
        parts = tuple(PartitionProduceData(index=p, records=batch) for p in range(3))
        req = ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=timeout,  # type: ignore[arg-type]
            topic_data=(TopicProduceData(name=TOPIC, partition_data=parts),),
        )
        return encode_request(i, "catch-up-producer", req)

    errors: list[BaseException] = []

    def one_connection(first: int, count: int) -> None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
                reader = s.makefile("rb")
                sent = 0
                answered = 0
                while answered < count:
                    while sent < count and sent - answered < 32:
                        s.sendall(request(first + sent))
                        sent += 1
                    (size,) = struct.unpack(">i", reader.read(4))
                    _, answer = decode_response(reader.read(size), response_type(0, 9))
                    codes = [p.error_code for t in answer.responses for p in t.partition_responses]
                    assert codes == [ErrorCode.none] * 3, codes
                    answered += 1
        except BaseException as exc:
            errors.append(exc)

    per = REQUESTS // CONNECTIONS
    threads = [
        threading.Thread(target=one_connection, args=(i * per, per)) for i in range(CONNECTIONS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _gets_histogram(http_port: int) -> dict[str, float]:
    """The buckets of zonegate_fetch_object_gets, and its sum under "sum"."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10).read()
    buckets: dict[str, float] = {}
    for value in re.findall(
        r"^zonegate_fetch_object_gets_sum\{[^}]*\} (\S+)$", text.decode(), re.M
    ):
        buckets["sum"] = buckets.get("sum", 0) + float(value)
    for labels, value in re.findall(
        r"^zonegate_fetch_object_gets_bucket\{([^}]*)\} (\S+)$", text.decode(), re.MULTILINE
    ):
        (le,) = re.findall(r'le="([^"]+)"', labels)
        buckets[le] = buckets.get(le, 0) + float(value)
    return buckets


def test_catch_up_reader_costs_bounded_gets(node_factory: NodeFactory, moto: MotoS3Server) -> None:
    http = free_port_block(3)
    node = node_factory(
        [
            "--object-store",
            "s3://zonegate-catch-up/c1",
            "--s3-endpoint",
            moto.endpoint_url,
            "--wal-seal-age-ms",
            "20",
            "--http-port",
            str(http),
        ],
        env=dict(FAKE_AWS_ENV),
    )
    clients.ck_create_topic(node.bootstrap, TOPIC, 3)
    _produce_interleaved(node.port)
    node.stop()
    node.restart()  # the log cache starts empty: every byte the consumer reads comes from S3

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": node.bootstrap, "group.id": "catch-up", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    started = time.monotonic()
    first_after: float | None = None
    offsets: list[int] = []
    deadline = started + 240
    while len(offsets) < REQUESTS and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None or msg.error() is not None:
            continue
        if first_after is None:
            first_after = time.monotonic() - started
        offsets.append(msg.offset())
    consumer.close()

    assert offsets == list(range(REQUESTS))
    # Not a speed test: before the bound the first record took 49.6 s and fetches timed out.
    assert first_after is not None and first_after < 15, first_after
    buckets = {}
    for port in range(http, http + 3):
        for le, count in _gets_histogram(port).items():
            buckets[le] = buckets.get(le, 0) + count
    assert buckets["+Inf"] == buckets[str(MAX_GETS)], buckets  # no pass took more than 16
    # Batches of one object share a GET: about one GET per WAL object read, where one
    # per batch was issued before (the batches of partition 0 are never adjacent).
    wal = moto.client().list_objects_v2(Bucket="zonegate-catch-up", Prefix="c1/wal/")
    objects = wal["KeyCount"]
    assert objects < REQUESTS / 4  # many batches per object
    assert buckets["sum"] <= objects + MAX_GETS, (buckets, objects)
    assert buckets["+Inf"] - buckets["0"] >= objects / MAX_GETS  # over several passes
    # No partition moved while the reader caught up (the restarted node's log): before
    # the bound, its fetches starved the leases. The first run's graceful stop hands
    # partitions over, and an append in flight then may be fenced ("leader epoch moved"),
    # as in CI once: that is the stop's doing, not the reader's.
    log = node.log_text().split(f"--- start {node.starts} ---")[-1]
    assert "moved" not in log and "renew its lease" not in log
