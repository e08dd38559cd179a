"""The KIP-848 consumer group state machine, driven directly with explicit time.

`Client` behaves as a KIP-848 consumer does: it joins with epoch 0, adopts
each assignment it is sent (dropping at once what the assignment no longer
has), and reports what it owns in every heartbeat. The invariant checked
throughout is the protocol's promise: no partition is ever owned by two
clients at once, and once heartbeats settle every partition has one owner.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import GroupConfig
from zonegate.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupSettings,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    Topics,
)
from zonegate.metastore.models import PartitionInfo, TopicInfo

SETTINGS = ConsumerGroupSettings(heartbeat_interval_ms=1000, session_timeout_ms=10000)


class Cluster:
    def __init__(self) -> None:
        self.topics: dict[str, TopicInfo] = {}

    def create(self, name: str, partitions: int) -> uuid.UUID:
        tid = uuid.uuid4()
        self.topics[name] = TopicInfo(tid, name, ())
        self.grow(name, partitions)
        return tid

    def grow(self, name: str, partitions: int) -> None:
        t = self.topics[name]
        parts = tuple(PartitionInfo(t.topic_id, name, p, p, 1, 0) for p in range(partitions))
        self.topics[name] = TopicInfo(t.topic_id, name, parts)

    def view(self) -> Topics:
        return Topics(self.topics.get, lambda: list(self.topics))


@dataclass
class Client:
    group: ConsumerGroup
    cluster: Cluster
    topics: tuple[str, ...] = ("t",)
    regex: str | None = None
    assignor: str | None = None
    instance_id: str | None = None
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    last: HeartbeatResult | None = None

    def heartbeat(self, now: float = 0.0, **override: object) -> HeartbeatResult:
        full = self.epoch == 0
        fields: dict[str, object] = {
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": self.instance_id if full else None,
            "rebalance_timeout_ms": 30000 if full else -1,
            "subscribed_topic_names": self.topics if full else None,
            "subscribed_topic_regex": self.regex if full else None,
            "server_assignor": self.assignor if full else None,
            "owned": tuple((t, tuple(sorted(ps))) for t, ps in self.owned.items()),
            "client_id": "sim",
            "client_host": "/127.0.0.1",
        }
        fields.update(override)
        res = self.group.heartbeat(
            HeartbeatRequest(**fields),  # type: ignore[arg-type]
            self.cluster.view(),
            now,
        )
        self.last = res
        if res.error is ErrorCode.none:
            self.epoch = res.member_epoch
            if res.assignment is not None:
                self.owned = {t: ps for t, ps in res.assignment.items() if ps}
        elif res.error in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            self.owned, self.epoch = {}, 0
        return res

    def leave(self, now: float = 0.0) -> HeartbeatResult:
        res = self.group.heartbeat(
            HeartbeatRequest(self.member_id, -1, instance_id=self.instance_id),
            self.cluster.view(),
            now,
        )
        self.owned = {}
        return res

    def parts(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def no_double_ownership(clients: list[Client]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for c in clients:
        for tp in c.parts():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {c.member_id}"
            seen[tp] = c.member_id


def settle(clients: list[Client], now: float = 0.0, rounds: int = 10) -> None:
    for _ in range(rounds):
        for c in clients:
            c.heartbeat(now)
            no_double_ownership(clients)


def everything(cluster: Cluster, name: str = "t") -> set[tuple[uuid.UUID, int]]:
    t = cluster.topics[name]
    return {(t.topic_id, p.partition) for p in t.partitions}


def new_group(settings: ConsumerGroupSettings = SETTINGS) -> tuple[ConsumerGroup, Cluster]:
    cluster = Cluster()
    cluster.create("t", 6)
    return ConsumerGroup("g", GroupConfig(), settings), cluster


# -- joining and splitting ------------------------------------------------------


def test_first_member_gets_everything_at_once() -> None:
    g, cluster = new_group()
    a = Client(g, cluster)
    res = a.heartbeat()
    assert res.error is ErrorCode.none
    assert res.member_id == a.member_id and res.member_epoch == 1
    assert res.heartbeat_interval_ms == 1000
    assert a.parts() == everything(cluster)
    assert g.state_name == "Stable"
    assert g.group_epoch == 1 and g.assignment_epoch == 1


def test_second_member_waits_until_the_first_revokes() -> None:
    g, cluster = new_group()
    a, b = Client(g, cluster), Client(g, cluster)
    a.heartbeat()
    b.heartbeat()
    # b is in the target but a still holds everything: b gets nothing yet.
    assert b.last is not None and b.last.member_epoch == 2
    assert b.parts() == set()
    assert g.members[b.member_id].state is MemberState.UNRELEASED_PARTITIONS
    assert g.state_name == "Reconciling"
    # a is told to drop half; it stays at epoch 1 until it reports having done so.
    a.heartbeat(owned=tuple((t, tuple(sorted(ps))) for t, ps in a.owned.items()))
    assert g.members[a.member_id].state in (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS)
    no_double_ownership([a, b])
    settle([a, b])
    assert a.parts() | b.parts() == everything(cluster)
    assert len(a.parts()) == len(b.parts()) == 3
    assert g.state_name == "Stable"
    assert a.epoch == b.epoch == g.assignment_epoch == 2


def test_member_that_keeps_reporting_revoked_partitions_does_not_advance() -> None:
    g, cluster = new_group()
    a, b = Client(g, cluster), Client(g, cluster)
    a.heartbeat()
    everything_a = tuple((t, tuple(sorted(ps))) for t, ps in a.owned.items())
    b.heartbeat()
    res = a.heartbeat(owned=everything_a)  # told to revoke: the assignment shrinks
    assert res.assignment is not None and len(res.assignment[next(iter(res.assignment))]) == 3
    assert g.members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    res = a.heartbeat(owned=everything_a)  # still claims all six
    assert res.member_epoch == 1
    b.heartbeat()
    assert b.parts() == set()  # nothing released yet
    a.heartbeat()  # now reports only its three
    assert a.epoch == 2
    b.heartbeat()
    assert len(b.parts()) == 3
    no_double_ownership([a, b])


def test_three_members_split_and_one_leaves() -> None:
    g, cluster = new_group()
    clients = [Client(g, cluster) for _ in range(3)]
    settle(clients)
    assert [len(c.parts()) for c in clients] == [2, 2, 2]
    res = clients[1].leave()
    assert res.error is ErrorCode.none and res.member_epoch == -1
    rest = [clients[0], clients[2]]
    settle(rest)
    assert clients[0].parts() | clients[2].parts() == everything(cluster)
    assert len(clients[0].parts()) == len(clients[2].parts()) == 3
    assert g.state_name == "Stable"


def test_random_churn_never_double_assigns_and_converges() -> None:
    rng = random.Random(7)
    g, cluster = new_group()
    cluster.grow("t", 12)
    live: list[Client] = []
    for step in range(200):
        roll = rng.random()
        if roll < 0.15 or not live:
            live.append(Client(g, cluster, assignor=rng.choice([None, "uniform", "range"])))
        elif roll < 0.25 and len(live) > 1:
            live.pop(rng.randrange(len(live))).leave()
        c = rng.choice(live)
        c.heartbeat(now=float(step))
        no_double_ownership(live)
    settle(live, now=200.0, rounds=len(live) + 5)
    owned = [tp for c in live for tp in c.parts()]
    assert sorted(owned) == sorted(everything(cluster))
    assert g.state_name == "Stable"


# -- epochs, ids and bad requests ------------------------------------------------


def test_stale_and_future_epochs_are_fenced() -> None:
    g, cluster = new_group()
    a = Client(g, cluster)
    a.heartbeat()
    assert a.heartbeat(member_epoch=5).error is ErrorCode.fenced_member_epoch
    a.heartbeat()
    b = Client(g, cluster)
    settle([a, b])
    assert a.epoch == 2 and g.members[a.member_id].previous_epoch == 1
    mine = tuple((t, tuple(sorted(ps))) for t, ps in a.owned.items())
    # A lost answer: the previous epoch, owning only what is assigned now, is accepted.
    assert a.heartbeat(member_epoch=1, owned=mine).error is ErrorCode.none
    # The previous epoch claiming a partition it no longer has is not.
    tid = cluster.topics["t"].topic_id
    res = g.heartbeat(
        HeartbeatRequest(a.member_id, 1, owned=((tid, tuple(range(6))),)), cluster.view(), 0
    )
    assert res.error is ErrorCode.fenced_member_epoch
    c = Client(g, cluster)
    settle([a, b, c])
    assert a.epoch == 3
    res = g.heartbeat(HeartbeatRequest(a.member_id, 1, owned=()), cluster.view(), 0)
    assert res.error is ErrorCode.fenced_member_epoch


def test_fenced_member_rejoins_with_epoch_zero_under_its_id() -> None:
    g, cluster = new_group()
    a = Client(g, cluster)
    a.heartbeat()
    a.heartbeat()
    assert a.heartbeat(member_epoch=a.epoch + 3).error is ErrorCode.fenced_member_epoch
    a.owned, a.epoch = {}, 0
    res = a.heartbeat()
    assert res.error is ErrorCode.none and res.member_id == a.member_id
    assert a.parts() == everything(cluster)


def test_unknown_member_and_unknown_group_member() -> None:
    g, cluster = new_group()
    Client(g, cluster).heartbeat()
    res = g.heartbeat(HeartbeatRequest("nobody", 3, owned=()), cluster.view(), 0)
    assert res.error is ErrorCode.unknown_member_id
    res = g.heartbeat(HeartbeatRequest("nobody", -1), cluster.view(), 0)
    assert res.error is ErrorCode.unknown_member_id


def test_invalid_requests() -> None:
    g, cluster = new_group()
    view = cluster.view()

    def hb(**kw: object) -> ErrorCode:
        base: dict[str, object] = {
            "member_id": "m",
            "member_epoch": 0,
            "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": ("t",),
            "owned": (),
        }
        base.update(kw)
        return g.heartbeat(HeartbeatRequest(**base), view, 0).error  # type: ignore[arg-type]

    assert hb(rebalance_timeout_ms=-1) is ErrorCode.invalid_request
    assert hb(subscribed_topic_names=None) is ErrorCode.invalid_request
    assert hb(subscribed_topic_names=()) is ErrorCode.invalid_request
    assert hb(owned=None) is ErrorCode.invalid_request
    assert hb(owned=((uuid.uuid4(), (1,)),)) is ErrorCode.invalid_request
    assert hb(member_id="") is ErrorCode.invalid_request  # v1: the client names itself
    assert hb(member_epoch=-3) is ErrorCode.invalid_request
    assert hb(instance_id="") is ErrorCode.invalid_request
    assert hb(rack_id="") is ErrorCode.invalid_request
    assert hb(member_epoch=-2) is ErrorCode.invalid_request  # static leave needs instance id
    assert hb(server_assignor="sticky") is ErrorCode.unsupported_assignor
    assert hb(subscribed_topic_regex="(") is ErrorCode.invalid_regular_expression
    assert not g.members and g.group_epoch == 0  # nothing above changed the group


def test_v0_member_id_is_generated() -> None:
    g, cluster = new_group()
    req = HeartbeatRequest(
        "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned=(), api_version=0
    )
    res = g.heartbeat(req, cluster.view(), 0)
    assert res.error is ErrorCode.none and res.member_id
    assert res.member_id in g.members


def test_group_max_size() -> None:
    g, cluster = new_group(ConsumerGroupSettings(max_size=2))
    a, b, c = Client(g, cluster), Client(g, cluster), Client(g, cluster)
    a.heartbeat()
    b.heartbeat()
    assert c.heartbeat().error is ErrorCode.group_max_size_reached
    assert a.heartbeat().error is ErrorCode.none  # members already in still heartbeat


# -- timeouts -----------------------------------------------------------------


def test_session_timeout_frees_partitions() -> None:
    g, cluster = new_group()
    a, b = Client(g, cluster), Client(g, cluster)
    settle([a, b])
    b_parts = b.parts()
    assert g.next_deadline() == 10000.0
    a.heartbeat(now=9000)
    g.tick(9999)
    assert len(g.members) == 2
    g.tick(10000)  # b's session ends; a heartbeated at 9000
    assert list(g.members) == [a.member_id]
    assert g.state_name == "Assigning"
    a.heartbeat(now=10001)
    assert a.parts() == everything(cluster)
    assert b_parts <= a.parts()


def test_rebalance_timeout_fences_a_member_that_never_revokes() -> None:
    g, cluster = new_group()
    a, b = Client(g, cluster), Client(g, cluster)
    a.heartbeat(now=0)
    full = tuple((t, tuple(sorted(ps))) for t, ps in a.owned.items())
    b.heartbeat(now=0)
    a.heartbeat(now=1, owned=full)
    assert g.members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    for now in (5000, 9000, 20000, 29000):  # keeps its session alive, never revokes
        a.heartbeat(now=now, owned=full)
        b.heartbeat(now=now)
    g.tick(30001)
    assert a.member_id not in g.members
    b.heartbeat(now=30002)
    assert b.parts() == everything(cluster)


# -- static membership ---------------------------------------------------------


def test_static_member_temporary_leave_and_return_without_rebalance() -> None:
    g, cluster = new_group()
    a = Client(g, cluster, instance_id="i-a")
    b = Client(g, cluster, instance_id="i-b")
    settle([a, b])
    epoch, a_parts = g.group_epoch, a.parts()
    res = g.heartbeat(HeartbeatRequest(a.member_id, -2, instance_id="i-a"), cluster.view(), 100)
    assert res.error is ErrorCode.none and res.member_epoch == -2
    assert g.group_epoch == epoch  # no rebalance
    # Another process with the same instance id but a new member id takes the place back.
    a2 = Client(g, cluster, instance_id="i-a")
    res = a2.heartbeat(now=200)
    assert res.error is ErrorCode.none
    assert a2.parts() == a_parts
    assert g.group_epoch == epoch and a.member_id not in g.members
    settle([a2, b], now=300)
    assert g.state_name == "Stable"


def test_static_instance_id_in_use_is_unreleased() -> None:
    g, cluster = new_group()
    Client(g, cluster, instance_id="i").heartbeat()
    res = Client(g, cluster, instance_id="i").heartbeat()
    assert res.error is ErrorCode.unreleased_instance_id


def test_static_member_fenced_by_its_replacement() -> None:
    g, cluster = new_group()
    a = Client(g, cluster, instance_id="i")
    a.heartbeat()
    g.heartbeat(HeartbeatRequest(a.member_id, -2, instance_id="i"), cluster.view(), 0)
    Client(g, cluster, instance_id="i").heartbeat()
    res = g.heartbeat(
        HeartbeatRequest(a.member_id, a.epoch, instance_id="i", owned=()), cluster.view(), 0
    )
    assert res.error is ErrorCode.fenced_instance_id


# -- topics and assignors -------------------------------------------------------


def test_added_partitions_and_new_topics_are_picked_up() -> None:
    g, cluster = new_group()
    a, b = Client(g, cluster), Client(g, cluster, topics=("t", "later"))
    settle([a, b])
    epoch = g.group_epoch
    cluster.grow("t", 10)
    settle([a, b])
    assert g.group_epoch == epoch + 1
    assert a.parts() | b.parts() == everything(cluster)
    cluster.create("later", 4)
    settle([a, b])
    later = everything(cluster, "later")
    assert later <= b.parts()  # only b subscribes to it
    assert not later & a.parts()


def test_regex_subscription_follows_created_topics() -> None:
    g, cluster = new_group()
    cluster.create("orders-eu", 2)
    a = Client(g, cluster, topics=(), regex="orders-.*")
    a.heartbeat(now=0)
    assert a.parts() == everything(cluster, "orders-eu")
    cluster.create("orders-us", 3)
    cluster.create("other", 3)
    a.heartbeat(now=5000)
    assert a.parts() == everything(cluster, "orders-eu") | everything(cluster, "orders-us")


def test_range_assignor_chosen_by_members() -> None:
    g, cluster = new_group()
    members = sorted([str(uuid.UUID(int=i)) for i in (1, 2)])
    a = Client(g, cluster, assignor="range", member_id=members[0])
    b = Client(g, cluster, assignor="range", member_id=members[1])
    settle([a, b])
    assert g.preferred_assignor() == "range"
    tid = cluster.topics["t"].topic_id
    assert a.owned == {tid: frozenset({0, 1, 2})}
    assert b.owned == {tid: frozenset({3, 4, 5})}


# -- offsets, persistence -----------------------------------------------------------


def test_offset_commit_and_fetch_checks() -> None:
    g, cluster = new_group()
    assert g.validate_commit("", None, -1) is ErrorCode.none  # empty group: simple commits
    a = Client(g, cluster)
    a.heartbeat()
    assert g.validate_commit("", None, -1) is ErrorCode.unknown_member_id
    assert g.validate_commit(a.member_id, None, a.epoch) is ErrorCode.none
    assert g.validate_commit(a.member_id, None, a.epoch + 1) is ErrorCode.stale_member_epoch
    assert g.validate_commit("x", None, 1) is ErrorCode.unknown_member_id
    assert g.validate_fetch(a.member_id, a.epoch) is ErrorCode.none
    assert g.validate_fetch(a.member_id, 0) is ErrorCode.stale_member_epoch
    assert g.validate_fetch("x", 1) is ErrorCode.unknown_member_id
    assert g.validate_fetch(None, -1) is ErrorCode.none


def test_snapshot_restore_keeps_everything_and_restarts_sessions() -> None:
    g, cluster = new_group()
    a, b = Client(g, cluster, instance_id="i"), Client(g, cluster, assignor="range")
    settle([a, b])
    version = g.version
    settle([a, b])
    assert g.version == version  # plain heartbeats change nothing worth saving
    state = g.snapshot()
    json.loads(state)
    r = ConsumerGroup.restore("g", GroupConfig(), state, 50000.0)
    assert r.snapshot() == state
    assert r.state_name == "Stable"
    assert r.static == {"i": a.member_id}
    assert r.next_deadline() == 50000.0 + SETTINGS.session_timeout_ms
    a.group = b.group = r
    settle([a, b], now=50001)
    assert a.parts() | b.parts() == everything(cluster)
    assert r.group_epoch == g.group_epoch


def test_empty_group_after_everyone_left() -> None:
    g, cluster = new_group()
    a = Client(g, cluster)
    a.heartbeat()
    a.leave()
    assert g.is_empty() and g.state_name == "Empty"
    assert g.next_deadline() is None
    assert g.subscribed_topics() == {"t"}  # topics known from the last subscription


def test_empty_regex_means_none_as_librdkafka_sends_it() -> None:
    g, cluster = new_group()
    cluster.create("orders-eu", 2)
    a = Client(g, cluster, regex="")
    assert a.heartbeat().error is ErrorCode.none
    assert g.members[a.member_id].subscribed_topic_regex is None
    assert a.parts() == everything(cluster)
    b = Client(g, cluster, topics=(), regex="")
    assert b.heartbeat().error is ErrorCode.invalid_request  # neither names nor a regex
    c = Client(g, cluster, topics=(), regex="orders-.*")
    c.heartbeat()
    settle([a, c])
    assert everything(cluster, "orders-eu") <= c.parts()
    # Subscribing to names only again: "" clears the regex.
    c.heartbeat(subscribed_topic_names=("t",), subscribed_topic_regex="", now=5000)
    settle([a, c], now=5000)
    assert not everything(cluster, "orders-eu") & (a.parts() | c.parts())
