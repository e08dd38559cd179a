"""Issue 28's scenarios on one shared 3-zone x 2-node cluster on PostgreSQL and moto's
S3 server, every link through Toxiproxy (tests/faults/cluster.py): three idempotent
producers (one per zone, acks=all) and a consumer group run before, during and after
each fault (tests/faults/faults.py); the checker (tests/faults/checker.py) must find
nothing lost, duplicated, reordered, double-assigned or stuck. Recovery times are
printed and kept in test-artifacts/faults.txt.

Seconds (2 shared cores, load 20-35): zone-lost 90, zone-silent 46-83 (a 14 s outage,
then the frozen nodes killed and started again), s3-links 80, s3-bandwidth 25-30; the cluster's
start 26-57 once; the whole directory 320 s."""

from __future__ import annotations

import pytest

from tests.faults.cluster import ZONES, ProxiedCluster
from tests.faults.faults import FAULTS, LOST_ZONE, PG_DELAY_MS, S3_DELAY_MS
from tests.faults.scenario import run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


# pg-link's lower bound needs its windows without the delay to be quiet: beside the
# other test process, one CI run's produces took 713 ms there (put), and the delay's
# growth (89.6 ms) no longer showed against them. So it runs with the tests marked
# alone (scripts/test), on a cluster of its own.
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.alone) if n == "pg-link" else n for n in FAULTS]
)
def test_no_anomaly_under_the_fault(healed: ProxiedCluster, name: str) -> None:
    report, outcome = run_scenario(healed, name, FAULTS[name])
    assert report.ok, (report.examples(), outcome.lines)
    lease_s = healed.lease_ms / 1000
    if name == "zone-lost":
        # The dead nodes' RPC ports refuse, so the controller ends their leases at its
        # next pass (operations.md): within a lease; two bound it for every producer.
        # The lost zone's own producer re-bootstraps to other zones' nodes 3 s after it
        # reaches no broker, and they tell it of their own nodes once its zone's nodes
        # are silent for a quarter of a lease (router/view.py); measured 2.0-3.5 s.
        assert outcome.measures["others"] < 2 * lease_s, outcome.lines
        assert outcome.measures["moved"] < 2 * lease_s, outcome.lines
    if name == "zone-silent":
        # Nothing refuses: the frozen nodes' leases run out (one lease), then the
        # controller's next pass moves their partitions; two leases bound it. The
        # producers' stall is only printed: an Append forwarded to a frozen leader
        # waits out its gRPC deadline (10 s) before going to the new one (operations.md).
        assert outcome.measures["moved_s"] < 2 * lease_s, outcome.lines
    if name == "zone-cut":
        # Probes unanswered a quarter lease, then held cut off a quarter lease on end: the
        # controller moves the cut-off zone's partitions within half a lease and three
        # heartbeats of the cut (4.5 s of a 6 s lease; docs/leader-protocol.md), and the
        # other zones' producers write to every partition again about a second later
        # (4.5-6.3 s measured at load average 18-52, 10.4 s once at 60). Bounded here by
        # two leases, as the zone lost is, well inside the 20 s cut that stalled them
        # whole before. (`held_within` is as the nodes' /metrics show it, polled: a
        # heartbeat and a scrape late.) Both sides are let go a lease after it heals.
        m = outcome.measures
        assert 0 < m["held_within"] < 2 * lease_s and m["held_at_heal"] == 2, outcome.lines
        assert m["recovery"] < 2 * lease_s, outcome.lines
        assert 0 <= m["released"] < 3 * lease_s, outcome.lines
    if name == "s3-links":
        # The delay is added to one zone's S3 link in windows alternated with windows
        # without it. The other zones must not notice: their produce p50 with the delay
        # within half the delay of their p50 without it. The delayed zone's WAL stages
        # (seal wait and PUT, beyond the other zones' in the same windows, which takes
        # out the machine's own swings) grow by the delay, no less than half of it (the
        # fault took) and no more than half again: a PUT that runs twice its usual time
        # lets waiting data go out beside it (wal_writer.PutPace) instead of waiting
        # for it, which added the delay twice (measured +209 ms for 100 ms before; after,
        # +206 and +235 for 200 ms, +394 for 300 ms at load 22). A delay of 300 ms keeps
        # the bounds well above the machine's swings. Its clients' p50 is printed:
        # librdkafka's five requests in flight per connection queue its batches behind
        # the slower answers (docs/operations.md).
        m = outcome.measures
        for zone in ZONES:
            if zone != LOST_ZONE:
                assert m[f"{zone}_p50_added_ms"] < 0.5 * S3_DELAY_MS, outcome.lines
        grown = m["wal_excess_on_ms"] - m["wal_excess_off_ms"]
        assert 0.5 * S3_DELAY_MS < grown < 1.5 * S3_DELAY_MS, outcome.lines
    if name == "pg-link":
        # The delay is on zone-a's PostgreSQL link, in windows alternated with windows
        # without it (as for S3). Produces to partitions led by zone-a's nodes wait for
        # their commits over it: they must be slowed, in one round at least (the fault
        # took; under load a window after the delay can still hold seconds of its
        # backlog, so a median of four rounds may not show it). In the median round
        # they grow by at most four times the delay: about twice it is the leader's one
        # commit at a time and the proxy's one cycle per leader (docs/operations.md);
        # +2.1 to +2.3 s was the commits' wait for a connection behind the node's other
        # calls, before they had connections of their own. The growth of produces to
        # partitions led elsewhere is printed (+18 to +58 ms in the last run).
        m = outcome.measures
        for zone in ZONES:
            assert m[f"{zone}_led_there_most_added_ms"] > 0.5 * PG_DELAY_MS, outcome.lines
            assert m[f"{zone}_led_there_added_ms"] < 4 * PG_DELAY_MS, outcome.lines
