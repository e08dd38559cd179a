"""The protocol simulated end to end over the pure core (tests/transactions/simulation.py),
checked as Jepsen checks Kafka. With KIP-890 (verification, and the epoch bump of
transaction version 2): no aborted read, lost write, duplicate or hanging transaction in
any seed. Without them the same checker finds what Jepsen found, so it is not vacuous."""

from __future__ import annotations

import pytest

from tests.transactions.simulation import Simulation

pytestmark = pytest.mark.unit

ANOMALIES = ("aborted read", "lost write", "torn", "duplicate", "hanging")


def anomalies(seed: int, tv2: bool, verify: bool = True) -> dict[str, int]:
    sim = Simulation(seed, tv2=tv2, verify=verify)
    sim.run()
    got = sim.check()
    assert got["transactions"] == 18  # 3 producers x 6 (restarts included), all answered
    return {k: got[k] for k in ANOMALIES if got[k]}


@pytest.mark.parametrize("seed", range(40))
def test_with_kip_890_no_anomaly(seed: int) -> None:
    assert anomalies(seed, tv2=True) == {}


def test_without_the_epoch_bump_a_late_write_joins_the_next_transaction() -> None:
    """Jepsen's finding against Kafka's protocol: a batch of an aborted transaction, slow
    past the producer's delivery timeout, reaches a partition the next transaction added
    too; at the same epoch and in sequence, verification cannot tell, and the next
    commit makes the aborted write visible. Transaction version 2 closes it."""
    found = [s for s in range(40) if anomalies(s, tv2=False).get("aborted read")]
    assert found


def test_without_verification_transactions_hang_and_abort_reads() -> None:
    """A broker before KIP-890 lets a late first batch open a transaction the coordinator
    never ends: the LSO stops (a hanging transaction), or the write lands elsewhere."""
    got = anomalies(0, tv2=False, verify=False)
    assert got.get("hanging") or got.get("aborted read")
