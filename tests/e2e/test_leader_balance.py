"""Leadership balance, whatever the order nodes start in (auto.leader.rebalance.enable).

The issue's case: a topic created while only the first node was up had every
partition led by that node for ever. Here the other zones' nodes join after it,
and within a bounded time (the controller's first lease, then one check interval)
the leaders spread two per node; a node killed and started again leads its
partitions again within a check interval of its return. An idempotent producer
writing all along sees no error, and every record is read back once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cluster_harness import start_cluster, wait_until
from tests.e2e.clients import ck_read_values

pytestmark = pytest.mark.e2e

LEASE_S = 3.0  # the harness's --lease-ms
CHECK_S = 1  # --leader-imbalance-check-interval-s here


def _leaders(bootstrap: str, topic: str) -> Counter[int]:
    from confluent_kafka.admin import AdminClient

    # A client of a zone with no node is told the real leaders (zone routing's fallback).
    md = AdminClient(
        {"bootstrap.servers": bootstrap, "client.id": "zonegate_az=nowhere"}
    ).list_topics(topic, timeout=10)
    return Counter(p.leader for p in md.topics[topic].partitions.values())


def test_leaders_spread_once_the_other_zones_join(tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = start_cluster(
        tmp_path,
        ["a", "b", "c"],
        1,
        ["--leader-imbalance-check-interval-s", str(CHECK_S)],
        start=False,
    )
    first, *others = cluster.nodes
    try:
        first.start()
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        admin.create_topics([NewTopic("early", 6, 1)])["early"].result(30)
        assert _leaders(first.bootstrap, "early") == {1: 6}

        producer = Producer(
            {"bootstrap.servers": first.bootstrap, "enable.idempotence": True, "acks": "all"}
        )
        errors: list[str] = []
        sent = 0
        stop = threading.Event()

        def cb(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        def produce() -> None:
            nonlocal sent
            while not stop.is_set():
                producer.produce(
                    "early", value=str(sent).encode(), partition=sent % 6, on_delivery=cb
                )
                sent += 1
                producer.poll(0.002)

        worker = threading.Thread(target=produce)
        worker.start()
        try:
            for n in others:
                n.start()
            joined = time.monotonic()
            spread = wait_until(
                lambda: _leaders(first.bootstrap, "early") == {1: 2, 2: 2, 3: 2}, timeout=30
            )
            took = time.monotonic() - joined
            # The bound: the first node's controller waits out its first lease after its
            # start (already past, mostly), then one check interval; a margin for a busy
            # machine.
            assert spread and took < LEASE_S + CHECK_S + 10, took
            n0 = sent
            assert wait_until(lambda: sent > n0 + 500, timeout=30)

            # Node 2 dies: its partitions fail over; back, it leads its own again.
            others[0].kill9()
            assert wait_until(
                lambda: _leaders(first.bootstrap, "early") == {1: 3, 3: 3}, timeout=30
            ), _leaders(first.bootstrap, "early")
            others[0].start()
            back = time.monotonic()
            assert wait_until(
                lambda: _leaders(first.bootstrap, "early") == {1: 2, 2: 2, 3: 2}, timeout=30
            ), _leaders(first.bootstrap, "early")
            assert time.monotonic() - back < CHECK_S + 10
            n1 = sent
            assert wait_until(lambda: sent > n1 + 500, timeout=30)
        finally:
            stop.set()
            worker.join()
        assert producer.flush(60) == 0
        assert not errors, errors[:5]

        seen = [int(v) for v in ck_read_values(first.bootstrap, "early", 6, sent)]
        assert sorted(seen) == list(range(sent))  # none lost, none twice
        log = (tmp_path / "node-1.log").read_text()
        assert "balanced leaders" in log
    finally:
        cluster.stop()
