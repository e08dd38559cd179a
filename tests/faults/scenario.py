"""One network-fault scenario's frame: a fresh topic on the shared proxied cluster,
the workload (tests/faults/workload.py) running before, during and after the fault,
the checker's report on the history, and the figures printed and kept in
test-artifacts/faults.txt."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster_harness import wait_until
from tests.faults.checker import Report, check
from tests.faults.cluster import PARTITIONS, ProxiedCluster
from tests.faults.faults import Fault, Outcome
from tests.faults.workload import Workload

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WARM_UP_ACKS = 50  # per producer, before the fault
_RUNS = itertools.count()


def run_scenario(cluster: ProxiedCluster, name: str, fault: Fault) -> tuple[Report, Outcome]:
    """Runs `fault` (which injects, heals and returns its figures) under the workload;
    the checker's report, and the fault's outcome with every figure."""
    topic = f"faults-{name}-{next(_RUNS)}"  # a fault may run more than once
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap("zone-a")})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(30)
    w = Workload(cluster, topic)
    w.start()
    try:
        assert wait_until(lambda: all(len(p.acks) >= WARM_UP_ACKS for p in w.producers), 60)
        outcome = fault(cluster, w)
        figures = outcome.lines
        healed_at = time.monotonic()
        # Every producer acknowledged again after the heal, then a little more history.
        recovered = wait_until(lambda: w.acked_since(healed_at), timeout=60)
        figures.append(
            f"after healing: every producer acknowledged again within "
            f"{time.monotonic() - healed_at:.2f} s"
            if recovered
            else "after healing: a producer never acknowledged again"
        )
        time.sleep(2.0)
    finally:
        history = w.finish()
    report = check(history)
    if not report.ok:  # the whole history, to study the anomaly
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / f"faults-{name}-history.json").write_text(
            json.dumps(dataclasses.asdict(history), default=sorted)
        )
    errors = w.errors()
    figures.append(f"checker: {report.summary()}; failed deliveries {len(errors)}")
    text = "\n".join(f"{name}: {line}" for line in figures)
    print("\n" + text)
    ARTIFACTS.mkdir(exist_ok=True)
    with open(ARTIFACTS / "faults.txt", "a") as out:
        out.write(text + "\n")
    outcome.measures["acknowledged"] = report.acknowledged
    outcome.measures["failed_deliveries"] = len(errors)
    return report, outcome
