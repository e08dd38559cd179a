"""A compacted topic as a Kafka user sees it (issue 15): 20 keys x 200 updates and 5
tombstones; after cleaning, fresh confluent-kafka, kafka-python and aiokafka consumers
read the latest value per key at its original offset, across the gaps, and the
tombstones go once delete.retention.ms has passed."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from tests.e2e.clients import (
    Consumed,
    aio_consume,
    ck_consume,
    ck_read_to_end,
    kp_consume,
    wait_until,
)
from tests.e2e.conftest import InProcessFactory
from tests.node_harness import free_port_block
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server

pytestmark = pytest.mark.e2e

KEYS, UPDATES, TOMBSTONES = 20, 200, 5


def _produce(bootstrap: str, topic: str, codec: str) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "compression.type": codec,
        }
    )
    for u in range(UPDATES):
        for k in range(KEYS):
            p.produce(topic, key=b"k%02d" % k, value=b"v%02d-%03d" % (k, u))
    p.flush(60)
    for k in range(TOMBSTONES):
        p.produce(topic, key=b"k%02d" % k, value=None)
        p.flush(60)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3Server]:
    with MotoS3Server(default_bucket="zonegate-compacted") as server:
        yield server


@pytest.mark.parametrize(
    ("store", "codec", "topic_codec"),
    [("file", "none", "producer"), ("file", "snappy", "zstd"), ("s3", "lz4", "producer")],
    ids=["file", "file-zstd", "s3"],
)
def test_compacted_topic_keeps_the_latest_per_key_and_drops_tombstones(
    inprocess_factory: InProcessFactory,
    request: pytest.FixtureRequest,
    store: str,
    codec: str,
    topic_codec: str,
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    http = free_port_block(1)
    args = ["--zones", "zone-a", "--compaction-interval-ms", "200", "--compaction-max-delay-ms"]
    args += ["0", "--http-port", str(http)]
    if store == "s3":
        moto: MotoS3Server = request.getfixturevalue("moto")
        mp = request.getfixturevalue("monkeypatch")
        for k, v in FAKE_AWS_ENV.items():
            mp.setenv(k, v)
        args += ["--object-store", "s3://zonegate-compacted/run", "--s3-endpoint"]
        args += [moto.endpoint_url, "--wal-seal-age-ms", "20"]
    node = inprocess_factory(args)
    configs = {
        "cleanup.policy": "compact",
        "segment.ms": "1000",
        "delete.retention.ms": "6000",
        "min.cleanable.dirty.ratio": "0.01",
        "compression.type": topic_codec,
    }
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("cfg", 1, config=configs)])["cfg"].result(30)
    _produce(node.bootstrap, "cfg", codec)
    total = KEYS * UPDATES + TOMBSTONES
    last_update = {k: (UPDATES - 1) * KEYS + k for k in range(KEYS)}
    tombstone_at = {k: KEYS * UPDATES + k for k in range(TOMBSTONES)}

    # Cleaned: one record per key, tombstones kept for now, each at its original offset.
    with_tombstones = sorted(
        [(tombstone_at[k], b"k%02d" % k, None) for k in range(TOMBSTONES)]
        + [
            (last_update[k], b"k%02d" % k, b"v%02d-%03d" % (k, UPDATES - 1))
            for k in range(TOMBSTONES, KEYS)
        ]
    )
    seen: list[object] = []

    def cleaned(want: list[tuple[int, bytes, bytes | None]]) -> bool:
        got = ck_read_to_end(node.bootstrap, "cfg", timeout=20)
        seen[:] = [len(got)]
        return got == want

    wait_until(f"cleaning (records seen: {seen})", lambda: cleaned(with_tombstones), 40)
    assert len(with_tombstones) == KEYS < total

    # delete.retention.ms later the tombstones are gone; the rest read by every client.
    latest = [r for r in with_tombstones if r[2] is not None]
    wait_until("tombstones to go", lambda: cleaned(latest), 40)
    if store == "s3":  # the cleaned objects are there, their keys marked clean
        listed = moto.client().list_objects_v2(Bucket="zonegate-compacted", Prefix="run/streams/")
        assert any(o["Key"].endswith("-c") for o in listed.get("Contents", []))
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10).read()
    runs = [ln for ln in metrics.decode().splitlines() if ln.startswith("zonegate_cleaning_runs")]
    assert runs and float(runs[0].rsplit(" ", 1)[1]) >= 2, runs  # one round, then tombstones

    # A record produced now follows the empty batch that keeps the cleaned range's last
    # offset (4004): every client reads past it.
    _produce_one(node.bootstrap, "cfg")
    want = [*latest, (total, b"new", b"after")]
    for consume in (ck_consume, kp_consume, aio_consume):
        got: list[Consumed] = consume(node.bootstrap, "cfg", {0: len(want)})
        assert [(c.offset, c.key, c.value) for c in got] == want, consume.__name__


def _produce_one(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, key=b"new", value=b"after")
    assert p.flush(30) == 0
