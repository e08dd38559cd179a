"""Idempotent producers: retried batches are appended once; gaps and fenced epochs are refused."""

from __future__ import annotations

import datetime
import time

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)

from tests.e2e import clients
from tests.e2e.conftest import NodeFactory
from tests.e2e.records_fixture import make_records
from tests.kafka_raw import RawConnection
from zonegate.records.build import build_batch

pytestmark = pytest.mark.e2e
PRODUCE = 0


def test_retries_after_lost_answers_do_not_duplicate(node_factory: NodeFactory) -> None:
    """The node commits each of the first 3 produce requests but drops the answer; librdkafka
    retries them, and each retry must get the original offsets, not new ones."""
    node = node_factory(env={"ZONEGATE_FAULTS": f"{PRODUCE}:drop_response:3"})
    topic = "idem"
    clients.ck_create_topic(node.bootstrap, topic, 1)
    recs = make_records(300, "idem")
    acks = clients.ck_produce(
        node.bootstrap, topic, recs, 1, "none", extra={"linger.ms": 20, "retry.backoff.ms": 50}
    )
    assert sorted(off for _, off in acks) == list(range(300))
    got = clients.ck_consume(node.bootstrap, topic, {0: 300})
    assert [c.offset for c in got] == list(range(300))
    assert [c.value for c in got] == [r.value for r in recs]
    assert "test fault: dropping the answer" in node.log_text()
    # Nothing beyond the 300 records was stored.
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "x"})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (low, high) == (0, 300)


def _produce(conn: RawConnection, topic: str, batch: bytes) -> tuple[ErrorCode, int]:
    resp = conn.request(
        ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                TopicProduceData(
                    name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)
                ),
            ),
        )
    )
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_duplicate_gap_and_fenced_epoch(node_factory: NodeFactory) -> None:
    node = node_factory()
    topic = "idem-raw"
    clients.ck_create_topic(node.bootstrap, topic, 1)
    conn = RawConnection(node.port)
    init = conn.request(
        InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    pid, epoch = init.producer_id, init.producer_epoch
    ts = int(time.time() * 1000)
    recs = [(b"k", b"v", (), ts)] * 5

    def batch(seq: int, ep: int = epoch) -> bytes:
        return build_batch(recs, producer_id=pid, producer_epoch=ep, base_sequence=seq)

    assert _produce(conn, topic, batch(0)) == (ErrorCode.none, 0)
    assert _produce(conn, topic, batch(5)) == (ErrorCode.none, 5)
    # A retry of the first batch gets its original offset.
    assert _produce(conn, topic, batch(0)) == (ErrorCode.none, 0)
    # A gap in sequence numbers is refused.
    assert _produce(conn, topic, batch(20))[0] == ErrorCode.out_of_order_sequence_number
    # A newer epoch (KIP-360 bump) starts at sequence 0 and fences the old one.
    bumped = conn.request(
        InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=pid,
            producer_epoch=epoch,
        )
    )
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
    assert _produce(conn, topic, batch(0, epoch + 1)) == (ErrorCode.none, 10)
    assert _produce(conn, topic, batch(10, epoch))[0] == ErrorCode.invalid_producer_epoch
    got = clients.kp_consume(node.bootstrap, topic, {0: 15})
    assert [c.offset for c in got] == list(range(15))
    conn.close()
