"""The e2e transaction tests' checkers (tests/e2e/txn_workload.py, streams_eos.py) find
each anomaly they claim to find: a checker that passes everything would make those
tests vacuous. Synthetic histories only; no network."""

from __future__ import annotations

import pytest

from tests.e2e import streams_eos, txn_workload
from tests.e2e.txn_workload import Txn, Worker

pytestmark = pytest.mark.unit


def _worker(txns: dict[str, Txn]) -> Worker:
    return Worker(0, "unused:9092", "zone-a", 2, 0.0, txns=txns)


def _history() -> tuple[list[Worker], dict[int, int]]:
    """Input partition 0 holds offsets 0-3: transaction 0.1 committed 0-1 over both output
    partitions, 0.2 (over 2-3) was aborted, 0.3 committed 2-3."""
    txns = {
        "0.1": Txn({(0, "0:0|0.1"), (1, "0:1|0.1")}, "commit"),
        "0.2": Txn({(0, "0:2|0.2"), (1, "0:3|0.2")}, "abort"),
        "0.3": Txn({(1, "0:2|0.3"), (0, "0:3|0.3")}, "commit"),
    }
    return [_worker(txns)], {0: 4}


def _anomalies(output: list[str], behind: list[int] | None = None) -> dict[str, int]:
    workers, inputs = _history()
    counts = txn_workload.check(workers, output, inputs, behind or [0, 0])
    return {k: counts[k] for k in txn_workload.ANOMALIES if counts[k]}


GOOD = ["0:0|0.1", "0:1|0.1", "0:2|0.3", "0:3|0.3"]


def test_a_correct_history_has_no_anomaly() -> None:
    assert _anomalies(GOOD) == {}


@pytest.mark.parametrize(
    ("output", "behind", "found"),
    [
        (GOOD + ["0:2|0.2", "0:3|0.2"], None, {"aborted read": 2, "duplicate": 2}),
        (GOOD[:3], None, {"lost write": 1, "torn": 1, "unprocessed": 1}),
        (GOOD + ["0:0|0.1"], None, {"torn": 1, "duplicate": 1}),
        (GOOD, [0, 3], {"hanging": 1}),
    ],
    ids=["aborted read", "lost and torn", "duplicate", "hanging"],
)
def test_each_anomaly_is_found(
    output: list[str], behind: list[int] | None, found: dict[str, int]
) -> None:
    assert _anomalies(output, behind) == found


def test_an_unknown_outcome_may_be_read_whole_or_not_at_all() -> None:
    workers, inputs = _history()
    workers[0].txns["0.3"].outcome = "unknown"
    assert txn_workload.check(workers, GOOD, inputs, [0, 0])["torn"] == 0
    assert txn_workload.check(workers, GOOD[:2], inputs, [0, 0])["lost write"] == 0
    assert txn_workload.check(workers, GOOD[:3], inputs, [0, 0])["torn"] == 1


def test_the_streams_check_finds_duplicates_losses_and_lost_state() -> None:
    inputs = [("k1", "id-0"), ("k2", "id-1"), ("k1", "id-2")]
    good = [("k1", "id-0:1"), ("k1", "id-2:2"), ("k2", "id-1:1")]

    def anomalies(output: list[tuple[str, str]]) -> dict[str, int]:
        counts = streams_eos.check(inputs, output)
        return {k: counts[k] for k in streams_eos.ANOMALIES if counts[k]}

    assert anomalies(good) == {}
    # Reprocessed after a crash without exactly-once: the id again, counted again.
    assert anomalies([*good, ("k1", "id-2:3")]) == {"duplicate": 1, "wrong count": 1}
    assert anomalies(good[1:]) == {"lost": 1, "wrong count": 1}
    # The state update lost, the output kept: the count repeats.
    assert anomalies([("k1", "id-0:1"), ("k1", "id-2:1"), ("k2", "id-1:1")]) == {"wrong count": 1}
