"""The what-if model against hand-computed cases and AutoMQ's published Kafka figure."""

from __future__ import annotations

import dataclasses

import pytest

from zonegate.cost_model import Workload, compare, price_table
from zonegate.cost_model.kafka import kafka_cross_zone_bytes, remote_follower_copies
from zonegate.cost_model.prices import GIB, MIB, UnknownPrice
from zonegate.cost_model.whatif import (
    WARPSTREAM_API_USD_PER_DAY,
    WARPSTREAM_ASSUMPTIONS,
    WARPSTREAM_WORKLOAD,
    Assumptions,
    kafka_scenario,
    s3_request_usd,
    s3_wal_scenario,
    wal_objects_per_second,
    zonegate_scenario,
)

pytestmark = pytest.mark.unit
AWS = price_table("aws", "us-east-1")


def test_kafka_cross_zone_at_1_gib_s_matches_automq_published_figure() -> None:
    # 1 GiB/s for 30 days; 2/3 of produce plus two replica copies cross zones at
    # 0.02 USD/GiB (0.01 each way): AutoMQ's published 138,240 USD per month.
    w = Workload(ingress_mib_s=1024, fanout=1, zones=3, days=30)
    fff = kafka_scenario(w, AWS, Assumptions(), fetch_from_follower=True)
    assert fff.cross_zone_transfer == pytest.approx(138_240.0)


def test_kafka_without_fff_adds_two_thirds_of_consumption() -> None:
    w = Workload(ingress_mib_s=1024, fanout=2, days=30)
    cost = kafka_scenario(w, AWS, Assumptions(), fetch_from_follower=False)
    gib = 2_592_000  # GiB produced in 30 days at 1 GiB/s
    assert cost.cross_zone_transfer == pytest.approx((gib * 8 / 3 + 2 * gib * 2 / 3) * 0.02)


def test_remote_follower_copies_by_zone_count() -> None:
    assert remote_follower_copies(3, 3) == 2
    assert remote_follower_copies(3, 2) == pytest.approx(4 / 3)  # replicas 2+1
    assert remote_follower_copies(3, 1) == 0
    assert remote_follower_copies(3, 5) == 2


def test_fetch_from_follower_crosses_only_where_no_replica() -> None:
    # RF=2 over 4 zones: consumers in the 2 zones without a replica cross.
    b = kafka_cross_zone_bytes(0, 100.0, 4, rf=2, fetch_from_follower=True)
    assert b == pytest.approx(50.0)


def test_kafka_block_storage_is_three_copies_of_retention() -> None:
    w = Workload(ingress_mib_s=10, retention_hours=24, days=30)
    cost = kafka_scenario(w, AWS, Assumptions(), fetch_from_follower=False)
    retained_gib = 10 * MIB * 24 * 3600 / GIB
    assert cost.block_storage == pytest.approx(retained_gib * 3 * 0.08)
    assert cost.s3_put == cost.s3_get == cost.s3_storage == 0


def test_wal_objects_seal_by_age_at_low_rate_and_by_size_at_high() -> None:
    no_group_commit = Assumptions(wal_group_commit=False)
    slow = Workload(ingress_mib_s=1, zones=3, wal_seal_bytes=8 * MIB, wal_seal_age_ms=250)
    # A node's 16 KiB requests arrive 21.3 a second: an object opens 1/21.3 s after
    # a seal on average and is sealed 250 ms after that, 3.37 a second.
    per_node = 1 / (0.25 + 3 * 16_384 / MIB)
    assert wal_objects_per_second(slow, no_group_commit) == pytest.approx(3 * per_node)
    fast = Workload(ingress_mib_s=960, zones=3, wal_seal_bytes=8 * MIB, wal_seal_age_ms=250)
    assert wal_objects_per_second(fast, no_group_commit) == pytest.approx(960 / 8)
    # With group commit (the node's default) the size still bounds it at 960 MiB/s.
    assert wal_objects_per_second(fast) == pytest.approx(960 / 8)


def test_group_commit_seals_an_object_per_upload_cycle() -> None:
    # 140 MiB/s over 3 nodes: 46.7 MiB arrive in a node's 100 ms upload cycle, less
    # than the 8 MiB seal, so each node seals 10 objects a second.
    w = Workload(ingress_mib_s=140, zones=3, wal_seal_bytes=8 * MIB, wal_seal_age_ms=250)
    assert wal_objects_per_second(w) == pytest.approx(30, rel=1e-6)
    assert wal_objects_per_second(w, Assumptions(wal_put_s=0.05)) == pytest.approx(60, rel=1e-6)
    # An age shorter than the upload seals first (10 MiB/s a node, 640 requests/s:
    # an object every 250 ms + 1/640 s, 2.5 MiB).
    slower = dataclasses.replace(w, ingress_mib_s=30)
    expected = 3 / (0.25 + 1 / 640)
    assert wal_objects_per_second(slower, Assumptions(wal_put_s=0.5)) == pytest.approx(expected)


def test_s3_costs_hand_computed() -> None:
    # 3 nodes, age-sealed: 10.1 WAL PUTs/s (each node's object opens at its next
    # 16 KiB request after a seal, 1/21.3 s on average, and is sealed 250 ms after
    # that); compaction: 100 partitions, 300 s cycles,
    # 3 MiB/partition/cycle -> one 16 MiB object each: 100/300 PUT/s; usage records:
    # one PUT per node per minute.
    w = Workload(ingress_mib_s=1, partitions=100, retention_hours=1, days=30)
    seconds = 30 * 86_400
    wal = 3 / (0.25 + 3 * 16_384 / MIB)
    # GC, every 60 s: LISTs of 3032 WAL objects (4), 1200 stream objects (2) and
    # 3 nodes x 30 days x 1440 usage objects (130); DeleteObjects are free.
    lists = (4 + 2 + 130) * seconds / 60
    puts = (wal + 100 / 300 + 3 / 60) * seconds + lists
    # Compaction reads each partition's range out of each WAL object holding one of
    # its 16 KiB batches: 1 MiB/s over 100 partitions is 0.64 batches/s each (< 10.1).
    gets_s3wal = 100 * 0.64 * seconds
    gets_zonegate = gets_s3wal + wal * seconds * 2  # and each other node reads it once
    # Age-sealed: the rule without group commit (test_wal_sealing.py has group commit).
    age_sealed = Assumptions(wal_group_commit=False)
    s3wal = s3_wal_scenario(w, AWS, age_sealed, "standard")
    zg = zonegate_scenario(w, AWS, age_sealed, "standard")
    assert s3wal.s3_put == pytest.approx(puts / 1000 * 0.005)
    assert s3wal.s3_get == pytest.approx(gets_s3wal / 1000 * 0.0004)
    assert zg.s3_get == pytest.approx(gets_zonegate / 1000 * 0.0004)
    assert zg.s3_storage == pytest.approx(3600 * MIB / GIB * 0.023)
    # the S3-WAL broker still moves 2/3 of produce and of consumption across zones
    gib = MIB * seconds / GIB
    assert s3wal.cross_zone_transfer == pytest.approx(2 * gib * 2 / 3 * 0.02)


def test_zonegate_cross_zone_is_metadata_only() -> None:
    w = Workload(ingress_mib_s=16, fanout=1, zones=3, days=1)
    a = Assumptions(produce_batch_bytes=16 * 1024, rpc_bytes_per_batch=64)
    batches = 16 * MIB * 86_400 / (16 * 1024)
    expected = batches * 64 * (2 / 3) + batches * 64 * 2
    assert zonegate_scenario(w, AWS, a, "standard").cross_zone_transfer == pytest.approx(
        expected / GIB * 0.02
    )


def test_express_adds_per_gib_request_charges() -> None:
    w = Workload(ingress_mib_s=1024, days=1)
    std = zonegate_scenario(w, AWS, Assumptions(), "standard")
    exp = zonegate_scenario(w, AWS, Assumptions(), "express")
    uploaded_gib = 2 * 86_400  # WAL and compaction each upload every byte once
    puts = std.s3_put / 0.005  # thousands of PUTs
    assert exp.s3_put == pytest.approx(puts * 0.00113 + uploaded_gib * 0.0032)


def test_compare_orders_scenarios_and_zonegate_is_cheapest_on_aws() -> None:
    scenarios = compare(Workload(ingress_mib_s=100, fanout=3), AWS)
    names = [s.name for s in scenarios]
    assert names == ["Kafka RF=3", "Kafka RF=3 + FFF", "S3-WAL, no zone routing", "zonegate"]
    assert min(scenarios, key=lambda s: s.cost.total).name == "zonegate"


def test_azure_charges_nothing_for_cross_zone() -> None:
    w = Workload(ingress_mib_s=100)
    cost = kafka_scenario(
        w, price_table("azure", "eastus"), Assumptions(), fetch_from_follower=False
    )
    assert cost.cross_zone_transfer == 0


def test_unknown_provider_region_and_class_name_what_is_known() -> None:
    with pytest.raises(UnknownPrice, match="known providers are aws, azure, gcp"):
        price_table("ibm", "x")
    with pytest.raises(UnknownPrice, match="us-east-1"):
        price_table("aws", "mars-1")
    with pytest.raises(UnknownPrice, match="express"):
        price_table("gcp", "us-central1").object_storage("express")


def test_bad_workload_is_refused() -> None:
    with pytest.raises(ValueError):
        Workload(ingress_mib_s=-1)
    with pytest.raises(ValueError):
        Workload(ingress_mib_s=1, zones=0)


def test_warpstreams_published_api_figure_and_where_zonegate_differs() -> None:
    s3 = AWS.object_storage("standard")
    # Under WarpStream's own assumptions the model stays under its USD 40 a day.
    theirs = s3_request_usd(WARPSTREAM_WORKLOAD, WARPSTREAM_ASSUMPTIONS, s3)
    assert sum(theirs.values()) < WARPSTREAM_API_USD_PER_DAY
    # 35 files/s (3 agents, 46.7 MiB/s each, 4 MiB files): USD 15.12 a day of PUTs.
    assert theirs["wal"] == pytest.approx(140 / 4 * 86_400 * 0.005 / 1000)
    # zonegate's own storage core at the same workload: compaction GETs one range per
    # partition per WAL object, and GC lists every stream object each minute.
    w = dataclasses.replace(WARPSTREAM_WORKLOAD, wal_seal_bytes=8 * MIB)
    ours = s3_request_usd(w, Assumptions(), s3)
    assert sum(ours.values()) > WARPSTREAM_API_USD_PER_DAY
    assert ours["compaction"] > ours["wal"] and ours["gc"] > ours["wal"]
    whole = dataclasses.replace(Assumptions(), compaction_reads_whole_objects=True)
    no_list = dataclasses.replace(whole, gc_lists_objects=False)
    assert sum(s3_request_usd(w, no_list, s3).values()) < WARPSTREAM_API_USD_PER_DAY
