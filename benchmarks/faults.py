"""Issue 28's network faults in turn, under the workload of the fault tests: how long
the producers stall and whether anything acknowledged is lost or written twice.

The same cluster, workload, faults and checker as tests/faults/ (a 3-zone x 2-node
cluster on PostgreSQL and moto's S3 server, every link through Toxiproxy, which
tests/toxiproxy/build.sh builds; an idempotent acks=all producer per zone and a
consumer group; a zone lost, a zone cut off, slow/reset/half-open S3 links from one
zone, a slow and flapping PostgreSQL link, client connections reset). Prints each
fault's figures and the checker's counts; the last line is exactly
`faults: lost 0, duplicated 0 over N acknowledged; worst recovery S s (zone lost),
T s (zone cut off), produce p99 under 100 ms added S3 latency U ms`. T is the
longest time any partition of the other zones' producers went without an
acknowledgement during the cut, until the controller moved the cut-off zone's
partitions (docs/leader-protocol.md); the cut-off zone's own producer, whose
nodes reach no leader until the link heals, is printed apart.

    python benchmarks/faults.py [--only zone-lost,zone-cut]   # a name twice runs it twice
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="faults to run, comma-separated")
    args = parser.parse_args()

    from tests.faults.cluster import ProxiedCluster
    from tests.faults.faults import FAULTS
    from tests.faults.scenario import run_scenario
    from tests.postgres_server import PostgresServer
    from tests.s3_server import MotoS3Server
    from tests.toxiproxy_server import ToxiproxyServer

    names = [n for n in args.only.split(",") if n] or list(FAULTS)
    root = Path(tempfile.mkdtemp(prefix="zonegate-faults-"))
    lost = duplicated = acknowledged = 0
    measures: dict[str, dict[str, float]] = {}
    with (
        PostgresServer() as pg,
        MotoS3Server() as s3,
        ToxiproxyServer(root / "toxiproxy.log") as toxi,
    ):
        cluster = ProxiedCluster(root, toxi, pg.new_database(), s3.endpoint_url)
        try:
            cluster.start()
            for name in names:
                cluster.heal()
                report, outcome = run_scenario(cluster, name, FAULTS[name])
                counts = report.counts()
                if not report.ok:
                    print(f"{name}: ANOMALIES {report.examples()}")
                lost += counts["lost"]
                duplicated += counts["duplicated"]
                acknowledged += report.acknowledged
                for key, value in outcome.measures.items():  # the worst of repeated runs
                    kept = measures.setdefault(name, {})
                    kept[key] = max(kept.get(key, value), value)
        finally:
            cluster.stop()

    def figure(name: str, key: str, unit: str, digits: int) -> str:
        value = measures.get(name, {}).get(key)
        return "-" if value is None else f"{value:.{digits}f} {unit}"

    print(
        f"faults: lost {lost}, duplicated {duplicated} over {acknowledged} acknowledged; "
        f"worst recovery {figure('zone-lost', 'recovery', 's', 1)} (zone lost), "
        f"{figure('zone-cut', 'recovery', 's', 1)} (zone cut off), produce p99 under "
        f"100 ms added S3 latency {figure('s3-links', 'slow_p99_ms', 'ms', 0)}"
    )


if __name__ == "__main__":
    main()
