"""Real clients produce and consume through one node.

Every codec, byte for byte, contiguous offsets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e import clients
from tests.e2e.records_fixture import CODECS, SampleRecord, make_records
from tests.node_harness import RunningNode, start_node

pytestmark = pytest.mark.e2e
PARTITIONS = 3


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    n = start_node(Path(tmp_path_factory.mktemp("roundtrip")))
    yield n
    n.stop()


def check_roundtrip(
    recs: list[SampleRecord], acks: list[tuple[int, int]], consumed: list[clients.Consumed]
) -> None:
    by_partition: dict[int, list[int]] = defaultdict(list)
    for p, off in acks:
        by_partition[p].append(off)
    for p, offsets in by_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), f"partition {p} offsets not contiguous"
    seen = {(c.partition, c.offset): c for c in consumed}
    assert len(seen) == len(consumed), "a record was delivered twice"
    assert len(consumed) == len(recs)
    for r, (p, off) in zip(recs, acks, strict=True):
        c = seen[(p, off)]
        assert c.key == r.key
        assert c.value == r.value
        assert tuple(c.headers) == r.headers
        assert c.timestamp_ms == r.timestamp_ms


Produce = Callable[..., list[tuple[int, int]]]
Consume = Callable[[str, str, dict[int, int]], list[clients.Consumed]]
CLIENTS: dict[str, tuple[Produce, Consume]] = {
    "confluent-kafka": (clients.ck_produce, clients.ck_consume),
    "kafka-python": (clients.kp_produce, clients.kp_consume),
    "aiokafka": (clients.aio_produce, clients.aio_consume),
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_client_round_trip(shared_node: RunningNode, client: str, codec: str) -> None:
    produce, consume = CLIENTS[client]
    topic = f"rt-{client}-{codec}"
    clients.ck_create_topic(shared_node.bootstrap, topic, PARTITIONS)
    recs = make_records(90, topic)
    acks = produce(shared_node.bootstrap, topic, recs, PARTITIONS, codec)
    counts = {p: sum(1 for q, _ in acks if q == p) for p in range(PARTITIONS)}
    check_roundtrip(recs, acks, consume(shared_node.bootstrap, topic, counts))


def test_every_client_reads_what_every_other_wrote(shared_node: RunningNode) -> None:
    """One topic written by three clients with different codecs, read back by each."""
    topic = "rt-mixed"
    clients.ck_create_topic(shared_node.bootstrap, topic, 1)
    all_recs: list[SampleRecord] = []
    all_acks: list[tuple[int, int]] = []
    for (name, (produce, _)), codec in zip(
        sorted(CLIENTS.items()), ["zstd", "lz4", "gzip"], strict=True
    ):
        recs = make_records(40, f"{topic}-{name}")
        all_acks += produce(shared_node.bootstrap, topic, recs, 1, codec)
        all_recs += recs
    for _, consume in CLIENTS.values():
        check_roundtrip(
            all_recs, all_acks, consume(shared_node.bootstrap, topic, {0: len(all_recs)})
        )


def test_auto_created_topic_on_first_produce(shared_node: RunningNode) -> None:
    recs = make_records(10, "auto")
    acks = clients.ck_produce(shared_node.bootstrap, "auto-created-topic", recs, 1)
    assert [off for _, off in acks] == list(range(10))


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_round_trip(shared_node: RunningNode, codec: str) -> None:
    topic = f"rt-kcat-{codec}"
    b = shared_node.bootstrap
    lines = [f"k{i}:value-{i}-{'x' * (i % 50)}" for i in range(200)]
    clients.kcat(
        "-b",
        b,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K:",
        "-z",
        codec,
        "-H",
        "origin=kcat",
        "-X",
        "enable.idempotence=true",
        input=("\n".join(lines) + "\n").encode(),
    )
    out = clients.kcat(
        "-b", b, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o|%k|%s|%h\n"
    )
    got = out.decode().splitlines()
    assert len(got) == len(lines)
    for i, (line, sent) in enumerate(zip(got, lines, strict=True)):
        offset, key, value, headers = line.split("|")
        assert int(offset) == i
        assert f"{key}:{value}" == sent
        assert headers == "origin=kcat"
