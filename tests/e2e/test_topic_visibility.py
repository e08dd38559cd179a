"""A topic made through one node is known at once by the other nodes.

The nodes of `zonegate serve` (zone-a, zone-b, zone-c on consecutive ports)
each keep a cache of the topics, refreshed from the metadata store a few
times a second; a client that creates a topic in one zone and asks another
zone about it right away must not be told it does not exist (the README's
kcat example does exactly that).
"""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from typing import Any

import pytest
from kio.schema.create_partitions.v3.request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from tests.e2e.clients import kcat
from tests.kafka_raw import RawConnection
from tests.node_harness import RunningNode

pytestmark = pytest.mark.e2e


def _topic(conn: RawConnection, name: str, allow_create: bool) -> Any:
    return conn.request(
        MetadataRequest(
            topics=(MetadataRequestTopic(name=name, topic_id=uuid.UUID(int=0)),),
            allow_auto_topic_creation=allow_create,
            include_topic_authorized_operations=False,
        )
    ).topics[0]


def test_topic_auto_created_in_one_zone_is_known_at_once_in_another(node: RunningNode) -> None:
    a, b = RawConnection(node.port), RawConnection(node.port + 1)
    for i in range(5):
        name = f"fresh-{i}"
        made = _topic(a, name, allow_create=True)
        assert made.error_code == ErrorCode.none
        seen = _topic(b, name, allow_create=False)
        assert seen.error_code == ErrorCode.none, f"zone-b does not know {name} yet"
        assert (seen.topic_id, len(seen.partitions)) == (made.topic_id, len(made.partitions))
    for i in range(5):
        # Auto-creation asked of zone-b for a topic zone-a has just made: the same topic.
        name = f"twice-{i}"
        made = _topic(a, name, allow_create=True)
        again = _topic(b, name, allow_create=True)
        assert again.error_code == ErrorCode.none
        assert again.topic_id == made.topic_id
    a.close()
    b.close()


def _grow(conn: RawConnection, name: str, count: int) -> ErrorCode:
    resp = conn.request(
        CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name=name, count=count, assignments=None),),
            timeout=datetime.timedelta(seconds=10),
            validate_only=False,
        )
    )
    code: ErrorCode = resp.results[0].error_code
    return code


def test_partitions_added_in_one_zone_are_counted_in_another(node: RunningNode) -> None:
    """CreatePartitions takes a total: a node must count from the store, not a stale cache."""
    a, b = RawConnection(node.port), RawConnection(node.port + 1)
    for i in range(3):
        name = f"grow-{i}"
        assert _topic(a, name, allow_create=True).error_code == ErrorCode.none
        assert _topic(b, name, allow_create=False).error_code == ErrorCode.none
        before = len(_topic(b, name, allow_create=False).partitions)
        assert _grow(a, name, before + 2) == ErrorCode.none
        # zone-b, asked right away for a total it already has: refused, nothing added.
        assert _grow(b, name, before + 2) == ErrorCode.invalid_partitions
        assert _grow(b, name, before + 3) == ErrorCode.none
        assert len(_topic(b, name, allow_create=False).partitions) == before + 3
        # zone-a learns of zone-b's change with its next refresh (a few times a second).
        deadline = time.monotonic() + 10
        while len(_topic(a, name, allow_create=False).partitions) != before + 3:
            assert time.monotonic() < deadline, "zone-a never saw the added partition"
            time.sleep(0.05)
    a.close()
    b.close()


def test_same_total_asked_of_two_zones_at_once_is_made_once(node: RunningNode) -> None:
    """Two nodes growing a topic to the same total at the same moment: one adds, not both."""
    for i in range(5):
        a, b = RawConnection(node.port), RawConnection(node.port + 1)
        name = f"race-{i}"
        assert _topic(a, name, allow_create=True).error_code == ErrorCode.none
        assert _topic(b, name, allow_create=False).error_code == ErrorCode.none
        total = len(_topic(a, name, allow_create=False).partitions) + 4
        codes = _grow_at_once([a, b], name, total)
        assert sorted(codes) == [ErrorCode.none, ErrorCode.invalid_partitions], codes
        assert len(_topic(a, name, allow_create=False).partitions) == total
        assert len(_topic(b, name, allow_create=False).partitions) == total
        a.close()
        b.close()


def _grow_at_once(conns: list[RawConnection], name: str, total: int) -> list[ErrorCode]:
    codes: list[ErrorCode] = []
    start = threading.Barrier(len(conns))

    def grow(conn: RawConnection) -> None:
        start.wait()
        codes.append(_grow(conn, name, total))

    threads = [threading.Thread(target=grow, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def test_readme_kcat_example(node: RunningNode) -> None:
    """Produce in zone-a, read back at once in zone-b, as the README shows."""
    zone_a, zone_b = node.bootstrap, f"127.0.0.1:{node.port + 1}"
    kcat("-b", zone_a, "-P", "-t", "hello", input=b"world\n")
    assert kcat("-b", zone_b, "-C", "-t", "hello", "-e", "-q") == b"world\n"
