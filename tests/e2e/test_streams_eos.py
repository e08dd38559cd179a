"""Kafka Streams exactly_once_v2 against a 3-zone zonegate cluster under kill -9.

tests/e2e/streams_eos.py's application (Apache Kafka 4.3.1's kafka-streams, a stateful
count per key, processing.guarantee=exactly_once_v2) runs from zone-a while input is
fed; the application is killed -9 and started again once, then each node (between them
the application's zone node, every partition leader and every transaction coordinator
shard: tests/e2e/txn_cluster.py) is killed -9 and restarted in turn. Read with
read_committed, the output holds every input's effect exactly once: each input id once,
each key's counts 1..n in order. The same run passes against a real Apache Kafka broker
(`python -m tests.e2e.streams_eos`), and finds duplicates there with at_least_once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster_harness import Cluster
from tests.e2e import streams_eos, txn_cluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = txn_cluster.start(tmp_path_factory.mktemp("streams-eos"))
    try:
        yield c
    finally:
        c.stop()


def test_streams_exactly_once_v2_survives_kill9(cluster: Cluster, tmp_path: Path) -> None:
    done: list[str] = []

    def faults(app: streams_eos.App) -> None:
        streams_eos.kill_app_once(app, before_s=4, after_s=2)
        done.append("the application killed -9 and restarted")
        done.extend(txn_cluster.kill_each(cluster))

    bootstrap = cluster.in_zone("zone-a")[0].bootstrap
    counts = streams_eos.run(tmp_path, bootstrap, faults)
    print("\n".join(done))
    print(streams_eos.report(counts))
    assert len(done) == 1 + len(cluster.nodes)
    assert {k: counts[k] for k in streams_eos.ANOMALIES} == dict.fromkeys(
        streams_eos.ANOMALIES, 0
    ), counts
    assert counts["outputs"] == counts["inputs"] > 500, counts
