"""The leader's dynamic transaction settings resolved with Kafka's precedence: the node's
own dynamic value > the cluster's dynamic default > the command line > Kafka's default;
and the transaction settings Kafka keeps static refused as Kafka refuses them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from zonegate.broker.txn_settings import TXN_SETTINGS
from zonegate.metastore.api import open_metastore
from zonegate.services.broker_configs import InvalidBrokerConfig
from zonegate.services.catalog import Catalog
from zonegate.services.leader_txn_settings import LeaderTxnSettings

pytestmark = pytest.mark.unit

EXPIRY, VERIFY = "producer.id.expiration.ms", "transaction.partition.verification.enable"


def _run(tmp: Path, body: Callable[[Catalog, Catalog], Awaitable[None]]) -> None:
    """`body` with the catalogs of nodes 1 and 2 over one metadata store."""

    async def main() -> None:
        meta = open_metastore(f"sqlite:///{tmp / 'meta.db'}")
        try:
            one = Catalog(meta, lambda n, _: [1] * n, node_id=1)
            two = Catalog(meta, lambda n, _: [1] * n, node_id=2)
            await one.load()
            await two.load()
            await body(one, two)
        finally:
            await meta.close()

    asyncio.run(main())


def _settings(c: Catalog, expiry: int = 86_400_000, verify: bool = True) -> LeaderTxnSettings:
    return LeaderTxnSettings(
        lambda: c.defaults, producer_id_expiration_ms=expiry, verification=verify
    )


def _now(s: LeaderTxnSettings) -> tuple[int, bool]:
    return s.producer_id_expiration_ms(), s.verification_enabled()


def test_node_dynamic_over_cluster_dynamic_over_command_line_over_default(
    tmp_path: Path,
) -> None:
    async def body(one: Catalog, two: Catalog) -> None:
        default = _settings(two)  # node 2 started with no transaction flags
        static = _settings(one, expiry=5_000, verify=False)  # node 1 with both given
        assert _now(default) == (86_400_000, True)
        assert _now(static) == (5_000, False)

        async def alter(c: Catalog, scope: str, changes: dict[str, str | None]) -> None:
            await c.alter_defaults(scope, changes, replace=False, validate_only=False)

        # The cluster's default, set through node 1: over both command lines, on node 1
        # at once and on node 2 from its next catalog refresh.
        await alter(one, "", {EXPIRY: "60000", VERIFY: "TRUE"})
        assert _now(static) == (60_000, True)
        assert _now(default) == (86_400_000, True)
        assert await two.refresh()
        assert _now(default) == (60_000, True)

        # Node 2's own value over the cluster's, on node 2 only.
        await alter(one, "2", {EXPIRY: "1500", VERIFY: "false"})
        await two.refresh()
        assert _now(default) == (1_500, False)
        assert _now(static) == (60_000, True)

        # Removed, each layer gives way to the one under it.
        await alter(two, "2", {EXPIRY: None, VERIFY: None})
        assert _now(default) == (60_000, True)
        await alter(two, "", {EXPIRY: None, VERIFY: None})
        assert _now(default) == (86_400_000, True)
        await one.refresh()
        assert _now(static) == (5_000, False)

    _run(tmp_path, body)


@pytest.mark.parametrize("scope", ["", "1"])
def test_the_transaction_settings_kafka_keeps_static_are_refused(
    tmp_path: Path, scope: str
) -> None:
    """Every transaction setting a node has, other than the two Kafka 4.3 changes at run
    time, is refused dynamically with Kafka's INVALID_REQUEST message."""
    static = sorted(s.key for s in TXN_SETTINGS if s.key not in (EXPIRY, VERIFY))
    assert len(static) == len(TXN_SETTINGS) - 2

    async def body(one: Catalog, _: Catalog) -> None:
        for name in static:
            with pytest.raises(InvalidBrokerConfig) as refused:
                await one.alter_defaults(scope, {name: "1000"}, replace=False, validate_only=False)
            assert str(refused.value) == f"Cannot update these configs dynamically: [{name}]"
        # A bad value of a dynamic one: Kafka's message, nothing stored.
        with pytest.raises(InvalidBrokerConfig) as refused:
            await one.alter_defaults(scope, {EXPIRY: "0"}, replace=False, validate_only=False)
        assert str(refused.value) == (
            "Invalid value 0 for configuration producer.id.expiration.ms: Value must be at least 1"
        )
        assert one.defaults == {}

    _run(tmp_path, body)
