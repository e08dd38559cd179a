"""The Jepsen-style transaction checker against a 3-zone zonegate cluster under kill -9.

tests/e2e/txn_workload.py's consume-transform-produce workload (confluent-kafka:
four transactional workers, one per input partition, spread over the zones, output
over three partitions, offsets committed in the transactions, 15% aborted on purpose)
runs while each node is killed -9 and restarted in turn (tests/e2e/txn_cluster.py);
then its checker reads the output with read_committed. No aborted read, no lost
committed write, no torn transaction, no duplicate, no unprocessed input, and no
partition whose last stable offset stays behind its high watermark. The same workload
passes against a real Apache Kafka broker (`python -m tests.e2e.txn_workload`). The
checker's counts are printed (pytest -s shows them).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster_harness import Cluster
from tests.e2e import txn_cluster, txn_workload

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = txn_cluster.start(tmp_path_factory.mktemp("txn-checker"))
    try:
        yield c
    finally:
        c.stop()


def test_transactions_survive_kill9_of_each_node(cluster: Cluster) -> None:
    zones = txn_cluster.ZONES

    def bootstrap(i: int) -> tuple[str, str]:
        zone = zones[i % len(zones)]
        return cluster.in_zone(zone)[0].bootstrap, zone

    faults: list[str] = []
    counts = txn_workload.run(
        bootstrap, faults=lambda: faults.extend(txn_cluster.kill_each(cluster))
    )
    print("\n".join(faults))
    print(txn_workload.report(counts))
    assert len(faults) == len(cluster.nodes)
    assert {k: counts[k] for k in txn_workload.ANOMALIES} == dict.fromkeys(
        txn_workload.ANOMALIES, 0
    ), counts
    # Not vacuous: transactions committed and aborted on both sides of the kills.
    assert counts["committed"] >= 50 and counts["aborted on purpose"] >= 5, counts
    assert counts["records read"] == counts["input records"] > 500, counts
