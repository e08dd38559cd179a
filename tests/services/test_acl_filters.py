"""ACL filters and refused ACLs (services/acl_filters.py), as Kafka's
ResourcePatternFilter, AccessControlEntryFilter and AclControlManager decide."""

from __future__ import annotations

import pytest

from zonegate.metastore.models import (
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from zonegate.services.acl_filters import (
    MATCH_ALL,
    AclFilter,
    creation_problem,
    operation,
    resource_type,
)

pytestmark = pytest.mark.unit

Op, RT, PT, Perm = AclOperation, ResourceType, PatternType, AclPermission
LIT = AclBinding(RT.TOPIC, "foo", PT.LITERAL, "User:bob", "*", Op.READ, Perm.ALLOW)
WILD = AclBinding(RT.TOPIC, "*", PT.LITERAL, "User:bob", "*", Op.READ, Perm.ALLOW)
PRE = AclBinding(RT.TOPIC, "fo", PT.PREFIXED, "User:bob", "*", Op.READ, Perm.ALLOW)
OTHER = AclBinding(RT.TOPIC, "bar", PT.PREFIXED, "User:bob", "*", Op.READ, Perm.ALLOW)
GROUP = AclBinding(RT.GROUP, "foo", PT.LITERAL, "User:eve", "10.0.0.1", Op.ALL, Perm.DENY)
ALL = [LIT, WILD, PRE, OTHER, GROUP]


def select(f: AclFilter) -> list[AclBinding]:
    return [a for a in ALL if f.matches(a)]


def pattern(rt: ResourceType, name: str | None, pt: PatternType) -> AclFilter:
    return AclFilter(rt, name, pt, None, None, Op.ANY, Perm.ANY)


def test_any_matches_everything() -> None:
    assert select(MATCH_ALL) == ALL
    assert select(pattern(RT.TOPIC, None, PT.ANY)) == [LIT, WILD, PRE, OTHER]


def test_match_selects_what_applies_to_the_name() -> None:
    assert select(pattern(RT.TOPIC, "foo", PT.MATCH)) == [LIT, WILD, PRE]
    assert select(pattern(RT.ANY, "foo", PT.MATCH)) == [LIT, WILD, PRE, GROUP]


def test_any_and_exact_types_compare_names_exactly() -> None:
    assert select(pattern(RT.TOPIC, "foo", PT.ANY)) == [LIT]
    assert select(pattern(RT.TOPIC, "fo", PT.PREFIXED)) == [PRE]
    assert select(pattern(RT.TOPIC, "foo", PT.PREFIXED)) == []
    assert select(pattern(RT.TOPIC, "*", PT.LITERAL)) == [WILD]


def test_entry_filter() -> None:
    f = AclFilter(RT.ANY, None, PT.ANY, "User:eve", "10.0.0.1", Op.ALL, Perm.DENY)
    assert select(f) == [GROUP]
    assert select(AclFilter(RT.ANY, None, PT.ANY, None, None, Op.READ, Perm.ANY)) == [
        LIT,
        WILD,
        PRE,
        OTHER,
    ]
    assert select(AclFilter(RT.ANY, None, PT.ANY, None, "*", Op.ANY, Perm.ALLOW)) == [
        LIT,
        WILD,
        PRE,
        OTHER,
    ]


def test_unknown_filters_are_refused() -> None:
    assert (
        AclFilter(resource_type(99), None, PT.ANY, None, None, Op.ANY, Perm.ANY).problem()
        == "Unknown patternFilter."
    )
    assert (
        AclFilter(RT.ANY, None, PT.ANY, None, None, operation(42), Perm.ANY).problem()
        == "Unknown entryFilter."
    )
    assert MATCH_ALL.problem() is None


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (
            AclBinding(RT.CLUSTER, "c", PT.LITERAL, "User:a", "*", Op.ALTER, Perm.ALLOW),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (
            AclBinding(RT.TOPIC, "", PT.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
            "Invalid empty resource name",
        ),
        (
            AclBinding(RT.ANY, "t", PT.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
            "Invalid resourceType ANY",
        ),
        (
            AclBinding(RT.TOPIC, "t", PT.MATCH, "User:a", "*", Op.READ, Perm.ALLOW),
            "Invalid patternType MATCH",
        ),
        (
            AclBinding(RT.TOPIC, "t", PT.LITERAL, "User:a", "*", Op.ANY, Perm.ALLOW),
            "Invalid operation ANY",
        ),
        (
            AclBinding(RT.TOPIC, "t", PT.LITERAL, "User:a", "*", Op.READ, Perm.ANY),
            "Invalid permissionType ANY",
        ),
        (
            AclBinding(RT.TOPIC, "t", PT.LITERAL, "alice", "*", Op.READ, Perm.ALLOW),
            "expected a string in format principalType:principalName but got alice",
        ),
    ],
)
def test_refused_creations(binding: AclBinding, message: str) -> None:
    assert creation_problem(binding) == message


def test_delegation_tokens_and_users_are_refused_by_name() -> None:
    for rt in (RT.DELEGATION_TOKEN, RT.USER):
        problem = creation_problem(
            AclBinding(rt, "x", PT.LITERAL, "User:a", "*", Op.DESCRIBE, Perm.ALLOW)
        )
        assert problem is not None and rt.name in problem
    assert creation_problem(LIT) is None
    assert (
        creation_problem(
            AclBinding(RT.CLUSTER, "kafka-cluster", PT.LITERAL, "User:a", "*", Op.ALTER, Perm.ALLOW)
        )
        is None
    )
