"""Kafka's client quotas, case by case against Kafka's own rules (ClientQuotaManagerTest,
ClientQuotasImage, ClientQuotaControlManager): precedence, shared rates, the windowed
rate and throttle time, controller mutations' token bucket, and the admin APIs'
validation on a real (SQLite) metadata store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from zonegate.metastore.api import open_metastore
from zonegate.qos.client_quotas import QuotaManager, QuotaWindow, WindowedRate, entity
from zonegate.runtime.clock import ManualClock
from zonegate.services.quotas import QuotaChange, QuotaFilter, QuotaRequestError, QuotaService

pytestmark = pytest.mark.unit

U, C = "user", "client-id"


def manager(quotas: dict[tuple[tuple[str, str | None], ...], float]) -> QuotaManager:
    m = QuotaManager("producer_byte_rate")
    m.update({e: {"producer_byte_rate": v} for e, v in quotas.items()})
    return m


# Kafka's eight levels, each the only one set, then each set with all below it.
LEVELS = [
    (entity("alice", "app"), ("alice", "app")),
    (entity("alice", None), ("alice", "app")),
    (entity("alice"), ("alice", "")),
    (entity(None, "app"), ("alice", "app")),
    (entity(None, None), ("alice", "app")),
    (entity(None), ("alice", "")),
    (entity(client_id="app"), ("", "app")),
    (entity(client_id=None), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_quota_wins_in_kafkas_order(level: int) -> None:
    # Every level from this one down is set, each to a different value: this one wins.
    m = manager({e: 1000.0 + i for i, (e, _) in enumerate(LEVELS) if i >= level})
    tags = m.metric_tags("alice", "app")
    assert tags == LEVELS[level][1]
    assert m.limit(tags) == 1000.0 + level


def test_other_clients_fall_to_the_defaults_and_others_get_none() -> None:
    m = manager({entity("alice", "app"): 10.0, entity(client_id=None): 99.0})
    assert m.limit(m.metric_tags("alice", "app")) == 10.0
    assert m.limit(m.metric_tags("bob", "app")) == 99.0
    assert m.limit(m.metric_tags("alice", "other")) == 99.0
    m = manager({entity("alice"): 10.0})
    assert m.limit(m.metric_tags("bob", "x")) is None


def test_clients_under_one_quota_share_its_rate() -> None:
    m = manager({entity(client_id="app"): 1000.0})
    now = 1_000_000
    # Two users with the same client id share one rate: together they go over.
    assert m.record("alice", "app", 5_000, now) == 0
    assert m.record("bob", "app", 8_000, now) > 0
    # A user quota is per user: alice's bytes do not count against bob's.
    m = manager({entity(None): 1000.0})
    assert m.record("alice", "x", 10_000, now) == 0  # 10 000 over 10 s: the quota
    assert m.record("bob", "y", 10_000, now) == 0
    assert m.record("alice", "z", 1_000, now) > 0


def test_windowed_rate_and_throttle_time_are_kafkas() -> None:
    """ClientQuotaManagerTest.testQuotaViolation, number for number."""
    m = manager({entity(None, None): 500.0})
    t = 0
    for _ in range(10):  # 400/s for 10 s: within the quota
        assert m.record("ANONYMOUS", "unknown", 400, t) == 0
        t += 1000
    # A spike: 400 x 10 + 2300 = 6300 over 10.5 s = 600/s; (600 - 500) / 500 x 10.5 s.
    t += 500
    assert m.record("ANONYMOUS", "unknown", 2300, t) == 2100
    t += 2100
    # Throttled until the spike's sample rolls over.
    for _ in range(10):
        m.record("ANONYMOUS", "unknown", 400, t)
        t += 1000
    assert m.record("ANONYMOUS", "unknown", 0, t) == 0


def test_a_new_clients_burst_is_spread_over_the_whole_window() -> None:
    rate = WindowedRate(QuotaWindow(num=11, size_s=1))
    rate.record(10_000, 0)
    # One sample, 0 ms elapsed: Kafka counts at least num - 1 full windows.
    assert rate.window_ms(0) == 10_000
    assert rate.measure(0) == 1000.0


def test_old_samples_expire() -> None:
    rate = WindowedRate(QuotaWindow(num=3, size_s=1))
    rate.record(3000, 0)
    assert rate.measure(1000) == 1500.0  # 3000 over 2 s: at least num - 1 windows
    assert rate.measure(3000) == 0.0  # the sample is older than 3 windows


def test_no_quota_no_throttle_and_nothing_recorded() -> None:
    m = manager({})
    assert m.record("alice", "app", 10**12, 0) == 0
    assert not m.enabled


def test_controller_mutations_strict_and_permissive() -> None:
    m = QuotaManager("controller_mutation_rate", QuotaWindow(num=2, size_s=1))
    m.update({entity(client_id="admin"): {"controller_mutation_rate": 5.0}})
    # A burst of num x size x rate = 10 partitions, then the bucket goes below zero.
    assert m.take_tokens("", "admin", 8, 0, strict=True) == 0
    assert m.take_tokens("", "admin", 6, 0, strict=True) == 0  # 2 left: allowed, to -4
    assert m.take_tokens("", "admin", 1, 0, strict=True) == -1
    assert m.mutation_throttle_ms("", "admin", 0) == 800  # 4 tokens at 5/s
    assert m.take_tokens("", "admin", 1, 800, strict=True) == 0  # back at 0: allowed
    # Permissive (older versions): always let through, throttled for the debt.
    assert m.take_tokens("", "admin", 5, 800, strict=False) == 1200
    assert m.take_tokens("", "other", 100, 800, strict=True) == 0  # no quota for it


def _service(tmp_path: Path) -> QuotaService:
    return QuotaService(
        open_metastore(f"sqlite:///{tmp_path / 'meta.db'}"), ManualClock(), QuotaWindow()
    )


def test_alter_validates_each_entry_as_kafka_and_applies_the_others(tmp_path: Path) -> None:
    async def body() -> None:
        q = _service(tmp_path)
        ok = [QuotaChange("producer_byte_rate", 1024.0, False)]
        results = await q.alter(
            [
                ([(U, "alice"), (C, "app")], ok),
                ([], ok),
                ([(U, "a"), (U, "b")], ok),
                ([("group", "g")], ok),
                ([(U, "")], ok),
                ([("ip", "10.0.0.1")], [QuotaChange("connection_creation_rate", 5, False)]),
                ([(U, None)], [QuotaChange("producer_byte_rate", 0.0, False)]),
                ([(U, "carol")], [QuotaChange("producer_byte_rate", 1.5, False)]),
                ([(C, "other")], [QuotaChange("fetch.max.bytes", 1.0, False)]),
                ([(C, None)], [QuotaChange("request_percentage", 12.5, False)]),
                ([(C, "nan")], [QuotaChange("request_percentage", float("nan"), False)]),
                ([(C, "inf")], [QuotaChange("request_percentage", float("inf"), False)]),
            ],
            validate_only=False,
        )
        assert [code for code, _ in results] == [
            ErrorCode.none,
            *[ErrorCode.invalid_request] * 8,
            ErrorCode.none,
            ErrorCode.invalid_request,
            ErrorCode.invalid_request,
        ]
        messages = [m for _, m in results]
        assert messages[1] == "Invalid empty client quota entity"
        assert messages[2] == "Invalid client quota entity, duplicate entity entry user"
        assert messages[3] == "Unhandled client quota entity type: group"
        assert messages[4] == "Empty user not supported"
        assert messages[5] is not None and "not supported by zonegate" in messages[5]
        assert messages[6] == "Quota producer_byte_rate must be greater than 0"
        assert messages[7] == "producer_byte_rate cannot be a fractional value."
        assert messages[8] == "Invalid configuration key fetch.max.bytes"
        everything = await q.describe([], strict=False)
        assert sorted(everything, key=repr) == sorted(
            [
                (((C, "app"), (U, "alice")), {"producer_byte_rate": 1024.0}),
                (((C, None),), {"request_percentage": 12.5}),
            ],
            key=repr,
        )
        # validate_only changes nothing; removal of the last key drops the entity.
        await q.alter([([(U, "bob")], ok)], validate_only=True)
        await q.alter(
            [([(C, None)], [QuotaChange("request_percentage", 0.0, True)])], validate_only=False
        )
        assert [e for e, _ in await q.describe([], strict=False)] == [((C, "app"), (U, "alice"))]
        # The node applies what it set at once.
        assert q.produce.limit(q.produce.metric_tags("alice", "app")) == 1024.0

    asyncio.run(body())


def test_describe_filters_as_kafka(tmp_path: Path) -> None:
    async def body() -> None:
        q = _service(tmp_path)
        one = [QuotaChange("consumer_byte_rate", 1000.0, False)]
        await q.alter(
            [
                ([(U, "alice")], one),
                ([(U, None)], one),
                ([(U, "alice"), (C, "app")], one),
                ([(C, "app")], one),
                ([(C, None)], one),
            ],
            validate_only=False,
        )

        async def names(filters: list[QuotaFilter], strict: bool) -> set[tuple[object, ...]]:
            return {e for e, _ in await q.describe(filters, strict)}

        alice = QuotaFilter(U, 0, "alice")
        assert await names([alice], False) == {((U, "alice"),), ((C, "app"), (U, "alice"))}
        assert await names([alice], True) == {((U, "alice"),)}
        assert await names([QuotaFilter(U, 1, None)], True) == {((U, None),)}
        assert await names([QuotaFilter(C, 2, None)], True) == {((C, "app"),), ((C, None),)}
        assert await names([QuotaFilter(C, 2, None), QuotaFilter(U, 2, None)], True) == {
            ((C, "app"), (U, "alice"))
        }
        assert len(await names([], False)) == 5 and await names([], True) == set()
        for bad, code in (
            ([QuotaFilter("", 0, "x")], ErrorCode.invalid_request),
            ([alice, alice], ErrorCode.invalid_request),
            ([QuotaFilter("group", 2, None)], ErrorCode.unsupported_version),
            ([QuotaFilter(U, 0, None)], ErrorCode.invalid_request),
            ([QuotaFilter(U, 1, "x")], ErrorCode.invalid_request),
            ([QuotaFilter(U, 2, "x")], ErrorCode.invalid_request),
            ([QuotaFilter(U, 7, None)], ErrorCode.invalid_request),
            ([QuotaFilter("ip", 2, None), alice], ErrorCode.invalid_request),
        ):
            with pytest.raises(QuotaRequestError) as info:
                await q.describe(bad, False)
            assert info.value.code == code

    asyncio.run(body())
