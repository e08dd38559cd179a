"""The cross-tenant ACL matrix on a 3-zone cluster: every principal tries every API on
every resource type, and each attempt is allowed or refused exactly as the ACLs say.

One in-process cluster of three nodes (zone-a, zone-b, zone-c) for the module, Kafka's
StandardAuthorizer on, one SASL_PLAINTEXT listener with PLAIN users:
- alice: ALL on PREFIXED `alice-` topics and groups, WRITE on PREFIXED `alice-`
  transactional ids;
- bob: READ, WRITE, CREATE, DELETE and ALTER on PREFIXED `bob-` topics (not the
  configs ones), READ on PREFIXED `bob-` groups (not DELETE);
- admin: a super user, who sets the cluster up;
- eve: no ACL at all.
Each attempt (tests/e2e/acl_matrix_attempts.py: topics, groups, transactional ids and
the cluster, 63 kinds) is one raw request sent to one of the three nodes in turn, so
each node's front makes its checks. What each principal may do is worked out here from
the grants with Kafka's rules (DENY-free: an ALLOW of the operation or ALL, DESCRIBE
implied by READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS, super users
everything), not by asking the authorizer. The table is printed (pytest -s shows it).
And what a refusal leaves: a refused produce writes nothing (each topic's end offset is
its seed record plus one per allowed produce), a refused fetch returns no bytes, a
refused JoinGroup leaves the group (its state, protocol and members) as it was, and a
topic is created or deleted only by those allowed to. DescribeCluster is never refused:
without DESCRIBE on the cluster its authorized operations are 0, shown as DENIED(31).
The allowed OffsetDelete and DeleteRecords are logged by the coordinator and the leader
naming the SASL principal, also when the node reached passed the call on.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.static.primitive import i8, i16, i32

from tests.e2e.acl_matrix_attempts import (
    ANY_NAME,
    DENIALS,
    SECONDS,
    Attempt,
    Check,
    cluster_attempts,
    group_attempts,
    topic_attempts,
    txn_attempts,
)
from tests.inprocess import InProcessNode, start_inprocess_node
from tests.kafka_raw import RawConnection
from tests.node_harness import free_port_block
from tests.security.secure_node import plain_jaas
from zonegate.metastore.models import AclOperation as Op
from zonegate.metastore.models import ResourceType as RT

pytestmark = pytest.mark.e2e

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = ("alice", "bob", "admin", "eve")
OWNERS = ("alice", "bob")
ALL_OPS = frozenset({Op.ALL})
# (principal, resource type, prefix, operations): every grant is PREFIXED and ALLOW.
GRANTS: tuple[tuple[str, RT, str, frozenset[Op]], ...] = (
    ("alice", RT.TOPIC, "alice-", ALL_OPS),
    ("alice", RT.GROUP, "alice-", ALL_OPS),
    ("alice", RT.TRANSACTIONAL_ID, "alice-", frozenset({Op.WRITE})),
    ("bob", RT.TOPIC, "bob-", frozenset({Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER})),
    ("bob", RT.GROUP, "bob-", frozenset({Op.READ})),
)
IMPLIES_DESCRIBE = {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE}


def may(user: str, op: Op, rt: RT, name: str) -> bool:
    """What the grants allow, by Kafka's rules (the module doc)."""
    if user == "admin":
        return True
    for who, kind, prefix, ops in GRANTS:
        if who != user or kind != rt or not (name == ANY_NAME or name.startswith(prefix)):
            continue
        if Op.ALL in ops or op in ops:
            return True
        if op == Op.DESCRIBE and ops & IMPLIES_DESCRIBE:
            return True
        if op == Op.DESCRIBE_CONFIGS and Op.ALTER_CONFIGS in ops:
            return True
    return False


def expected(user: str, attempt: Attempt) -> int | None:
    """The refusal the attempt must get, or None when it must be allowed."""
    if attempt.either and not any(may(user, op, rt, n) for op, rt, n, _ in attempt.either):
        return attempt.either[0][3]
    for op, rt, name, code in attempt.checks:
        if not may(user, op, rt, name):
            return code
    return None


class Cluster:
    def __init__(self, node: InProcessNode, base: int) -> None:
        self.node = node
        self.ports = [base + i for i in range(3)]
        self._conns: dict[tuple[str, int], RawConnection] = {}
        self.members: dict[str, tuple[str, int]] = {}  # group owner -> (member id, generation)

    def conn(self, user: str, i: int) -> RawConnection:
        """`user`'s authenticated connection to node i (zone-a, zone-b, zone-c)."""
        key = (user, i % 3)
        if key not in self._conns:
            conn = RawConnection(self.ports[i % 3], timeout=30)
            assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
            token = f"\x00{user}\x00{user}-secret".encode()
            assert conn.request(SaslAuthenticateRequest(auth_bytes=token)).error_code == 0
            self._conns[key] = conn
        return self._conns[key]

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = free_port_block(3)
    node = start_inprocess_node(
        tmp_path_factory.mktemp("acl-matrix") / "cluster",
        [
            "--zones", "zone-a,zone-b,zone-c",
            "--listen", f"SASL_PLAINTEXT://127.0.0.1:{base}",
            "--authorizer-class-name", STANDARD,
            "--super-users", "User:admin",
            "--sasl-enabled-mechanisms", "PLAIN",
            "--listener-setting",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            + plain_jaas({u: f"{u}-secret" for u in USERS}),
            "--group-initial-rebalance-delay-ms", "0",
        ],
    )  # fmt: skip
    c = Cluster(node, base)
    try:
        _set_up(c)
        yield c
    finally:
        c.close()
        node.stop()


def _set_up(c: Cluster) -> None:
    admin = c.conn("admin", 0)
    names = [f"{o}-t" for o in OWNERS] + [f"{o}-del-{u}" for o in OWNERS for u in USERS]
    made = admin.request(
        CreateTopicsRequest(
            topics=tuple(
                CreatableTopic(
                    name=n,  # type: ignore[arg-type]
                    num_partitions=i32(1),
                    replication_factor=i16(-1),
                    assignments=(),
                    configs=(),
                )
                for n in names
            ),
            timeout=SECONDS,  # type: ignore[arg-type]
        )
    )
    assert {t.error_code for t in made.topics} == {0}, made
    creations = tuple(
        AclCreation(
            resource_type=i8(int(rt)),
            resource_name=prefix,
            resource_pattern_type=i8(4),
            principal=f"User:{who}",
            host="*",
            operation=i8(int(op)),
            permission_type=i8(3),
        )
        for who, rt, prefix, ops in GRANTS
        for op in sorted(ops)
    )
    answer = admin.request(CreateAclsRequest(creations=creations))
    assert {r.error_code for r in answer.results} == {0}, answer
    # Every node's copy holds them (each reads the store's ACL version every 0.5 s).
    deadline = time.monotonic() + 10
    while any(n.authorizer.acl_count != len(creations) for n in c.node.nodes):
        assert time.monotonic() < deadline, "ACLs did not reach every node"
        time.sleep(0.05)
    # And every transaction shard is held by its owner at the shard's current epoch:
    # taken over in the background as the nodes join, a shard may pass through two nodes,
    # and until then a call is answered NOT_COORDINATOR, which clients retry but the
    # one-shot attempts here would record.
    while not _shards_settled(c):
        assert time.monotonic() < deadline + 10, "transaction shards not taken over"
        time.sleep(0.05)
    for owner in OWNERS:
        seed = topic_attempts(owner, "admin")
        _send(c, "admin", 0, seed[2])  # Produce: the seed record
        _send(c, "admin", 1, group_attempts(owner, "admin", ("", -1))[7])  # OffsetCommit
        _join(c, owner)


def _shards_settled(c: Cluster) -> bool:
    epochs = {o.shard: o.epoch for o in c.node.call(c.node.nodes[0].meta.txn_shards())}
    return all(
        (h := n.txn_coordinator.hosts.get(shard)) is not None
        and not h.lost
        and h.epoch == epochs.get(shard)
        for n in c.node.nodes
        for shard in range(50)
        if n.cluster.txn_shard_owner(shard) == n.config.node_id
    )


def _join(c: Cluster, owner: str) -> None:
    """One member in `{owner}-g`, in a Stable group, for the rest of the module."""
    conn = c.conn("admin", 2)
    ask = JoinGroupRequest(
        group_id=f"{owner}-g",  # type: ignore[arg-type]
        session_timeout=datetime.timedelta(seconds=120),  # type: ignore[arg-type]
        rebalance_timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
        member_id="",
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    first = conn.request(ask)
    assert first.error_code == 79, first  # MEMBER_ID_REQUIRED
    joined = conn.request(
        JoinGroupRequest(**{**_fields(ask), "member_id": first.member_id})  # type: ignore[arg-type]
    )
    assert joined.error_code == 0, joined
    synced = conn.request(
        SyncGroupRequest(
            group_id=f"{owner}-g",  # type: ignore[arg-type]
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            assignments=(),
        )
    )
    assert synced.error_code == 0, synced
    c.members[owner] = (joined.member_id, int(joined.generation_id))


def _fields(entity: Any) -> dict[str, Any]:
    return {f: getattr(entity, f) for f in entity.__dataclass_fields__ if not f.startswith("__")}


def _send(c: Cluster, user: str, i: int, attempt: Attempt) -> Any:
    return c.conn(user, i).request(attempt.request)


def _group_state(c: Cluster, group: str) -> Any:
    answer = c.conn("admin", 0).request(
        DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)  # type: ignore[arg-type]
    )
    g = answer.groups[0]
    return (g.error_code, g.group_state, g.protocol_data, tuple(m.member_id for m in g.members))


def _cell(code: int) -> str:
    if code in DENIALS:
        return f"DENIED({code})"
    return "ok" if code == 0 else f"ok({code})"


def test_every_principal_tries_every_api_on_every_resource(cluster: Cluster) -> None:
    rows: dict[tuple[str, str], dict[str, str]] = {}
    wrong: list[str] = []
    produced = dict.fromkeys(OWNERS, 1)  # the seed record
    changed: list[tuple[str, str, str, int]] = []  # (user, api, resource, node index)
    turn = 0
    for user in USERS:
        attempts: list[Attempt] = []
        for owner in OWNERS:
            attempts += topic_attempts(owner, user)
            attempts += group_attempts(owner, user, cluster.members[owner])
            attempts += txn_attempts(owner, user)
        attempts += cluster_attempts(user)
        for attempt in attempts:
            turn += 1
            before = _group_state(cluster, attempt.resource) if attempt.api == "JoinGroup" else None
            answer = _send(cluster, user, turn, attempt)
            code = attempt.code(answer)
            rows.setdefault((attempt.api, attempt.resource), {})[user] = _cell(code)
            refusal = expected(user, attempt)
            what = f"{user} {attempt.api} {attempt.resource}: got {code}"
            if refusal is None and code not in attempt.ok:
                wrong.append(f"{what}, expected one of {sorted(attempt.ok)}")
            elif refusal is not None and code != refusal:
                wrong.append(f"{what}, expected the refusal {refusal}")
            if attempt.api in ("OffsetDelete", "DeleteRecords") and code == 0:
                changed.append((user, attempt.api, attempt.resource, turn % 3))
            if attempt.api == "Produce" and code == 0:
                produced[attempt.resource.removesuffix("-t")] += 1
            if attempt.api == "Fetch":
                records = answer.responses[0].partitions[0].records
                if code in DENIALS:
                    assert not records, f"{what}: a refused fetch returned {len(records)} bytes"
                else:
                    assert records, f"{what}: an allowed fetch returned no record"
            if before is not None and refusal is not None:
                assert _group_state(cluster, attempt.resource) == before, f"{what}: group changed"
    _print_table(rows)
    assert not wrong, "\n".join(wrong)
    _changes_name_their_principal(cluster, changed)
    # A refused produce wrote nothing: each topic holds its seed and the allowed ones.
    for owner in OWNERS:
        ends = topic_attempts(owner, "admin")[4]  # ListOffsets, latest
        answer = _send(cluster, "admin", 0, ends)
        assert answer.topics[0].partitions[0].offset == produced[owner], owner
    # Topics made and deleted only by those allowed to.
    listed = cluster.conn("admin", 0).request(
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    )
    names = {t.name for t in listed.topics}
    for owner in OWNERS:
        for user in USERS:
            allowed = may(user, Op.CREATE, RT.TOPIC, f"{owner}-")
            assert (f"{owner}-new-{user}" in names) == allowed, (owner, user)
            allowed = may(user, Op.DELETE, RT.TOPIC, f"{owner}-")
            assert (f"{owner}-del-{user}" in names) != allowed, (owner, user)


def _changes_name_their_principal(c: Cluster, changed: list[tuple[str, str, str, int]]) -> None:
    """The coordinator's and the leader's log lines of the changes name the SASL principal
    of the client that caused them, also when the node it reached passed the call on (the
    principal carried over the node channel, docs/acls.md)."""
    lines = c.node.log_text().splitlines()
    for api, marker in (("OffsetDelete", "offsets of"), ("DeleteRecords", "records before")):
        logged = [line.rsplit("(by ", 1)[1] for line in lines if f" {marker} " in line]
        users = [f"User:{user})" for user, a, _, _ in changed if a == api]
        assert users and logged[-len(users) :] == users, (api, logged, users)
    # At least one OffsetDelete reached a node that does not coordinate its group.
    reached = {n.config.listeners[0].port: n for n in c.node.nodes}
    passed_on = [
        (user, group, i)
        for user, api, group, i in changed
        if api == "OffsetDelete"
        and (node := reached[c.ports[i]]).cluster.group_owner(group) != node.config.node_id
    ]
    assert passed_on, changed


def _print_table(rows: dict[tuple[str, str], dict[str, str]]) -> None:
    width = max(len(f"{api} {res}") for api, res in rows) + 2
    lines = [f"{'API resource':{width}s}" + "".join(f"{u:>13s}" for u in USERS)]
    for (api, res), cells in rows.items():
        lines.append(f"{api + ' ' + res:{width}s}" + "".join(f"{cells[u]:>13s}" for u in USERS))
    print("\n" + "\n".join(lines))


def test_the_table_covers_every_resource_type() -> None:
    """Topics, groups, transactional ids and the cluster each have attempts."""
    checks: list[Check] = []
    for attempt in [
        *topic_attempts("alice", "eve"),
        *group_attempts("alice", "eve", ("", -1)),
        *txn_attempts("alice", "eve"),
        *cluster_attempts("eve"),
    ]:
        checks += [*attempt.checks, *attempt.either]
    assert {rt for _, rt, _, _ in checks} == {
        RT.TOPIC,
        RT.GROUP,
        RT.TRANSACTIONAL_ID,
        RT.CLUSTER,
    }
