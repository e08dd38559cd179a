"""Group listing (ListGroups v4-5) with both admin clients over the three kinds of group:
a classic group of subscribed consumers, a KIP-848 group and a simple group made
by offset commits alone; filtered by state and by type, and agreeing with
DescribeGroups and ConsumerGroupDescribe (issue 18).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conftest import NodeFactory
from tests.e2e.group_harness import wait_for
from tests.e2e.test_groups import create_topic

pytestmark = pytest.mark.e2e

NODE_ARGS = [
    "--group-initial-rebalance-delay-ms",
    "0",
    "--group-consumer-heartbeat-interval-ms",
    "500",
]


def _consumer(bs: str, group: str, topic: str, protocol: str) -> Any:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": protocol})
    c.subscribe([topic])
    deadline = time.monotonic() + 60
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment(), f"{group} got partitions"
    return c


def test_list_groups_by_state_and_type(node_factory: NodeFactory) -> None:
    from confluent_kafka import (
        ConsumerGroupState,
        ConsumerGroupTopicPartitions,
        ConsumerGroupType,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.structs import OffsetAndMetadata

    node = node_factory(NODE_ARGS)
    bs, topic = node.bootstrap, "listed"
    create_topic(bs, topic, 2)
    classic = _consumer(bs, "g-classic", topic, "classic")
    modern = _consumer(bs, "g-848", topic, "consumer")
    simple = KafkaConsumer(bootstrap_servers=bs, group_id="g-simple", enable_auto_commit=False)
    simple.assign([KpTopicPartition(topic, 0)])
    simple.commit({KpTopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    simple.close()
    ck = AdminClient({"bootstrap.servers": bs})
    kp = KafkaAdminClient(bootstrap_servers=bs)

    def ck_list(**filters: Any) -> dict[str, tuple[bool, str, str]]:
        listed = ck.list_consumer_groups(**filters).result(30)
        assert not listed.errors
        return {
            g.group_id: (g.is_simple_consumer_group, g.state.name, g.type.name)
            for g in listed.valid
        }

    def kp_list(**filters: Any) -> dict[str, tuple[str, str, str]]:
        return {
            g["group_id"]: (g["protocol_type"], g["group_state"], g["group_type"])
            for g in kp.list_groups(**filters)
        }

    try:

        def states() -> dict[str, str]:
            return {g: state for g, (_, state, _) in ck_list().items()}

        wait_for(
            "both live groups stable",
            lambda: states().get("g-classic") == states().get("g-848") == "STABLE",
            timeout=30,
        )
        assert ck_list() == {
            "g-classic": (False, "STABLE", "CLASSIC"),
            "g-848": (False, "STABLE", "CONSUMER"),
            "g-simple": (True, "EMPTY", "CLASSIC"),
        }
        assert kp_list() == {
            "g-classic": ("consumer", "Stable", "classic"),
            "g-848": ("consumer", "Stable", "consumer"),
            "g-simple": ("", "Empty", "classic"),
        }
        # By type (v5) and by state (v4), with each client's own spelling.
        assert set(ck_list(types={ConsumerGroupType.CLASSIC})) == {"g-classic", "g-simple"}
        assert set(ck_list(types={ConsumerGroupType.CONSUMER})) == {"g-848"}
        assert set(ck_list(states={ConsumerGroupState.EMPTY})) == {"g-simple"}
        assert set(
            ck_list(states={ConsumerGroupState.STABLE}, types={ConsumerGroupType.CLASSIC})
        ) == {"g-classic"}
        assert set(kp_list(types_filter=["Consumer"])) == {"g-848"}
        assert set(kp_list(types_filter=["classic"], states_filter=["stable"])) == {"g-classic"}
        assert set(kp_list(states_filter=["Empty", "Stable"])) == {"g-classic", "g-848", "g-simple"}
        assert kp_list(types_filter=["share"]) == {}

        # DescribeGroups (classic) and ConsumerGroupDescribe (KIP-848) say the same.
        described = {
            g: f.result(30)
            for g, f in ck.describe_consumer_groups(["g-classic", "g-848", "g-simple"]).items()
        }
        assert {
            g: (d.is_simple_consumer_group, d.state.name, d.type.name) for g, d in described.items()
        } == ck_list()
        assert len(described["g-classic"].members) == len(described["g-848"].members) == 1
        kp_described = kp.describe_groups(["g-classic", "g-simple"])
        assert {
            g: (d["group_state"], d["protocol_type"], len(d["members"]))
            for g, d in kp_described.items()
        } == {"g-classic": ("Stable", "consumer", 1), "g-simple": ("Empty", "", 0)}

        # Members gone: both groups are empty, and still consumer groups, not simple ones
        # (Kafka keeps a classic group's protocol type).
        classic.close()
        modern.close()
        wait_for(
            "both groups empty",
            lambda: (
                set(ck_list(states={ConsumerGroupState.EMPTY}))
                == {"g-classic", "g-848", "g-simple"}
            ),
            timeout=30,
        )
        assert ck_list() == {
            "g-classic": (False, "EMPTY", "CLASSIC"),
            "g-848": (False, "EMPTY", "CONSUMER"),
            "g-simple": (True, "EMPTY", "CLASSIC"),
        }
        assert kp_list()["g-classic"] == ("consumer", "Empty", "classic")
        gone = ck.describe_consumer_groups(["g-classic"])["g-classic"].result(30)
        assert (gone.is_simple_consumer_group, gone.state.name) == (False, "EMPTY")
        # The committed offsets of the simple group are what it listed for.
        offsets = ck.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("g-simple", [TopicPartition(topic, 0)])]
        )["g-simple"].result(30)
        assert [tp.offset for tp in offsets.topic_partitions] == [1]
    finally:
        kp.close()
