"""The checker itself, over synthetic histories: a clean history passes, and each
anomaly is found and counted."""

from __future__ import annotations

import pytest

from tests.faults.checker import Ack, History, Read, check, positions

pytestmark = pytest.mark.unit


def _clean() -> History:
    """Two producers over two partitions, every value acknowledged and read, the group
    at the end of both partitions."""
    h = History()
    offsets = {0: 0, 1: 0}
    for seq in range(4):
        for producer, partition in (("a", 0), ("b", 1)):
            value = f"{producer}:{seq}"
            h.sent.add(value)
            h.acks.append(Ack(value, partition, offsets[partition]))
            h.final.append(Read(partition, offsets[partition], value))
            offsets[partition] += 1
    h.group = list(h.final)
    h.end_offsets = dict(offsets)
    h.group_positions = dict(positions(h.group))
    return h


def _only(report_counts: dict[str, int], name: str, n: int = 1) -> None:
    assert report_counts == {k: (n if k == name else 0) for k in report_counts}


def test_a_clean_history_has_no_anomaly() -> None:
    report = check(_clean())
    assert report.ok, report.examples()
    assert (report.acknowledged, report.read) == (8, 8)


def test_an_acknowledged_value_missing_from_the_read_is_lost() -> None:
    h = _clean()
    h.final = [r for r in h.final if r.value != "a:2"]
    h.group = [r for r in h.group if r.value != "a:2"]
    report = check(h)
    assert report.lost == ["a:2"]
    _only(report.counts(), "lost")


def test_an_unacknowledged_value_may_be_present_or_absent() -> None:
    h = _clean()
    h.sent |= {"a:4", "a:5"}  # delivery failed or never reported
    h.final.append(Read(0, 4, "a:4"))
    h.group.append(Read(0, 4, "a:4"))
    h.end_offsets[0] = 5
    h.group_positions[0] = 5
    assert check(h).ok


def test_a_value_at_two_offsets_is_duplicated() -> None:
    h = _clean()
    h.sent.add("b:4")
    h.final += [Read(1, 4, "b:4"), Read(1, 5, "b:4")]
    h.group += [Read(1, 4, "b:4"), Read(1, 5, "b:4")]
    h.end_offsets[1] = h.group_positions[1] = 6
    report = check(h)
    assert report.duplicated == ["b:4"]
    _only(report.counts(), "duplicated")


def test_a_producers_values_out_of_order_in_a_partition_are_reordered() -> None:
    h = _clean()
    # a:1 and a:2 swapped in the log (and so in both reads); acks agree with the log.
    swap = {"a:1": "a:2", "a:2": "a:1"}
    h.final = [Read(r.partition, r.offset, swap.get(r.value, r.value)) for r in h.final]
    h.group = list(h.final)
    h.acks = [
        Ack(a.value, a.partition, {1: 2, 2: 1}.get(a.offset, a.offset)) if a.value in swap else a
        for a in h.acks
    ]
    report = check(h)
    assert len(report.reordered) == 2  # once in the final read, once in the group's
    _only(report.counts(), "reordered", 2)


def test_offsets_going_backwards_in_a_read_are_reordered() -> None:
    h = _clean()
    h.final.append(Read(0, 1, "a:1"))  # the reader was handed offset 1 again
    report = check(h)
    assert report.reordered == ["final read: partition 0 offset 1 after 3"]


def test_a_group_rereading_after_a_rebalance_is_no_anomaly() -> None:
    h = _clean()
    h.group += [Read(0, 2, "a:2"), Read(0, 3, "a:3")]  # from the last committed offset
    assert check(h).ok


def test_one_offset_given_to_two_values_is_double_assigned() -> None:
    h = _clean()
    # Two leaders both committed offset 3 of partition 0: one producer was told a:3,
    # the other b:9, and the log holds a:3.
    h.sent.add("b:9")
    h.acks.append(Ack("b:9", 0, 3))
    report = check(h)
    assert report.double_assigned == ["partition 0 offset 3: ['a:3', 'b:9']"]
    assert report.lost == ["b:9"]  # and the loser is lost
    assert report.counts()["duplicated"] == report.counts()["reordered"] == 0


def test_a_partition_the_group_never_finished_is_stuck() -> None:
    h = _clean()
    h.group = [r for r in h.group if not (r.partition == 1 and r.offset >= 2)]
    h.group_positions = dict(positions(h.group))
    report = check(h)
    assert report.stuck == [1]
    _only(report.counts(), "stuck")


def test_a_value_nobody_sent_is_unknown() -> None:
    h = _clean()
    h.final.append(Read(1, 4, "x:0"))
    h.group.append(Read(1, 4, "x:0"))
    h.end_offsets[1] = h.group_positions[1] = 5
    report = check(h)
    assert report.unknown == ["x:0"]
    _only(report.counts(), "unknown")


def test_a_final_read_that_stopped_short_is_unfinished_not_lost() -> None:
    h = _clean()
    h.final = [r for r in h.final if not (r.partition == 0 and r.offset >= 2)]
    report = check(h)
    assert report.unfinished == [0]
    _only(report.counts(), "unfinished")  # a:2 and a:3 were read by the group


def test_a_value_no_read_has_is_lost_even_when_the_final_read_stopped_short() -> None:
    h = _clean()
    h.final = [r for r in h.final if not (r.partition == 0 and r.offset >= 2)]
    h.group = [r for r in h.group if r.value != "a:3"]
    report = check(h)
    assert (report.lost, report.unfinished) == (["a:3"], [0])
