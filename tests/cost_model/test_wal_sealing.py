"""The WAL object model (cost_model/s3_requests.py) against hand-computed cases of the
writer's sealing rule: size, age, group commit, and producers with a full window."""

from __future__ import annotations

import dataclasses
import math

import pytest

from zonegate.cost_model import price_table
from zonegate.cost_model.prices import MIB
from zonegate.cost_model.s3_requests import WalSealing, node_wal_objects_per_second, wal_objects
from zonegate.cost_model.whatif import (
    WARPSTREAM_ASSUMPTIONS,
    WARPSTREAM_WORKLOAD,
    Assumptions,
    s3_request_usd,
)

pytestmark = pytest.mark.unit
OPEN = WalSealing(seal_bytes=8 * MIB, seal_age_s=0.25, put_s=0.02, request_bytes=100_000)


def test_group_commit_at_a_high_rate_is_one_object_per_upload_cycle() -> None:
    # 50 MB/s in 100 kB requests: 500 a second, 10 in each 20 ms cycle.
    rate = node_wal_objects_per_second(50e6, OPEN)
    assert rate == pytest.approx(1 / (0.02 + math.exp(-10) / 500))
    assert rate == pytest.approx(50, rel=1e-4)


def test_group_commit_at_a_low_rate_seals_every_request() -> None:
    # 1 request a second: each finds the writer idle and is its own object.
    assert node_wal_objects_per_second(100_000, OPEN) == pytest.approx(1, rel=0.03)
    # One request per cycle on average: the next seal waits for one 1/e of the time.
    q = 1 / 0.02
    rate = node_wal_objects_per_second(q * 100_000, OPEN)
    assert rate == pytest.approx(1 / (0.02 + math.exp(-1) / q))
    assert rate < q


def test_size_and_age_bound_the_object() -> None:
    # 800 MB/s fill 8 MiB in 10 ms, before the 20 ms upload is done.
    assert node_wal_objects_per_second(800e6, OPEN) == pytest.approx(800e6 / (8 * MIB))
    # A 1 s upload: the 250 ms age seals while it is in flight; the next object
    # opens at the next request (200 a second: 5 ms later on average).
    slow_put = dataclasses.replace(OPEN, put_s=1.0)
    assert node_wal_objects_per_second(20e6, slow_put) == pytest.approx(1 / (0.25 + 0.005))


def test_without_group_commit_the_age_or_the_requests() -> None:
    age_only = dataclasses.replace(OPEN, group_commit=False)
    assert node_wal_objects_per_second(20e6, age_only) == pytest.approx(1 / (0.25 + 0.005))
    # 2 requests a second: an object opens 0.5 s after a seal on average.
    assert node_wal_objects_per_second(200_000, age_only) == pytest.approx(1 / 0.75)
    assert node_wal_objects_per_second(800e6, age_only) == pytest.approx(800e6 / (8 * MIB))


def test_a_full_producer_window_sets_the_object_size_not_the_put_time() -> None:
    # benchmarks/storage.py: 8 partitions of 26 one-MB batches, one per request, from
    # one idempotent librdkafka producer (5 in flight). Objects alternate 1 and 4
    # requests (the seal at the first append after an idle upload takes one, the
    # other four arrive during its PUT): 2.5 on average, 208 / 2.5 objects, at any
    # PUT time or rate.
    total = 208 * 977_000.0
    for put_s, seconds in ((0.016, 2.4), (0.030, 3.0)):
        window = WalSealing(
            seal_bytes=8 * MIB,
            seal_age_s=0.25,
            put_s=put_s,
            request_bytes=total / 208,
            window_requests=5,
        )
        assert wal_objects(total, seconds, nodes=1, sealing=window) == pytest.approx(208 / 2.5)
    # One request in flight: an object per request; a window over twice the seal
    # size: size seals.
    one = dataclasses.replace(window, window_requests=1)
    assert node_wal_objects_per_second(10e6, one) == pytest.approx(10e6 / (total / 208))
    huge = dataclasses.replace(window, window_requests=40)
    assert node_wal_objects_per_second(100e6, huge) == pytest.approx(100e6 / (8 * MIB))
    # Without group commit the whole window waits for the age in one object.
    aged = dataclasses.replace(window, group_commit=False)
    q = 10e6 / (total / 208)
    assert node_wal_objects_per_second(10e6, aged) == pytest.approx(q / 5)


def test_nothing_in_no_objects_and_bad_settings_named() -> None:
    assert node_wal_objects_per_second(0, OPEN) == 0
    assert wal_objects(0, 10, nodes=3, sealing=OPEN) == 0
    with pytest.raises(ValueError, match="put_s"):
        dataclasses.replace(OPEN, put_s=0)
    with pytest.raises(ValueError, match="window_requests"):
        dataclasses.replace(OPEN, window_requests=0.5)


def test_warpstream_figure_unchanged_and_zonegate_group_commit_priced() -> None:
    s3 = price_table("aws", "us-east-1").object_storage("standard")
    # WarpStream's agents do not group-commit: 35 files/s, USD 15.12 a day.
    theirs = s3_request_usd(WARPSTREAM_WORKLOAD, WARPSTREAM_ASSUMPTIONS, s3)
    assert theirs["wal"] == pytest.approx(140 / 4 * 86_400 * 0.005 / 1000)
    assert sum(theirs.values()) == pytest.approx(22.66, abs=0.01)
    # zonegate's nodes do: 10 objects/s each at a 100 ms upload cycle (4.67 MiB
    # arrive in one, under the 8 MiB seal), USD 12.96 a day.
    w = dataclasses.replace(WARPSTREAM_WORKLOAD, wal_seal_bytes=8 * MIB)
    ours = s3_request_usd(w, Assumptions(), s3)
    assert ours["wal"] == pytest.approx(30 * 86_400 * 0.005 / 1000)
