"""The leader's transaction settings changed at run time with a real admin client
(confluent-kafka's IncrementalAlterConfigs), as Kafka 4.3 lets a broker resource change
them: honoured by every node within a catalog refresh, with Kafka's precedence (the
node's own > the cluster's default > the command line > Kafka's default), and shown by
DescribeConfigs with the value in force and its source.

Two nodes (zones a and b) in the test's process. The change to
`transaction.partition.verification.enable` is seen as a leader sees it: a Produce v11
transactional batch with no transactional id is refused while verification is on, taken
once it is off; `producer.id.expiration.ms` as DescribeProducers sees it: an idle
producer forgotten at the next sweep once the value is short.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kio.schema.describe_producers.v0 import request as dp
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as ica
from kio.static.primitive import i8

from tests.inprocess import start_inprocess_node
from tests.kafka_raw import RawConnection
from tests.txn_coordinator.test_node_wiring import _until
from zonegate.broker.node import Node
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.records.build import build_batch

pytestmark = pytest.mark.integration

E = ErrorCode
EXPIRY, VERIFY = "producer.id.expiration.ms", "transaction.partition.verification.enable"


def _admin(node: Node) -> AdminClient:
    """An admin client of the node's zone (its metadata names that node)."""
    return AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{node.port}",
            "client.id": f"admin,zonegate_az={node.config.zone}",
        }
    )


def _alter(admin: AdminClient, broker: str, configs: dict[str, str | None]) -> None:
    """IncrementalAlterConfigs on a broker id (None: DELETE)."""
    entries = [
        ConfigEntry(
            name,
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for name, value in configs.items()
    ]
    res = ConfigResource(ResourceType.BROKER, broker, incremental_configs=entries)
    admin.incremental_alter_configs([res])[res].result(30)


def _alter_cluster_default(node: Node, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on the broker resource "" (the cluster's default), as
    kafka-configs.sh --entity-type brokers --entity-default sends it: the Python clients
    name a broker only by id."""
    req = ica.IncrementalAlterConfigsRequest(
        resources=(
            ica.AlterConfigsResource(
                resource_type=i8(4),
                resource_name="",
                configs=tuple(
                    ica.AlterableConfig(name=k, config_operation=i8(0), value=v)
                    for k, v in configs.items()
                ),
            ),
        ),
        validate_only=False,
    )
    conn = RawConnection(node.port)
    try:
        (answer,) = conn.request(req).responses
        assert answer.error_code == E.none, answer
    finally:
        conn.close()


def _described(admin: AdminClient, broker: str, name: str) -> tuple[str, int]:
    """The config's value and source as the broker shows them (the client keeps its
    synonyms by name, so the chain of one name is not seen here)."""
    res = ConfigResource(ResourceType.BROKER, broker)
    e = admin.describe_configs([res], request_timeout=30)[res].result(30)[name]
    return e.value, e.source


async def _append(node: Node, stream_id: int, pid: int, transactional: bool) -> ErrorCode:
    """A batch of Produce v11 with no transactional id, appended at its leader as the
    write path appends one: the leader's answer."""
    now = node.clock.wall_ms()
    data = build_batch(
        [(None, b"x", (), now)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=transactional,
    )
    loc = await node.wal.append(stream_id, data)
    (result,) = await node.leader.append(
        [
            AppendBatch(
                stream_id, ANY_EPOCH, loc.object_key, loc.position, loc.length, 1, now,
                pid, 0, 0, transactional=transactional, produce_version=11,
            )
        ]
    )  # fmt: skip
    return result.error


def test_dynamic_transaction_settings_reach_every_node_and_are_shown(tmp_path: Path) -> None:
    node = start_inprocess_node(
        tmp_path / "data",
        [
            "--zones", "zone-a,zone-b",
            "--producer-id-expiration-ms", "3600000",
            "--producer-id-expiration-check-interval-ms", "200",
        ],
    )  # fmt: skip
    conn = None
    try:
        a, b = node.nodes
        topic = node.call(a.catalog.create("orders", 1, {}))
        node.call(b.catalog.refresh(force=True))
        part = topic.partitions[0]
        leader, other = (a, b) if part.leader_node == a.config.node_id else (b, a)
        lid = str(leader.config.node_id)
        to_leader = _admin(leader)

        # The command line, under Kafka's default.
        assert _described(to_leader, lid, EXPIRY) == (
            "3600000",
            ConfigSource.STATIC_BROKER_CONFIG.value,
        )
        assert _described(to_leader, lid, VERIFY) == (
            "true",
            ConfigSource.DEFAULT_CONFIG.value,
        )

        # Verification on: a transactional batch its coordinator cannot confirm is refused.
        idle = node.call(a.txns.init_producer_id(None, 60000, None)).producer_id
        hung = node.call(a.txns.init_producer_id(None, 60000, None)).producer_id
        assert node.call(_append(leader, part.stream_id, hung, True)) == E.invalid_txn_state

        # The cluster's default, set through the other node: the leader honours it from
        # its next catalog refresh, over its command line.
        _alter_cluster_default(other, {EXPIRY: "1500", VERIFY: "false"})
        _until(
            lambda: leader.transactions.leader_settings.producer_id_expiration_ms() == 1500,
            "the cluster default in force at the leader",
            timeout=20,
        )
        # The leader's own value, over the cluster's, on the leader only.
        _alter(to_leader, lid, {VERIFY: "true"})
        _until(lambda: other.transactions.leader_settings.verification_enabled() is False, "other")
        assert leader.transactions.leader_settings.verification_enabled() is True
        assert node.call(_append(leader, part.stream_id, hung, True)) == E.invalid_txn_state
        assert _described(to_leader, lid, VERIFY) == (
            "true",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        assert _described(to_leader, lid, EXPIRY) == (
            "1500",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )

        # The leader's own value removed: the cluster's default (off) is in force there,
        # and the batch opens its transaction unverified, as Kafka takes it.
        _alter(to_leader, lid, {VERIFY: None})
        assert leader.transactions.leader_settings.verification_enabled() is False
        assert node.call(_append(leader, part.stream_id, hung, True)) == E.none
        assert node.call(_append(leader, part.stream_id, idle, False)) == E.none

        # producer.id.expiration.ms of 1500 ms (the command line said an hour): the idle
        # producer is forgotten at a sweep; the one with a transaction open stays.
        conn = RawConnection(leader.port)

        def producers() -> set[int]:
            answer = conn.request(
                dp.DescribeProducersRequest(
                    topics=(dp.TopicRequest(name="orders", partition_indexes=(0,)),)  # type: ignore[arg-type]
                )
            )
            p = answer.topics[0].partitions[0]
            assert p.error_code == E.none, p
            return {x.producer_id for x in p.active_producers}

        assert producers() >= {hung}
        _until(lambda: producers() == {hung}, "the idle producer id expired", timeout=20)

        # A setting Kafka keeps static is refused as Kafka refuses it.
        with pytest.raises(Exception, match="Cannot update these configs dynamically"):
            _alter(to_leader, lid, {"producer.id.expiration.check.interval.ms": "100"})
    finally:
        if conn is not None:
            conn.close()
        node.stop()
