"""KIP-848 consumer groups with confluent-kafka (`group.protocol=consumer`) against real nodes.

Members run as processes (tests/e2e/kip848_worker.py) so one can leave cleanly
(SIGTERM: the consumer closes and heartbeats with epoch -1) or die (kill -9:
the coordinator fences it when its session, configured short on the node,
expires). The server assigns (uniform or range); partitions move only after
their previous owner revoked them, which `check_delivery` and `split_ok`
observe from the consumers' own reports.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import InProcessFactory, NodeFactory
from tests.e2e.group_harness import (
    Member,
    Members,
    check_delivery,
    consumed_all,
    split_ok,
    wait_for,
)
from tests.e2e.test_groups import Producer, create_topic
from tests.inprocess import InProcessNode
from tests.node_harness import RunningNode

pytestmark = pytest.mark.e2e

SESSION_MS = 6000
NODE_ARGS = [
    "--group-consumer-heartbeat-interval-ms",
    "500",
    "--group-consumer-session-timeout-ms",
    str(SESSION_MS),
]


class Kip848Members(Members):
    """KIP-848 member processes (tests/e2e/kip848_worker.py) of one test."""

    def start(  # type: ignore[override]
        self,
        bootstrap: str,
        group: str,
        topics: str,
        *,
        name: str,
        assignor: str = "",
        instance_id: str = "",
    ) -> Member:
        cmd = [sys.executable, "-m", "tests.e2e.kip848_worker", bootstrap, group, topics]
        cmd += ["--client-id", f"kip848-{name}"]
        if assignor:
            cmd += ["--assignor", assignor]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        return self.spawn(name, "ck848", cmd)


@pytest.fixture
def knode(inprocess_factory: InProcessFactory) -> InProcessNode:
    return inprocess_factory(NODE_ARGS)


@pytest.fixture
def kmembers(tmp_path: Path) -> Any:
    m = Kip848Members(tmp_path)
    yield m
    m.close()


def describe(bootstrap: str, group: str, retry_s: float = 0) -> Any:
    """The group as DescribeConsumerGroups (ConsumerGroupDescribe) shows it; retried for
    `retry_s` while the call fails (a node just restarted still lists its old self until
    that registration's lease ends, and calls forwarded there fail meanwhile)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + retry_s
    while True:
        try:
            return admin.describe_consumer_groups([group])[group].result(30)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def committed_offsets(members: list[Member], parts: int) -> dict[int, int]:
    out = dict.fromkeys(range(parts), 0)
    for m in members:
        for p, o in m.committed().items():
            out[p] = max(out[p], o)
    return out


def test_split_join_leave_kill_and_resume(knode: RunningNode, kmembers: Kip848Members) -> None:
    """Two split the partitions, a third joins, one leaves cleanly, one is killed -9, the last
    one stops and a new member resumes from the committed offsets: nothing skipped, nothing
    re-read that a commit acknowledged before the re-reader got the partition."""
    bs, topic, group, parts = knode.bootstrap, "kip848-life", "g848-life", 6
    create_topic(bs, topic, parts)
    prod = Producer(bs, topic, parts)
    prod.send(300)

    a = kmembers.start(bs, group, topic, name="a")
    wait_for("a owns every partition", lambda: a.assignment() == set(range(parts)))
    b = kmembers.start(bs, group, topic, name="b")
    wait_for("a and b split the partitions", lambda: split_ok([a, b], parts))
    assert sorted(len(m.assignment()) for m in (a, b)) == [3, 3]
    prod.send(300)
    c = kmembers.start(bs, group, topic, name="c")
    wait_for("a, b and c split the partitions", lambda: split_ok([a, b, c], parts))
    assert sorted(len(m.assignment()) for m in (a, b, c)) == [2, 2, 2]
    wait_for("everything so far consumed", lambda: consumed_all([a, b, c], prod.totals()))

    # A clean leave (epoch -1) moves b's partitions at once.
    left = time.monotonic()
    b.stop()
    wait_for("a and c take b's partitions", lambda: split_ok([a, c], parts), timeout=15)
    assert time.monotonic() - left < 5, "a leave moves partitions without waiting for a session"

    # A crash: c's partitions move once its session on the node expires.
    prod.send(300)
    c.kill9()
    died = time.monotonic()
    wait_for("a takes every partition after c dies", lambda: a.assignment() == set(range(parts)))
    assert time.monotonic() - died >= SESSION_MS / 1000 - 1.5, "moved before c's session ended"
    prod.send(120)
    wait_for("a consumed everything", lambda: consumed_all([a, b, c], prod.totals()))
    wait_for("a committed everything", lambda: committed_offsets([a], parts) == prod.totals())
    a.stop()

    committed = committed_offsets([a, b, c], parts)
    assert committed == prod.totals()
    prod.send(60)
    d = kmembers.start(bs, group, topic, name="d")
    wait_for("d consumed the new records", lambda: consumed_all([a, b, c, d], prod.totals()))
    firsts: dict[int, int] = {}
    for r in d.records():
        firsts.setdefault(r["p"], r["o"])
    assert firsts == committed, "d starts exactly at the committed offsets"
    stats = check_delivery(kmembers.events(), prod.in_order())
    assert stats["records"] == prod.count


@pytest.mark.parametrize("assignor", ["range", "uniform"])
def test_server_assignor_and_describe(
    assignor: str, knode: RunningNode, kmembers: Kip848Members
) -> None:
    bs, topic, group, parts = knode.bootstrap, f"kip848-{assignor}", f"g848-{assignor}", 5
    create_topic(bs, topic, parts)
    a = kmembers.start(bs, group, topic, name="a", assignor=assignor)
    b = kmembers.start(bs, group, topic, name="b", assignor=assignor)
    wait_for("a and b split the partitions", lambda: split_ok([a, b], parts))

    def stable() -> bool:
        d = describe(bs, group)
        return str(d.state).endswith("STABLE") and len(d.members) == 2

    wait_for("the group is stable", stable, timeout=30)
    desc = describe(bs, group)
    assert str(desc.type).endswith("CONSUMER"), desc.type
    assert desc.partition_assignor == assignor
    by_client = {m.client_id: m for m in desc.members}
    assert set(by_client) == {"kip848-a", "kip848-b"}
    for name, member in (("a", a), ("b", b)):
        described = by_client[f"kip848-{name}"]
        assert {tp.topic for tp in described.assignment.topic_partitions} == {topic}
        assert {tp.partition for tp in described.assignment.topic_partitions} == (
            member.assignment()
        )
        assert described.host.startswith("/127.0.0.1")
    sizes = sorted(len(m.assignment()) for m in (a, b))
    assert sizes == [2, 3]
    if assignor == "range":
        # Consecutive ranges; the member first by member id gets the larger one.
        first = min(desc.members, key=lambda m: m.member_id)
        owned = {tp.partition for tp in first.assignment.topic_partitions}
        assert owned == {0, 1, 2}


def test_added_partitions_are_picked_up(knode: RunningNode, kmembers: Kip848Members) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    bs, topic, group = knode.bootstrap, "kip848-grow", "g848-grow"
    create_topic(bs, topic, 2)
    a = kmembers.start(bs, group, topic, name="a")
    b = kmembers.start(bs, group, topic, name="b")
    wait_for("two partitions split", lambda: split_ok([a, b], 2))
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_partitions([NewPartitions(topic, 6)])[topic].result(30)
    wait_for("six partitions split", lambda: split_ok([a, b], 6), timeout=60)
    assert sorted(len(m.assignment()) for m in (a, b)) == [3, 3]
    prod = Producer(bs, topic, 6)
    prod.send(120)
    wait_for("records of new partitions consumed", lambda: consumed_all([a, b], prod.totals()))
    check_delivery(kmembers.events(), prod.in_order())


def test_group_survives_node_restart(node_factory: NodeFactory, kmembers: Kip848Members) -> None:
    """The group's epochs, members and assignment are in the metadata store: members keep
    their partitions across a coordinator restart and resume from committed offsets."""
    node = node_factory(NODE_ARGS)
    bs, topic, group, parts = node.bootstrap, "kip848-restart", "g848-restart", 4
    create_topic(bs, topic, parts)
    prod = Producer(bs, topic, parts)
    prod.send(80)
    a = kmembers.start(bs, group, topic, name="a")
    b = kmembers.start(bs, group, topic, name="b")
    wait_for("a and b split the partitions", lambda: split_ok([a, b], parts))
    wait_for("all committed", lambda: committed_offsets([a, b], parts) == prod.totals())
    before = (a.assignment(), b.assignment())
    epoch_before = describe(bs, group).members
    assert len(epoch_before) == 2
    node.kill9()
    node.restart()
    prod2 = Producer(node.bootstrap, topic, parts)
    prod2.send(40)
    for p, values in prod2.produced.items():
        for o, v in values.items():
            prod.produced[p][o] = v
    prod.count += prod2.count
    wait_for("the new records consumed", lambda: consumed_all([a, b], prod.totals()), timeout=60)
    assert (a.assignment(), b.assignment()) == before, "the restored group kept its assignment"
    desc = describe(node.bootstrap, group, retry_s=20)
    assert {m.member_id for m in desc.members} == {m.member_id for m in epoch_before}
    stats = check_delivery(kmembers.events(), prod.in_order())
    assert stats["records"] == prod.count
    assert stats["duplicates"] == 0


def test_static_member_comes_back_without_rebalance(
    knode: RunningNode, kmembers: Kip848Members
) -> None:
    """A static member (group.instance.id) that closes leaves with epoch -2; a new process with
    the same instance id gets its partitions back and the other member is never revoked."""
    bs, topic, group, parts = knode.bootstrap, "kip848-static", "g848-static", 4
    create_topic(bs, topic, parts)
    s = kmembers.start(bs, group, topic, name="s", instance_id="s-1")
    o = kmembers.start(bs, group, topic, name="o", instance_id="o-1")
    wait_for("the partitions split", lambda: split_ok([s, o], parts))
    wait_for("stable", lambda: str(describe(bs, group).state).endswith("STABLE"), timeout=30)
    before_s, before_o = s.assignment(), o.assignment()
    events_o = len(o.assignment_events())
    s.stop()
    s2 = kmembers.start(bs, group, topic, name="s2", instance_id="s-1")
    wait_for("s comes back", lambda: s2.assignment() == before_s, timeout=30)
    time.sleep(2)
    assert o.assignment() == before_o
    assert len(o.assignment_events()) == events_o, "the other member was never revoked"


def test_regex_subscription_follows_new_topics(knode: RunningNode, kmembers: Kip848Members) -> None:
    bs, group = knode.bootstrap, "g848-regex"
    create_topic(bs, "rx-one", 2)
    create_topic(bs, "other", 2)
    a = kmembers.start(bs, group, "^rx-.*", name="a")

    def topics_of(m: Member) -> set[str]:
        found: set[str] = set()
        for e in m.snapshot():
            if e["e"] == "assigned":
                found = {t for t, _ in e["tps"]}
        return found

    wait_for("a owns rx-one", lambda: topics_of(a) == {"rx-one"}, timeout=30)
    create_topic(bs, "rx-two", 3)
    wait_for("a owns rx-two too", lambda: topics_of(a) == {"rx-one", "rx-two"}, timeout=60)
    desc = describe(bs, group)
    assert [tp.topic for tp in desc.members[0].assignment.topic_partitions].count("other") == 0


def test_bad_assignor_is_fatal_and_classic_group_id_refused(
    knode: RunningNode, tmp_path: Path
) -> None:
    """An unknown `group.remote.assignor` gets UNSUPPORTED_ASSIGNOR; a KIP-848 consumer
    asking for a group id that a live classic group uses gets GROUP_ID_NOT_FOUND."""
    from confluent_kafka import Consumer, KafkaException

    bs, topic = knode.bootstrap, "kip848-bad"
    create_topic(bs, topic, 2)

    def first_error(conf: dict[str, Any], seconds: float = 20) -> str:
        c = Consumer(
            {
                "bootstrap.servers": bs,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                **conf,
            }
        )
        c.subscribe([topic])
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                try:
                    m = c.poll(0.2)
                except KafkaException as e:
                    return str(e)
                if m is not None and m.error() is not None:
                    return str(m.error())
            return ""
        finally:
            c.close()

    assert "assignor" in first_error({"group.id": "g848-bad", "group.remote.assignor": "sticky"})

    classic = Consumer(
        {"bootstrap.servers": bs, "group.id": "g-classic-live", "session.timeout.ms": 10000}
    )
    classic.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not classic.assignment() and time.monotonic() < deadline:
            classic.poll(0.2)
        assert classic.assignment(), "the classic member joined"
        error = first_error({"group.id": "g-classic-live"})
        assert "group id does not exist" in error, error
    finally:
        classic.close()


def test_list_commit_lag_and_delete(knode: RunningNode, kmembers: Kip848Members) -> None:
    """Admin calls on a KIP-848 group: listed as a consumer group, committed offsets readable,
    deletion refused while a member is in it and done once it is empty."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    bs, topic, group, parts = knode.bootstrap, "kip848-admin", "g848-admin", 3
    create_topic(bs, topic, parts)
    prod = Producer(bs, topic, parts)
    prod.send(90)
    a = kmembers.start(bs, group, topic, name="a")
    wait_for("a committed all", lambda: committed_offsets([a], parts) == prod.totals())
    admin = AdminClient({"bootstrap.servers": bs})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(30).valid}
    assert group in listed
    assert str(listed[group].type).endswith("CONSUMER"), listed[group].type
    assert str(listed[group].state).endswith("STABLE"), listed[group].state
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(parts)])
    got = admin.list_consumer_group_offsets([request])[group].result(30)
    assert {tp.partition: tp.offset for tp in got.topic_partitions} == prod.totals()
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        admin.delete_consumer_groups([group])[group].result(30)
    a.stop()
    wait_for("the group is empty", lambda: not describe(bs, group).members, timeout=15)
    assert str(describe(bs, group).state).endswith("EMPTY")
    admin.delete_consumer_groups([group])[group].result(30)
    listed_after = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert group not in listed_after
