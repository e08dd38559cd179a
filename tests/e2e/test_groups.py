"""Classic consumer groups with real clients: split, rebalance, leave, crash, resume, admin.

Members run as processes (tests/e2e/group_worker.py) so one can leave cleanly
(SIGTERM: the client closes and sends LeaveGroup) or die (kill -9: the
coordinator notices when its session times out).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import InProcessFactory, NodeFactory
from tests.e2e.group_harness import (
    Members,
    check_delivery,
    consumed_all,
    split_ok,
    wait_for,
)
from tests.inprocess import InProcessNode
from tests.node_harness import RunningNode

NODE_ARGS = ["--group-initial-rebalance-delay-ms", "300"]


@pytest.fixture
def gnode(inprocess_factory: InProcessFactory) -> InProcessNode:
    return inprocess_factory(NODE_ARGS)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)


class Producer:
    """Produces `value = topic/partition/n` records and remembers them in offset order."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        from confluent_kafka import Producer as CkProducer

        self.topic = topic
        self.partitions = partitions
        self.produced: dict[int, dict[int, str]] = {p: {} for p in range(partitions)}
        self.count = 0
        self._p = CkProducer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2}
        )

    def send(self, n: int) -> None:
        errors: list[str] = []

        def cb(err, msg):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(str(err))
            else:
                self.produced[msg.partition()][msg.offset()] = msg.value().decode()

        for _ in range(n):
            p = self.count % self.partitions
            value = f"{self.topic}/{p}/{self.count}"
            self._p.produce(self.topic, value.encode(), partition=p, on_delivery=cb)
            self.count += 1
            self._p.poll(0)
        assert self._p.flush(30) == 0
        assert not errors, errors

    def totals(self) -> dict[int, int]:
        return {p: len(v) for p, v in self.produced.items()}

    def in_order(self) -> dict[int, list[str]]:
        out = {}
        for p, by_offset in self.produced.items():
            assert sorted(by_offset) == list(range(len(by_offset))), f"gap in partition {p}"
            out[p] = [by_offset[o] for o in range(len(by_offset))]
        return out


def describe(bootstrap: str, group: str) -> object:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(30)


# -- the lifecycle, once per client -------------------------------------------------------
@pytest.mark.parametrize("client", ["ck", "kp", "aio"])
def test_group_lifecycle(client: str, gnode: RunningNode, members: Members) -> None:
    """Split between two, a third joins, one leaves cleanly, one is killed, everyone is gone
    and a new member resumes from the last commit: nothing skipped, nothing re-read that a
    commit acknowledged before the re-reader got the partition."""
    bs, topic, group, parts = gnode.bootstrap, f"life-{client}", f"g-{client}", 6
    create_topic(bs, topic, parts)
    prod = Producer(bs, topic, parts)
    prod.send(300)

    a = members.start(client, bs, group, topic, session_ms=20000, name="a")
    wait_for("a owns every partition", lambda: a.assignment() == set(range(parts)))
    b = members.start(client, bs, group, topic, session_ms=20000, name="b")
    wait_for("a and b split the partitions", lambda: split_ok([a, b], parts))
    prod.send(300)
    c = members.start(client, bs, group, topic, session_ms=6000, name="c")
    wait_for("a, b and c split the partitions", lambda: split_ok([a, b, c], parts))
    wait_for("everything so far consumed", lambda: consumed_all([a, b, c], prod.totals()))

    # A clean leave moves b's partitions at once, long before its 20 s session would expire.
    left = time.monotonic()
    b.stop()
    wait_for("a and c take b's partitions", lambda: split_ok([a, c], parts), timeout=15)
    assert time.monotonic() - left < 15

    # A crash: c's partitions move once its 6 s session expires.
    prod.send(300)
    c.kill9()
    wait_for("a takes every partition after c dies", lambda: a.assignment() == set(range(parts)))
    prod.send(120)
    wait_for("a consumed everything", lambda: consumed_all([a, b, c], prod.totals()))
    a.stop()

    # A new member resumes from the group's committed offsets.
    committed = {p: 0 for p in range(parts)}
    for m in (a, b, c):
        for p, o in m.committed().items():
            committed[p] = max(committed[p], o)
    assert committed == prod.totals(), "a committed everything it read before leaving"
    prod.send(60)
    d = members.start(client, bs, group, topic, session_ms=20000, name="d")
    wait_for("d consumed the new records", lambda: consumed_all([a, b, c, d], prod.totals()))
    firsts: dict[int, int] = {}
    for r in d.records():
        firsts.setdefault(r["p"], r["o"])
    assert firsts == committed, "d starts exactly at the committed offsets"
    stats = check_delivery(members.events(), prod.in_order())
    assert stats["records"] == prod.count


def test_kcat_group_split_and_resume(gnode: RunningNode, tmp_path: Path) -> None:
    """kcat -G: two members split the partitions; a restarted member resumes after the
    offsets kcat committed (auto-commit of what it printed)."""
    import subprocess

    bs, topic, group, parts = gnode.bootstrap, "kcat-g", "kcat-group", 4
    create_topic(bs, topic, parts)
    prod = Producer(bs, topic, parts)
    prod.send(200)

    def kcat(name: str) -> tuple[subprocess.Popen[str], Path]:
        out = tmp_path / f"{name}.out"
        proc = subprocess.Popen(
            [
                "kcat",
                "-b",
                bs,
                "-G",
                group,
                topic,
                "-u",
                # Not -o: in -G mode kcat would start every assigned partition there,
                # overriding the committed offsets.
                "-X",
                "auto.offset.reset=earliest",
                "-f",
                "%p %o %s\\n",
                "-X",
                "auto.commit.interval.ms=100",
                "-X",
                "session.timeout.ms=6000",
                "-X",
                "heartbeat.interval.ms=500",
            ],
            stdout=open(out, "w"),  # noqa: SIM115
            stderr=open(tmp_path / f"{name}.err", "w"),  # noqa: SIM115
            text=True,
        )
        return proc, out

    def lines(out: Path) -> list[tuple[int, int, str]]:
        found = []
        text = out.read_text()
        complete = text[: text.rfind("\n") + 1]  # kcat may be mid-line
        for line in complete.splitlines():
            p, o, v = line.split(" ", 2)
            found.append((int(p), int(o), v))
        return found

    def assigned(name: str) -> set[int]:
        # kcat logs "% Group kcat-group rebalanced (memberid ...): assigned: kcat-g [0], ..."
        text = (tmp_path / f"{name}.err").read_text()
        last = [ln for ln in text.splitlines() if "rebalanced" in ln]
        if not last or "assigned:" not in last[-1]:
            return set()
        return {
            int(x.split("[")[1].rstrip("],")) for x in last[-1].split("assigned:")[1].split(",")
        }

    p1, out1 = kcat("k1")
    wait_for("k1 owns every partition", lambda: assigned("k1") == set(range(parts)))
    p2, out2 = kcat("k2")
    try:
        wait_for(
            "k1 and k2 split the partitions",
            lambda: (
                assigned("k1") | assigned("k2") == set(range(parts))
                and not assigned("k1") & assigned("k2")
                and bool(assigned("k1"))
                and bool(assigned("k2"))
            ),
        )
        prod.send(200)
        wait_for(
            "everything read",
            lambda: len({(p, o) for p, o, _ in lines(out1) + lines(out2)}) == prod.count,
        )
        time.sleep(1.0)  # past two auto-commit intervals
    finally:
        p1.terminate()
        p2.terminate()
        p1.wait(30)
        p2.wait(30)
    seen = {(p, o) for p, o, _ in lines(out1) + lines(out2)}
    prod.send(40)
    p3, out3 = kcat("k3")
    try:
        wait_for("k3 reads the new records", lambda: len(lines(out3)) >= 40)
        time.sleep(1.0)
    finally:
        p3.terminate()
        p3.wait(30)
    again = [(p, o) for p, o, _ in lines(out3) if (p, o) in seen]
    assert not again, f"k3 re-read committed records: {again[:5]}"
    assert len(lines(out3)) == 40
    values = prod.in_order()
    for p, o, v in lines(out1) + lines(out2) + lines(out3):
        assert values[p][o] == v


# -- assignors ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("client", "assignor"),
    [
        ("ck", "range"),
        ("ck", "roundrobin"),
        ("ck", "cooperative-sticky"),
        ("kp", "sticky"),
        ("aio", "roundrobin"),
    ],
)
def test_assignor_chosen_by_members(
    client: str, assignor: str, gnode: RunningNode, members: Members
) -> None:
    bs, topic, group, parts = gnode.bootstrap, f"asg-{client}-{assignor}", f"g-{assignor}", 4
    create_topic(bs, topic, parts)
    a = members.start(client, bs, group, topic, assignor=assignor, name="a")
    b = members.start(client, bs, group, topic, assignor=assignor, name="b")
    wait_for("the partitions split", lambda: split_ok([a, b], parts))
    desc = describe(bs, group)
    assert desc.partition_assignor == assignor  # type: ignore[attr-defined]
    assert str(desc.state).endswith("STABLE")  # type: ignore[attr-defined]
    owned = {
        m.member_id: {tp.partition for tp in m.assignment.topic_partitions}
        for m in desc.members  # type: ignore[attr-defined]
    }
    assert sorted(owned.values(), key=min) == sorted([a.assignment(), b.assignment()], key=min)
    if assignor == "roundrobin":
        assert sorted(map(sorted, owned.values())) == [[0, 2], [1, 3]]
    if assignor == "range":
        assert sorted(map(sorted, owned.values())) == [[0, 1], [2, 3]]


def test_group_follows_added_partitions(gnode: RunningNode, members: Members) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    bs, topic, group = gnode.bootstrap, "grow", "g-grow"
    create_topic(bs, topic, 2)
    a = members.start("ck", bs, group, topic, name="a")
    b = members.start("kp", bs, group, topic, name="b")
    wait_for("two partitions split", lambda: split_ok([a, b], 2))
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_partitions([NewPartitions(topic, 6)])[topic].result(30)
    wait_for("six partitions split", lambda: split_ok([a, b], 6), timeout=60)
    prod = Producer(bs, topic, 6)
    prod.send(120)
    wait_for("records of new partitions consumed", lambda: consumed_all([a, b], prod.totals()))
    check_delivery(members.events(), prod.in_order())


def test_static_member_rejoins_without_rebalance(gnode: RunningNode, members: Members) -> None:
    """KIP-345: a static member that comes back within its session gets its partitions back
    and the other member is never revoked."""
    bs, topic, group, parts = gnode.bootstrap, "static", "g-static", 4
    create_topic(bs, topic, parts)
    s = members.start("ck", bs, group, topic, session_ms=30000, instance_id="s-1", name="s")
    o = members.start("ck", bs, group, topic, session_ms=30000, instance_id="o-1", name="o")
    wait_for("the partitions split", lambda: split_ok([s, o], parts))
    before_s, before_o = s.assignment(), o.assignment()
    events_o = len(o.assignment_events())
    s.kill9()
    s2 = members.start("ck", bs, group, topic, session_ms=30000, instance_id="s-1", name="s2")
    wait_for("s comes back", lambda: s2.assignment() == before_s, timeout=30)
    time.sleep(3)
    assert o.assignment() == before_o
    assert len(o.assignment_events()) == events_o, "the other member was never revoked"


def test_mixed_clients_churn_12_partitions(gnode: RunningNode, members: Members) -> None:
    """4 members of three clients over 12 partitions while a producer writes and members come
    and go: every record consumed at least once, exactly once between commits."""
    import threading

    bs, topic, group, parts = gnode.bootstrap, "churn", "g-churn", 12
    create_topic(bs, topic, parts)
    prod = Producer(bs, topic, parts)
    running = True

    def produce() -> None:
        while running:
            prod.send(60)
            time.sleep(0.05)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        ms = [
            members.start("ck", bs, group, topic, session_ms=6000, name="ck1"),
            members.start("kp", bs, group, topic, session_ms=6000, name="kp1"),
            members.start("aio", bs, group, topic, session_ms=6000, name="aio1"),
            members.start("ck", bs, group, topic, session_ms=6000, name="ck2"),
        ]
        wait_for("four members split 12 partitions", lambda: split_ok(ms, parts), timeout=90)
        ms[1].stop()  # clean leave
        ms[3].kill9()  # crash
        ms = [ms[0], ms[2]]
        wait_for("two members hold all 12", lambda: split_ok(ms, parts), timeout=60)
        ms.append(members.start("kp", bs, group, topic, session_ms=6000, name="kp2"))
        ms.append(members.start("aio", bs, group, topic, session_ms=6000, name="aio2"))
        wait_for("four members again", lambda: split_ok(ms, parts), timeout=90)
        ms[0].kill9()
        ms = ms[1:]
        wait_for("three members hold all 12", lambda: split_ok(ms, parts), timeout=60)
    finally:
        running = False
        writer.join()
    wait_for("every record consumed", lambda: consumed_all(members.all, prod.totals()), timeout=90)
    stats = check_delivery(members.events(), prod.in_order())
    assert stats["records"] == prod.count > 0


# -- admin --------------------------------------------------------------------------------
def test_admin_list_describe_offsets_lag_delete(gnode: RunningNode, members: Members) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition

    bs, topic, group, parts = gnode.bootstrap, "adm", "g-admin", 3
    create_topic(bs, topic, parts)
    prod = Producer(bs, topic, parts)
    prod.send(90)
    a = members.start("ck", bs, group, topic, name="a")
    wait_for("a consumed all", lambda: consumed_all([a], prod.totals()))
    wait_for("a committed all", lambda: a.committed() == prod.totals())
    prod.send(30)  # a, still running, reads these too
    admin = AdminClient({"bootstrap.servers": bs})

    listed = admin.list_consumer_groups().result(30)
    assert group in {g.group_id for g in listed.valid}
    desc = admin.describe_consumer_groups([group])[group].result(30)
    assert len(desc.members) == 1
    assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == {0, 1, 2}

    # Deleting a group with a live member is refused.
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        admin.delete_consumer_groups([group])[group].result(30)
    wait_for("a consumed the rest", lambda: a.committed() == prod.totals())
    a.stop()
    prod.send(30)  # now the group lags by 10 per partition

    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    got = {tp.partition: tp.offset for tp in offsets[group].result(30).topic_partitions}
    assert got == {p: 40 for p in range(parts)}
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bs, "group.id": "probe"})
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)}
    c.close()
    assert {p: ends[p] - got[p] for p in range(parts)} == {p: 10 for p in range(parts)}

    # OffsetDelete (kafka-python's admin) on an empty group, then DeleteGroups.
    kadmin = KafkaAdminClient(bootstrap_servers=bs)
    result = kadmin.delete_group_offsets(group, [KpTopicPartition(topic, 0)])
    assert all(err is None or getattr(err, "errno", 0) == 0 for err in result.values()), result
    left = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    remaining = {tp.partition: tp.offset for tp in left[group].result(30).topic_partitions}
    assert remaining.get(0, -1001) < 0 and remaining[1] == 40
    admin.delete_consumer_groups([group])[group].result(30)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    kadmin.close()


def test_offsets_survive_node_restart(node_factory: NodeFactory, members: Members) -> None:
    node = node_factory(NODE_ARGS)
    bs, topic, group, parts = node.bootstrap, "durable-offsets", "g-durable", 2
    create_topic(bs, topic, parts)
    prod = Producer(bs, topic, parts)
    prod.send(50)
    a = members.start("kp", bs, group, topic, name="a")
    wait_for("a committed all", lambda: a.committed() == prod.totals())
    a.stop()
    node.kill9()
    node.restart()
    prod2 = Producer(node.bootstrap, topic, parts)
    prod2.send(10)
    b = members.start("ck", node.bootstrap, group, topic, name="b")
    wait_for("b read the new records", lambda: len(b.records()) >= 10)
    time.sleep(1)
    assert sorted((r["p"], r["o"]) for r in b.records()) == sorted(
        (p, o) for p in range(parts) for o in range(25, 30)
    )
