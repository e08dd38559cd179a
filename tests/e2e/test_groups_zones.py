"""Consumer groups across zones: members in three zones, each talking only to its zone's nodes;
the group survives kill -9 of the node that coordinates it (state and offsets in the store)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i32Timedelta

from tests.cluster_harness import Cluster, start_cluster
from tests.e2e.group_harness import (
    Members,
    check_delivery,
    consumed_all,
    split_ok,
    stall_report,
    wait_for,
)
from tests.e2e.test_groups import Producer, create_topic
from tests.kafka_raw import RawConnection
from zonegate.router.rendezvous import choose_node

ZONES = ["zone-a", "zone-b", "zone-c"]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = start_cluster(tmp_path / "cluster", ZONES, 2, ("--group-initial-rebalance-delay-ms", "300"))
    yield c
    c.stop()


def test_group_across_zones_survives_coordinator_kill(cluster: Cluster, members: Members) -> None:
    ids = [n.node_id for n in cluster.nodes]
    seconds = {z: cluster.in_zone(z)[1] for z in ZONES}
    # A group whose coordinator is no member's bootstrap node, so killing it tests the move
    # of the group and not a client's bootstrap.
    group = next(
        g
        for g in (f"zg-{i}" for i in range(1000))
        if choose_node(g, -1, ids) in {n.node_id for n in seconds.values()}
    )
    owner = next(n for n in cluster.nodes if n.node_id == choose_node(group, -1, ids))
    topic, parts = "zoned-group", 6
    create_topic(cluster.nodes[0].bootstrap, topic, parts)
    prod = Producer(cluster.nodes[0].bootstrap, topic, parts)
    prod.send(300)

    # FindCoordinator names a node of the asking client's zone, whichever coordinates.
    for zone in ZONES:
        node = cluster.in_zone(zone)[0]
        conn = RawConnection(node.port)
        answer = conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
        conn.close()
        found = answer.coordinators[0]
        assert found.error_code is ErrorCode.none
        assert found.node_id in {n.node_id for n in cluster.in_zone(zone)}, (zone, found)

    clients = {"zone-a": "ck", "zone-b": "kp", "zone-c": "aio"}
    ms = [
        members.start(
            clients[z], cluster.in_zone(z)[0].bootstrap, group, topic, session_ms=10000, name=z
        )
        for z in ZONES
    ]
    wait_for("three zones split the partitions", lambda: split_ok(ms, parts), timeout=90)
    wait_for("everything consumed", lambda: consumed_all(ms, prod.totals()))
    before = [m.assignment() for m in ms]

    owner.kill9()
    prod.send(300)
    try:
        wait_for("consumed after the coordinator died", lambda: consumed_all(ms, prod.totals()), 90)
    except AssertionError as exc:
        report = stall_report(ms, prod.totals())
        raise AssertionError(f"{exc}\n{report}\n{probe_fetch(cluster, topic, parts)}") from None
    wait_for("still split", lambda: split_ok(ms, parts), timeout=60)
    stats = check_delivery(members.events(), prod.in_order())
    assert stats["records"] == prod.count
    # The new coordinator loaded the group as it was: nobody had to give up partitions.
    assert [m.assignment() for m in ms] == before

    # Offsets survived too: every member leaves, a newcomer starts at the commits.
    for m in ms:
        m.stop()
    prod.send(30)
    late = members.start("ck", cluster.in_zone("zone-b")[0].bootstrap, group, topic, name="late")
    wait_for("the newcomer read the new records", lambda: len(late.records()) >= 30)
    assert len(late.records()) == 30
    check_delivery(members.events(), prod.in_order())


def probe_fetch(cluster: Cluster, topic: str, parts: int) -> str:
    """What each live node answers a Fetch from offset 0 of every partition, at once."""
    from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
    from kio.static.primitive import i32, i64

    lines = []
    for n in cluster.nodes:
        if not n.alive():
            continue
        try:
            conn = RawConnection(n.port, timeout=30.0)
            answer = conn.request(
                FetchRequest(
                    max_wait=i32Timedelta.parse(timedelta(0)),
                    min_bytes=i32(0),
                    topics=(
                        FetchTopic(
                            topic=topic,
                            partitions=tuple(
                                FetchPartition(
                                    partition=i32(p),
                                    fetch_offset=i64(0),
                                    partition_max_bytes=i32(1 << 20),
                                )
                                for p in range(parts)
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                )
            )
            conn.close()
        except Exception as e:  # noqa: BLE001 - a report, not a check
            lines.append(f"node {n.node_id} ({n.zone}): {e!r}")
            continue
        got = [
            (p.partition_index, p.error_code.name, p.high_watermark, len(p.records or b""))
            for t in answer.responses
            for p in t.partitions
        ]
        lines.append(f"node {n.node_id} ({n.zone}) (partition, error, hwm, bytes): {got}")
    return "\n".join(lines)


def test_a_group_call_waits_for_the_new_coordinator_instead_of_closing_the_connection(
    cluster: Cluster,
) -> None:
    """A zone node forwarding a group call to an owner that just died waits for the view to
    name the next owner (within a lease) and answers, on the same connection: a client's
    fetches share that connection, and closing it stalled a kafka-python member."""
    from kio.schema.offset_commit.v8.request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
    from kio.static.primitive import i32, i64

    ids = [n.node_id for n in cluster.nodes]
    asker = cluster.in_zone("zone-b")[0]
    # A group owned by a node of another zone, so the call is forwarded.
    group = next(
        g
        for g in (f"fwd-{i}" for i in range(1000))
        if choose_node(g, -1, ids) in {n.node_id for n in cluster.in_zone("zone-a")}
    )
    owner = next(n for n in cluster.nodes if n.node_id == choose_node(group, -1, ids))
    topic = "forwarded-commits"
    create_topic(cluster.nodes[0].bootstrap, topic, 1)

    def commit(conn: RawConnection, offset: int) -> ErrorCode:
        answer = conn.request(
            OffsetCommitRequest(
                group_id=group,
                member_id="",
                topics=(
                    OffsetCommitRequestTopic(
                        name=topic,
                        partitions=(
                            OffsetCommitRequestPartition(
                                partition_index=i32(0),
                                committed_offset=i64(offset),
                                committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            )
        )
        code: ErrorCode = answer.topics[0].partitions[0].error_code
        return code

    conn = RawConnection(asker.port, timeout=30.0)
    assert commit(conn, 7) is ErrorCode.none
    owner.kill9()
    # The next call reaches the dead owner first; it is answered, not dropped.
    assert commit(conn, 9) is ErrorCode.none
    fetched = conn.request(
        OffsetFetchRequest(
            group_id=group,
            topics=(OffsetFetchRequestTopic(name=topic, partition_indexes=(i32(0),)),),
        )
    )
    assert fetched.error_code is ErrorCode.none
    assert fetched.topics[0].partitions[0].committed_offset == 9
    conn.close()
