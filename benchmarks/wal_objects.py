"""WAL objects a node seals against the cost model's count, at several produce rates.

For each rate, a fresh `zonegate serve` node on S3 (moto's server) takes a
confluent-kafka producer's 1 KiB records over 8 partitions for `--seconds`:
paced at that many MB/s (`linger.ms` 5), or, for rate 0, as fast as it is
acknowledged (its in-flight window full). The node's /metrics give the WAL
objects it sealed, its ProduceRequests and its mean WAL PUT time, and the
model (cost_model/s3_requests.py, docs/cost-model.md "WAL objects") predicts
the count: paced, from the request rate and the PUT time; saturated, from the
producer's window (min(5 in flight, partitions)) alone. One line per rate:

    rate R MB/s (measured M MB/s): N WAL objects, model P (ratio P/N), one per mean PUT Q

    python benchmarks/wal_objects.py [--rates 0.05,2,30,0] [--seconds 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from storage import BUCKET, HELD_OFF, MIB, PRODUCER_IN_FLIGHT, TOPIC, metric  # noqa: E402

from tests.node_harness import free_port_block, start_node  # noqa: E402
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server  # noqa: E402
from zonegate.cost_model.s3_requests import WalSealing, wal_objects  # noqa: E402

SEAL_BYTES = 8 * MIB  # the node's defaults on S3
SEAL_AGE_S = 0.25


def produce(bootstrap: str, partitions: int, rate_mbs: float, seconds: float) -> float:
    """1 KiB records round-robin over the partitions, paced at `rate_mbs` (0: as fast
    as the producer may); returns the seconds until the last was acknowledged."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "max.in.flight.requests.per.connection": PRODUCER_IN_FLIGHT,
        }
    )
    payload = os.urandom(1024)
    per_s = rate_mbs * 1e6 / len(payload)
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - start < seconds:
        due = int((now - start) * per_s) if rate_mbs else sent + 1000
        while sent < due:
            try:
                p.produce(TOPIC, payload, partition=sent % partitions)
                sent += 1
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        if rate_mbs:
            time.sleep(0.001)  # pacing: let the clock move a millisecond
    assert p.flush(120) == 0
    return time.monotonic() - start


def one_rate(rate_mbs: float, seconds: float, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    http = free_port_block(1)
    with tempfile.TemporaryDirectory() as tmp, MotoS3Server(default_bucket=BUCKET) as moto:
        args = [
            *("--zones", "zone-a", "--object-store", f"s3://{BUCKET}/bench"),
            *("--s3-endpoint", moto.endpoint_url, "--http-port", str(http)),
            *HELD_OFF,
        ]
        node = start_node(Path(tmp) / "node", args, dict(FAKE_AWS_ENV))
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            for f in admin.create_topics([NewTopic(TOPIC, num_partitions=partitions)]).values():
                f.result(30)
            del admin
            produce_s = produce(node.bootstrap, partitions, rate_mbs, seconds)
            objects = metric(
                http, "zonegate_object_store_class_requests_total", op="put", io_class="produce"
            )
            nbytes = metric(
                http, "zonegate_object_store_class_bytes_total", op="put", io_class="produce"
            )
            requests = metric(http, "zonegate_traffic_requests_total", kind="produce_data")
            put_s = metric(http, "zonegate_produce_stage_seconds_sum", stage="put") / max(
                metric(http, "zonegate_produce_stage_seconds_count", stage="put"), 1
            )
        finally:
            node.stop()
    sealing = WalSealing(
        seal_bytes=SEAL_BYTES,
        seal_age_s=SEAL_AGE_S,
        put_s=put_s,
        request_bytes=nbytes / requests,
        window_requests=None if rate_mbs else min(PRODUCER_IN_FLIGHT, partitions),
    )
    model = wal_objects(nbytes, produce_s, nodes=1, sealing=sealing)
    print(
        f"rate {rate_mbs:g} MB/s (measured {nbytes / produce_s / 1e6:.1f} MB/s, "
        f"{requests / produce_s:.0f} requests/s, PUT {put_s * 1000:.1f} ms, "
        f"load average {os.getloadavg()[0]:.2f}): {objects:.0f} WAL objects, "
        f"model {model:.0f} (ratio {model / objects:.3f}), one per mean PUT "
        f"{produce_s / put_s:.0f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--rates", default="0.05,2,30,0", help="MB/s, comma-separated; 0: saturated"
    )
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    os.environ.update(FAKE_AWS_ENV)
    for rate in (float(r) for r in args.rates.split(",")):
        one_rate(rate, args.seconds, args.partitions)


if __name__ == "__main__":
    main()
