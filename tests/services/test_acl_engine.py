"""The ACL decision (services/acl_engine.py), with the cases of Kafka's
StandardAuthorizerTest and AuthorizerTest ported: implication, principal and host
matching, DENY precedence, prefixes, allow.everyone.if.no.acl.found, super users,
authorizeByResourceType (KIP-679) and authorized operations (KIP-430); and a check
among 10,000 ACLs that looks at the few that can apply, not all of them."""

from __future__ import annotations

import pytest

from zonegate.metastore.models import (
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from zonegate.services.acl_engine import AclEngine, AclIndex, all_operations, bit_field

pytestmark = pytest.mark.unit

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
HOST = "127.0.0.1"


def acl(
    rtype: ResourceType,
    name: str,
    pattern: PatternType,
    principal: str,
    host: str,
    op: AclOperation,
    perm: AclPermission,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def engine(*acls: AclBinding, supers: str = "", allow_if_no_acl: bool = False) -> AclEngine:
    return AclEngine(
        AclIndex(acls),
        super_users=frozenset(s for s in supers.split(";") if s),
        allow_if_no_acl=allow_if_no_acl,
    )


def foo_acl(op: AclOperation, perm: AclPermission) -> AclBinding:
    return acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", op, perm)


def bar_acl(op: AclOperation, perm: AclPermission) -> AclBinding:
    return acl(GROUP, "bar", LITERAL, "User:*", "*", op, perm)


def decide(
    e: AclEngine, user: str, actions: list[tuple[AclOperation, ResourceType, str]], host: str = HOST
) -> list[bool]:
    return [e.allowed(f"User:{user}", host, op, rt, name) for op, rt, name in actions]


@pytest.mark.parametrize("op", [Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_allow_implies_describe(op: AclOperation) -> None:
    assert engine(foo_acl(op, ALLOW)).allowed("User:bob", HOST, Op.DESCRIBE, TOPIC, "foo_bar")


def test_create_does_not_imply_describe() -> None:
    e = engine(foo_acl(Op.CREATE, ALLOW))
    decision = e.authorize("User:bob", HOST, Op.DESCRIBE, TOPIC, "foo_bar")
    assert not decision.allowed
    assert decision.rule == "DefaultDeny"  # the resource has ACLs, none applies


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_deny_does_not_imply(op: AclOperation) -> None:
    # a DENY of READ does not deny DESCRIBE: with an ALLOW DESCRIBE beside it, allowed
    e = engine(foo_acl(op, DENY), foo_acl(Op.DESCRIBE, ALLOW))
    assert e.allowed("User:bob", HOST, Op.DESCRIBE, TOPIC, "foo_bar")
    assert not e.allowed("User:bob", HOST, op, TOPIC, "foo_bar")


def test_describe_configs_implied_by_alter_configs_only_when_allowed() -> None:
    for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert engine(foo_acl(op, ALLOW)).allowed(
            "User:bob", HOST, Op.DESCRIBE_CONFIGS, TOPIC, "foo_x"
        )
    e = engine(foo_acl(Op.ALTER_CONFIGS, DENY), foo_acl(Op.DESCRIBE_CONFIGS, ALLOW))
    assert e.allowed("User:bob", HOST, Op.DESCRIBE_CONFIGS, TOPIC, "foo_x")
    assert not e.allowed("User:bob", HOST, Op.ALTER_CONFIGS, TOPIC, "foo_x")
    assert not engine(foo_acl(Op.DESCRIBE, DENY)).allowed(
        "User:bob", HOST, Op.DESCRIBE, TOPIC, "foo_bar"
    )


def test_principal_matching() -> None:
    assert engine(foo_acl(Op.READ, ALLOW)).allowed("User:bob", HOST, Op.READ, TOPIC, "foo_bar")
    assert not engine(foo_acl(Op.READ, ALLOW)).allowed(
        "User:alice", HOST, Op.READ, TOPIC, "foo_bar"
    )
    d = engine(bar_acl(Op.READ, DENY), bar_acl(Op.READ, ALLOW)).authorize(
        "User:alice", HOST, Op.READ, GROUP, "bar"
    )
    assert not d.allowed and d.rule.startswith("MatchingAcl(") and "permissionType=DENY" in d.rule


def test_simple_authorizations() -> None:
    e = engine(
        foo_acl(Op.READ, ALLOW),
        foo_acl(Op.WRITE, ALLOW),
        bar_acl(Op.DESCRIBE_CONFIGS, ALLOW),
        bar_acl(Op.ALTER_CONFIGS, ALLOW),
    )
    assert e.allowed("User:bob", HOST, Op.READ, TOPIC, "foo_")
    assert e.allowed("User:fred", HOST, Op.ALTER_CONFIGS, GROUP, "bar")


def test_deny_precedence_with_operation_all() -> None:
    e = engine(
        acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.ALL, DENY),
        acl(TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
        acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, DENY),
        acl(TOPIC, "foo", PREFIXED, "User:*", "*", Op.DESCRIBE, ALLOW),
    )
    assert decide(
        e,
        "alice",
        [
            (Op.WRITE, TOPIC, "foo"),
            (Op.READ, TOPIC, "foo"),
            (Op.DESCRIBE, TOPIC, "foo"),
            (Op.READ, TOPIC, "foobar"),
        ],
    ) == [False, False, False, True]
    assert decide(
        e,
        "bob",
        [
            (Op.DESCRIBE, TOPIC, "foo"),
            (Op.READ, TOPIC, "foo"),
            (Op.WRITE, TOPIC, "foo"),
            (Op.DESCRIBE, TOPIC, "foobaz"),
            (Op.READ, TOPIC, "foobaz"),
        ],
    ) == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    e = engine(
        acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, ALLOW),
        acl(TOPIC, "bar", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
        acl(TOPIC, "baz", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
    )
    actions = [
        (Op.WRITE, TOPIC, "foo"),
        (Op.DESCRIBE_CONFIGS, TOPIC, "bar"),
        (Op.DESCRIBE, TOPIC, "baz"),
    ]
    assert decide(e, "alice", actions) == [True, True, False]
    assert decide(
        e, "bob", [(Op.WRITE, TOPIC, "foo"), (Op.READ, TOPIC, "bar"), (Op.DESCRIBE, TOPIC, "baz")]
    ) == [
        True,
        False,
        True,
    ]
    assert decide(
        e,
        "malory",
        [(Op.DESCRIBE, TOPIC, "foo"), (Op.WRITE, TOPIC, "bar"), (Op.READ, TOPIC, "baz")],
    ) == [True, False, False]


def test_host_address() -> None:
    host1, host2, local = "192.168.1.1", "192.168.1.2", "10.0.0.7"
    e = engine(
        acl(TOPIC, "foo", LITERAL, "User:alice", host1, Op.READ, DENY),
        acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.READ, ALLOW),
        acl(TOPIC, "bar", LITERAL, "User:bob", host2, Op.READ, ALLOW),
        acl(TOPIC, "bar", LITERAL, "User:*", local, Op.DESCRIBE, ALLOW),
    )
    actions = [(Op.READ, TOPIC, "foo"), (Op.READ, TOPIC, "bar"), (Op.DESCRIBE, TOPIC, "bar")]
    assert decide(e, "alice", actions, local) == [True, False, True]
    assert decide(e, "alice", actions, host1) == [False, False, False]
    assert decide(e, "alice", actions, host2) == [True, False, False]
    assert decide(e, "bob", actions, local) == [False, False, True]
    assert decide(e, "bob", actions, host1) == [False, False, False]
    assert decide(e, "bob", actions, host2) == [False, True, True]


def many_acls() -> AclEngine:
    return engine(
        acl(TOPIC, "green2", LITERAL, "User:*", "*", Op.READ, ALLOW),
        acl(TOPIC, "green", PREFIXED, "User:bob", "*", Op.READ, ALLOW),
        acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", Op.READ, ALLOW),
        acl(TOPIC, "betamax", LITERAL, "User:bob", "*", Op.READ, ALLOW),
        acl(TOPIC, "beta", PREFIXED, "User:*", "*", Op.READ, ALLOW),
        acl(TOPIC, "alpha", PREFIXED, "User:*", "*", Op.READ, ALLOW),
        acl(TOPIC, "alp", PREFIXED, "User:bob", "*", Op.READ, DENY),
        acl(GROUP, "*", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
        acl(GROUP, "wheel", LITERAL, "User:*", "*", Op.WRITE, DENY),
    )


def test_authorization_with_many_acls() -> None:
    e = many_acls()
    assert decide(e, "bob", [(Op.READ, TOPIC, "green1"), (Op.WRITE, GROUP, "wheel")]) == [
        True,
        False,
    ]
    assert decide(
        e,
        "bob",
        [(Op.READ, TOPIC, "alpha"), (Op.WRITE, GROUP, "arbitrary"), (Op.READ, TOPIC, "ala")],
    ) == [
        False,
        True,
        False,
    ]


def test_prefix_acls() -> None:
    e = engine(
        acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
        acl(TOPIC, "foobar", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
        acl(TOPIC, "f", PREFIXED, "User:bob", "*", Op.ALL, ALLOW),
    )
    assert decide(
        e,
        "bob",
        [(Op.WRITE, TOPIC, "foobarr"), (Op.READ, TOPIC, "goobar"), (Op.READ, TOPIC, "fooa")],
    ) == [
        True,
        False,
        True,
    ]
    assert decide(
        e,
        "alice",
        [(Op.DESCRIBE, TOPIC, "fooa"), (Op.WRITE, TOPIC, "bar"), (Op.READ, TOPIC, "baz")],
    ) == [
        True,
        False,
        False,
    ]


def test_a_literal_acl_is_no_prefix() -> None:
    e = engine(acl(TOPIC, "foo", LITERAL, "User:bob", "*", Op.READ, ALLOW))
    assert e.allowed("User:bob", HOST, Op.READ, TOPIC, "foo")
    assert not e.allowed("User:bob", HOST, Op.READ, TOPIC, "foobar")
    assert not e.allowed("User:bob", HOST, Op.READ, TOPIC, "fo")


def test_wildcard_literal_matches_every_name_and_its_deny_wins() -> None:
    e = engine(
        acl(TOPIC, "*", LITERAL, "User:bob", "*", Op.READ, ALLOW),
        acl(TOPIC, "secret", PREFIXED, "User:bob", "*", Op.READ, DENY),
    )
    assert e.allowed("User:bob", HOST, Op.READ, TOPIC, "anything")
    assert not e.allowed("User:bob", HOST, Op.READ, TOPIC, "secret-1")
    e = engine(
        acl(TOPIC, "*", LITERAL, "User:*", "*", Op.WRITE, DENY),
        acl(TOPIC, "mine", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
    )
    assert not e.allowed("User:bob", HOST, Op.WRITE, TOPIC, "mine")


def test_allow_everyone_if_no_acl_found() -> None:
    acls = [acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", Op.READ, ALLOW)]
    on = engine(*acls, supers="User:alice;User:chris", allow_if_no_acl=True)
    assert not on.allowed("User:Bob", HOST, Op.READ, TOPIC, "topic1")
    assert on.allowed("User:Bob", HOST, Op.READ, TOPIC, "topic2")
    assert on.authorize("User:Bob", HOST, Op.READ, TOPIC, "topic2").rule == "DefaultAllow"
    off = engine(*acls, supers="User:alice;User:chris")
    assert not off.allowed("User:Bob", HOST, Op.READ, TOPIC, "topic1")
    assert not off.allowed("User:Bob", HOST, Op.READ, TOPIC, "topic2")
    # an ACL of another principal on the resource is enough to count as "found"
    assert not on.allowed("User:Bob", HOST, Op.WRITE, TOPIC, "topic1")


def test_super_users_pass_every_deny() -> None:
    e = engine(
        acl(TOPIC, "*", LITERAL, "User:*", "*", Op.ALL, DENY), supers="User:admin; User:ops "
    )
    assert e.authorize("User:admin", HOST, Op.DELETE, TOPIC, "t").rule == "SuperUser"
    assert e.allowed("User:admin", HOST, Op.ALTER, CLUSTER, "kafka-cluster")
    assert not e.allowed("User:bob", HOST, Op.READ, TOPIC, "t")


# -- authorizeByResourceType (AuthorizerTest.testAuthorizeByResourceType*) ---------
def by_type(e: AclEngine, user: str = "bob", op: AclOperation = Op.WRITE, host: str = HOST) -> bool:
    return e.authorize_by_resource_type(f"User:{user}", host, op, TOPIC)


def test_by_resource_type_no_acls() -> None:
    assert not by_type(engine())
    assert by_type(engine(allow_if_no_acl=True))
    assert by_type(engine(supers="User:bob"))


def test_by_resource_type_allow_and_dominating_denies() -> None:
    assert by_type(engine(acl(TOPIC, "t1", LITERAL, "User:bob", "*", Op.WRITE, ALLOW)))
    assert not by_type(engine(acl(TOPIC, "t1", LITERAL, "User:bob", "*", Op.READ, ALLOW)))
    assert not by_type(
        engine(
            acl(TOPIC, "t1", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
            acl(TOPIC, "t1", LITERAL, "User:bob", "*", Op.WRITE, DENY),
        )
    )
    assert not by_type(
        engine(
            acl(TOPIC, "abc", PREFIXED, "User:bob", "*", Op.WRITE, ALLOW),
            acl(TOPIC, "ab", PREFIXED, "User:*", "*", Op.ALL, DENY),
        )
    )
    # a deny of a longer prefix does not dominate the allow
    assert by_type(
        engine(
            acl(TOPIC, "abc", PREFIXED, "User:bob", "*", Op.WRITE, ALLOW),
            acl(TOPIC, "abcd", PREFIXED, "User:bob", "*", Op.WRITE, DENY),
        )
    )
    # a literal deny does not dominate a prefixed allow of the same name
    assert by_type(
        engine(
            acl(TOPIC, "abc", PREFIXED, "User:bob", "*", Op.WRITE, ALLOW),
            acl(TOPIC, "abc", LITERAL, "User:bob", "*", Op.WRITE, DENY),
        )
    )


def test_by_resource_type_wildcards_and_hosts() -> None:
    assert by_type(engine(acl(TOPIC, "*", LITERAL, "User:*", "*", Op.WRITE, ALLOW)))
    assert not by_type(
        engine(
            acl(TOPIC, "*", LITERAL, "User:*", "*", Op.WRITE, ALLOW),
            acl(TOPIC, "*", LITERAL, "User:bob", "*", Op.WRITE, DENY),
            acl(TOPIC, "t1", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
        )
    )
    only_there = engine(acl(TOPIC, "t1", LITERAL, "User:bob", "10.0.0.1", Op.WRITE, ALLOW))
    assert by_type(only_there, host="10.0.0.1")
    assert not by_type(only_there, host="10.0.0.2")
    # a super user passes a wildcard DENY
    deny_all = acl(TOPIC, "*", LITERAL, "User:*", "*", Op.ALL, DENY)
    assert by_type(engine(deny_all, supers="User:bob"))


# -- authorized operations (KIP-430) -------------------------------------------------
def test_authorized_operations_without_acls_are_every_supported_one() -> None:
    topic_all = all_operations(TOPIC)
    assert bin(topic_all).count("1") == 8
    assert bin(all_operations(CLUSTER)).count("1") == 7
    assert bin(all_operations(GROUP)).count("1") == 5
    assert topic_all == bit_field(
        [
            Op.READ,
            Op.WRITE,
            Op.CREATE,
            Op.DELETE,
            Op.ALTER,
            Op.DESCRIBE,
            Op.DESCRIBE_CONFIGS,
            Op.ALTER_CONFIGS,
        ]
    )


def test_authorized_operations_follow_the_acls() -> None:
    e = engine(acl(TOPIC, "t-", PREFIXED, "User:bob", "*", Op.WRITE, ALLOW))
    assert e.authorized_operations("User:bob", HOST, TOPIC, "t-1") == bit_field(
        [Op.WRITE, Op.DESCRIBE]
    )
    assert e.authorized_operations("User:eve", HOST, TOPIC, "t-1") == 0
    assert e.authorized_operations("User:root", HOST, TOPIC, "t-1") == 0
    supers = engine(supers="User:root")
    assert supers.authorized_operations(
        "User:root", HOST, CLUSTER, "kafka-cluster"
    ) == all_operations(CLUSTER)


# -- a check among many ACLs ---------------------------------------------------------------
class CountingIndex(AclIndex):
    """Counts the ACLs a check is handed, to show it is not a scan."""

    handed = 0

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        found = super().matching(resource_type, name)
        CountingIndex.handed += len(found)
        return found


def test_ten_thousand_acls_check_looks_at_the_few_that_apply() -> None:
    acls = []
    for i in range(5000):
        acls.append(acl(TOPIC, f"tenant{i}-", PREFIXED, f"User:tenant{i}", "*", Op.ALL, ALLOW))
        acls.append(
            acl(TOPIC, f"tenant{i}-orders", LITERAL, f"User:reader{i}", "*", Op.READ, ALLOW)
        )
    index = CountingIndex(acls)
    assert len(index) == 10_000
    e = AclEngine(index)
    CountingIndex.handed = 0
    assert e.allowed("User:tenant42", HOST, Op.WRITE, TOPIC, "tenant42-orders")
    assert e.allowed("User:reader42", HOST, Op.READ, TOPIC, "tenant42-orders")
    assert not e.allowed("User:tenant43", HOST, Op.WRITE, TOPIC, "tenant42-orders")
    assert not e.allowed("User:tenant4", HOST, Op.WRITE, TOPIC, "tenant42-orders")
    assert CountingIndex.handed <= 4 * 2


def test_a_decision_is_kept_for_its_snapshot_and_the_memo_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A repeated check is answered from the engine's memo (the index is not asked
    again); a new snapshot decides afresh; past the bound the memo starts again."""
    import zonegate.services.acl_engine as acl_engine

    grant = acl(TOPIC, "orders", LITERAL, "User:alice", "*", Op.WRITE, ALLOW)
    e = AclEngine(CountingIndex([grant]))
    CountingIndex.handed = 0
    for _ in range(3):
        assert e.allowed("User:alice", HOST, Op.WRITE, TOPIC, "orders")
        assert not e.allowed("User:bob", HOST, Op.WRITE, TOPIC, "orders")
    assert CountingIndex.handed == 2  # one look-up per distinct question
    # The same questions over a snapshot without the grant: decided again, refused.
    after = e.with_index(AclIndex())
    assert not after.allowed("User:alice", HOST, Op.WRITE, TOPIC, "orders")
    assert e.allowed("User:alice", HOST, Op.WRITE, TOPIC, "orders")  # the old one keeps its own
    monkeypatch.setattr(acl_engine, "DECISIONS_KEPT", 4)
    bounded = AclEngine(CountingIndex([grant]))
    for i in range(10):
        assert not bounded.allowed("User:alice", HOST, Op.WRITE, TOPIC, f"t{i}")
        assert len(bounded._decisions) <= 4
    CountingIndex.handed = 0
    assert not bounded.allowed("User:alice", HOST, Op.WRITE, TOPIC, "t9")
    assert CountingIndex.handed == 0  # the latest ones are kept


# -- core's AuthorizerTest -----------------------------------------------------------
VALID_OPS = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]


@pytest.mark.parametrize(
    ("parent", "implied"),
    [
        (Op.ALL, set(VALID_OPS)),
        (Op.READ, {Op.DESCRIBE}),
        (Op.WRITE, {Op.DESCRIBE}),
        (Op.DELETE, {Op.DESCRIBE}),
        (Op.ALTER, {Op.DESCRIBE}),
        (Op.ALTER_CONFIGS, {Op.DESCRIBE_CONFIGS}),
        (Op.DESCRIBE, set()),
        (Op.DESCRIBE_CONFIGS, set()),
    ],
)
def test_acl_inheritance_of_allow(parent: AclOperation, implied: set[AclOperation]) -> None:
    e = engine(acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", "*", parent, ALLOW))
    for op in VALID_OPS:
        expected = op in implied or op == parent
        assert e.allowed("User:alice", "192.168.3.1", op, CLUSTER, "kafka-cluster") == expected, op


@pytest.mark.parametrize(
    ("parent", "denied"),
    [(Op.ALL, set(VALID_OPS)), (Op.DESCRIBE, set()), (Op.DESCRIBE_CONFIGS, set())],
)
def test_acl_inheritance_of_deny(parent: AclOperation, denied: set[AclOperation]) -> None:
    e = engine(
        acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", "*", parent, DENY),
        acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", "*", Op.ALL, ALLOW),
    )
    for op in VALID_OPS:
        expected = not (op in denied or op == parent)
        assert e.allowed("User:alice", "192.168.3.1", op, CLUSTER, "kafka-cluster") == expected, op


def test_topic_acl() -> None:
    host1, host2 = "192.168.1.1", "192.168.1.2"
    e = engine(
        acl(TOPIC, "t", LITERAL, "User:alice", host1, Op.READ, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:alice", host2, Op.READ, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:alice", host1, Op.READ, DENY),
        acl(TOPIC, "t", LITERAL, "User:alice", host1, Op.WRITE, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:alice", "*", Op.DESCRIBE, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:rob", "*", Op.READ, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:batman", "*", Op.WRITE, ALLOW),
    )
    assert e.allowed("User:alice", host2, Op.READ, TOPIC, "t")
    assert not e.allowed("User:alice", host1, Op.READ, TOPIC, "t")
    assert e.allowed("User:alice", host1, Op.WRITE, TOPIC, "t")
    assert not e.allowed("User:alice", host2, Op.WRITE, TOPIC, "t")
    assert e.allowed("User:alice", host1, Op.DESCRIBE, TOPIC, "t")
    assert e.allowed("User:alice", host2, Op.DESCRIBE, TOPIC, "t")
    assert not e.allowed("User:alice", host1, Op.ALTER, TOPIC, "t")
    assert not e.allowed("User:alice", host2, Op.ALTER, TOPIC, "t")
    assert e.allowed("User:rob", host1, Op.DESCRIBE, TOPIC, "t")
    assert e.allowed("User:batman", host1, Op.DESCRIBE, TOPIC, "t")
    assert e.allowed("User:rob", host1, Op.READ, TOPIC, "t")
    assert e.allowed("User:batman", host1, Op.WRITE, TOPIC, "t")


def test_authorize_with_empty_resource_name() -> None:
    assert not engine().allowed("User:alice", HOST, Op.READ, GROUP, "")
    e = engine(acl(GROUP, "*", LITERAL, "User:alice", "*", Op.READ, ALLOW))
    assert e.allowed("User:alice", HOST, Op.READ, GROUP, "")


def test_single_character_resource_acls() -> None:
    e = engine(acl(TOPIC, "f", LITERAL, "User:alice", "*", Op.READ, ALLOW))
    assert e.allowed("User:alice", HOST, Op.READ, TOPIC, "f")
    assert not e.allowed("User:alice", HOST, Op.READ, TOPIC, "foo")
    e = engine(
        acl(TOPIC, "f", LITERAL, "User:alice", "*", Op.READ, ALLOW),
        acl(TOPIC, "_", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
    )
    assert e.allowed("User:alice", HOST, Op.READ, TOPIC, "_foo")
    assert e.allowed("User:alice", HOST, Op.READ, TOPIC, "_")
    assert not e.allowed("User:alice", HOST, Op.READ, TOPIC, "foo_")


def test_authorize_with_prefixed_resource_among_unrelated_denies() -> None:
    deny = [
        ("a_other", LITERAL),
        ("a_other", PREFIXED),
        ("foo-1f2e", PREFIXED),
        ("foo-9a8b", PREFIXED),
        ("foo-77-zzz", PREFIXED),
        ("fooo-1", PREFIXED),
        ("fo-2", PREFIXED),
        ("fop-3", PREFIXED),
        ("fon-4", PREFIXED),
        ("fon-", PREFIXED),
        ("z_other", PREFIXED),
        ("z_other", LITERAL),
    ]
    acls = [acl(TOPIC, n, pt, "User:alice", "*", Op.READ, DENY) for n, pt in deny]
    acls.append(acl(TOPIC, "foo-", PREFIXED, "User:alice", "*", Op.READ, ALLOW))
    assert engine(*acls).allowed("User:alice", HOST, Op.READ, TOPIC, "foo-12345")
