"""A node whose WAL and stream objects live in S3 (moto's server over HTTP), with real clients."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.e2e import clients
from tests.e2e.conftest import NodeFactory
from tests.e2e.records_fixture import make_records
from tests.e2e.test_roundtrip import check_roundtrip
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3Server]:
    with MotoS3Server(default_bucket="zonegate-e2e") as server:
        yield server


def test_s3_node_round_trip_and_restart(node_factory: NodeFactory, moto: MotoS3Server) -> None:
    args = [
        "--object-store",
        "s3://zonegate-e2e/cluster1",
        "--s3-endpoint",
        moto.endpoint_url,
        "--wal-seal-age-ms",
        "50",
    ]
    node = node_factory(args, env=dict(FAKE_AWS_ENV))
    topic = "on-s3"
    clients.ck_create_topic(node.bootstrap, topic, 3)
    recs = make_records(300, topic)
    acks = clients.ck_produce(node.bootstrap, topic, recs, 3, "zstd")
    node.stop(signal.SIGKILL)
    node.restart()
    counts = {p: sum(1 for q, _ in acks if q == p) for p in range(3)}
    # After the restart the log cache is empty: every byte comes back from S3.
    check_roundtrip(recs, acks, clients.kp_consume(node.bootstrap, topic, counts))
    keys = [
        o["Key"]
        for o in moto.client()
        .list_objects_v2(Bucket="zonegate-e2e", Prefix="cluster1/wal/")
        .get("Contents", [])
    ]
    assert keys, "no WAL object in the bucket"
    # One WAL object carries many batches: far fewer objects than batches produced.
    assert len(keys) < len(recs)
