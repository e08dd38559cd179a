"""The 3-zone cluster and the kill -9 schedule shared by the transaction e2e tests
(test_txn_checker.py, test_streams_eos.py): one node per zone, each killed -9 and
started again on its own port in turn while a workload runs.

With one node per zone, the three nodes between them hold every role a transaction
meets: the clients' zone nodes, every partition's leader and every transaction
coordinator shard, so killing each in turn kills the coordinator's node, a partition
leader and the client's zone node, whatever the rendezvous hashing chose.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.cluster_harness import Cluster, ClusterNode, start_cluster, wait_until

ZONES = ("zone-a", "zone-b", "zone-c")


def start(root: Path) -> Cluster:
    return start_cluster(root, ZONES, 1, ("--group-initial-rebalance-delay-ms", "0"))


def restart(node: ClusterNode) -> None:
    """Starts a killed node again on the port it had, so clients that knew it find it."""
    i = node.args.index("--listen")
    node.args[i + 1] = f"127.0.0.1:{node.port}"
    node.start()


def kill_each(cluster: Cluster, down_s: float = 1.0, settle_s: float = 6.0) -> list[str]:
    """kill -9 of every node in turn, each started again after `down_s` and given
    `settle_s` (two leases) before the next; what was done, as lines."""
    done = []
    for node in cluster.nodes:
        time.sleep(settle_s)
        node.kill9()
        time.sleep(down_s)
        restart(node)
        done.append(f"node {node.node_id} ({node.zone}) killed -9 and restarted")
    time.sleep(settle_s)
    assert wait_until(lambda: all(n.alive() for n in cluster.nodes), 10)
    return done
