"""The KIP-848 server-side assignors as pure functions: balance, stickiness, ranges."""

from __future__ import annotations

import random
import uuid

import pytest

from zonegate.coordinator.assignors import (
    Assignment,
    AssignorMember,
    range_assignor,
    uniform,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
T3 = uuid.UUID(int=3)


def members(
    subs: dict[str, set[uuid.UUID]], current: dict[str, Assignment] | None = None
) -> dict[str, AssignorMember]:
    current = current or {}
    return {
        mid: AssignorMember(mid, None, frozenset(topics), current.get(mid, {}))
        for mid, topics in subs.items()
    }


def flat(a: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in a.items() for p in ps}


def check_exact_cover(result: dict[str, Assignment], partitions: dict[uuid.UUID, int]) -> None:
    seen: list[tuple[uuid.UUID, int]] = [tp for a in result.values() for tp in flat(a)]
    assert len(seen) == len(set(seen)), "a partition given to two members"
    assert set(seen) == {(t, p) for t, n in partitions.items() for p in range(n)}


def test_uniform_splits_evenly_and_covers_everything() -> None:
    parts = {T1: 7, T2: 3}
    result = uniform(members({"a": {T1, T2}, "b": {T1, T2}, "c": {T1, T2}}), parts)
    check_exact_cover(result, parts)
    sizes = sorted(len(flat(a)) for a in result.values())
    assert sizes == [3, 3, 4]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    parts = {T1: 12}
    before = uniform(members({"a": {T1}, "b": {T1}}), parts)
    after = uniform(members({"a": {T1}, "b": {T1}, "c": {T1}}, before), parts)
    check_exact_cover(after, parts)
    assert [len(flat(after[m])) for m in "abc"] == [4, 4, 4]
    # The old members only lose partitions; nothing moves between them.
    assert flat(after["a"]) <= flat(before["a"])
    assert flat(after["b"]) <= flat(before["b"])


def test_uniform_is_sticky_when_a_member_leaves() -> None:
    parts = {T1: 9}
    before = uniform(members({"a": {T1}, "b": {T1}, "c": {T1}}), parts)
    after = uniform(members({"a": {T1}, "b": {T1}}, before), parts)
    check_exact_cover(after, parts)
    assert flat(before["a"]) <= flat(after["a"])
    assert flat(before["b"]) <= flat(after["b"])


def test_uniform_respects_subscriptions() -> None:
    parts = {T1: 4, T2: 4, T3: 2}
    subs = {"a": {T1}, "b": {T1, T2}, "c": {T2, T3}}
    result = uniform(members(subs), parts)
    check_exact_cover(result, parts)
    for mid, a in result.items():
        assert set(a) <= subs[mid]
    # a can only take T1; b and c share the rest evenly enough.
    sizes = {mid: len(flat(a)) for mid, a in result.items()}
    assert max(sizes.values()) - min(sizes.values()) <= 1


def test_uniform_drops_partitions_of_unsubscribed_or_shrunk_topics() -> None:
    current: dict[str, Assignment] = {"a": {T1: frozenset({0, 1, 5}), T2: frozenset({0})}}
    result = uniform(members({"a": {T1}}, current), {T1: 3})
    assert result["a"] == {T1: frozenset({0, 1, 2})}


def test_uniform_more_members_than_partitions() -> None:
    parts = {T1: 2}
    result = uniform(members({m: {T1} for m in "abcd"}), parts)
    check_exact_cover(result, parts)
    assert sorted(len(flat(a)) for a in result.values()) == [0, 0, 1, 1]


@pytest.mark.parametrize("seed", range(20))
def test_uniform_random_churn_stays_exact_and_balanced(seed: int) -> None:
    rng = random.Random(seed)
    parts = {T1: rng.randint(1, 30), T2: rng.randint(1, 10)}
    current: dict[str, Assignment] = {}
    names = [f"m{i}" for i in range(8)]
    live: set[str] = set()
    for _ in range(15):
        if live and rng.random() < 0.4:
            live.discard(rng.choice(sorted(live)))
        else:
            live.add(rng.choice(names))
        if not live:
            continue
        current = uniform(members(dict.fromkeys(live, {T1, T2}), current), parts)
        check_exact_cover(current, parts)
        sizes = [len(flat(a)) for a in current.values()]
        assert max(sizes) - min(sizes) <= 1


def test_range_gives_consecutive_ranges_and_copartitions() -> None:
    parts = {T1: 3, T2: 3}
    result = range_assignor(members({"m0": {T1, T2}, "m1": {T1, T2}}), parts)
    check_exact_cover(result, parts)
    assert result["m0"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert result["m1"] == {T1: frozenset({2}), T2: frozenset({2})}


def test_range_orders_by_instance_id_when_there_is_one() -> None:
    ms = {
        "zzz": AssignorMember("zzz", "i0", frozenset({T1})),
        "aaa": AssignorMember("aaa", "i1", frozenset({T1})),
    }
    result = range_assignor(ms, {T1: 4})
    assert result["zzz"] == {T1: frozenset({0, 1})}
    assert result["aaa"] == {T1: frozenset({2, 3})}


def test_range_only_subscribers_of_each_topic() -> None:
    parts = {T1: 4, T2: 2}
    result = range_assignor(members({"a": {T1}, "b": {T1, T2}}), parts)
    check_exact_cover(result, parts)
    assert result["a"] == {T1: frozenset({0, 1})}
    assert result["b"] == {T1: frozenset({2, 3}), T2: frozenset({0, 1})}
