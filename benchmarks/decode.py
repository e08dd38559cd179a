"""Request decoding cost: zonegate's bounded decoder against kio's native reader, same run.

Decodes the requests a node sees most (produce as librdkafka sends it at full
speed and at a low rate, fetch, metadata, a consumer-group heartbeat) with
both readers, many times each, and prints microseconds per request (the
fastest of several repeats, so other load on the machine counts least) and
the ratio. kio's native reader is only measured here: the node never runs it
(docs/robustness.md). Last line:

    decode: produce 1 MiB X us (native Y), produce 8x16 KiB X us (native Y), ...
"""

from __future__ import annotations

import argparse
import datetime
import io
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kio.index import load_request_schema  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402

from zonegate.proxy.decoder import message_reader  # noqa: E402


def _module(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]


def _produce(partitions: int, size: int) -> Any:
    m = _module(0, 9)
    return m.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            m.TopicProduceData(
                name="bench",
                partition_data=tuple(
                    m.PartitionProduceData(index=i, records=b"x" * size) for i in range(partitions)
                ),
            ),
        ),
    )


def _fetch() -> Any:
    m = _module(1, 12)
    return m.FetchRequest(
        cluster_id=None,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            m.FetchTopic(
                topic="bench",
                partitions=tuple(
                    m.FetchPartition(
                        partition=i,
                        current_leader_epoch=0,
                        fetch_offset=1000 * i,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1048576,
                    )
                    for i in range(8)
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _metadata() -> Any:
    m = _module(3, 12)
    return m.MetadataRequest(
        topics=tuple(m.MetadataRequestTopic(topic_id=None, name=f"t{i}") for i in range(3)),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


def _heartbeat() -> Any:
    m = _module(12, 4)
    return m.HeartbeatRequest(
        group_id="bench-group", generation_id=3, member_id="rdkafka-1234", group_instance_id=None
    )


CASES = {
    "produce 1 MiB": lambda: _produce(1, 1024 * 1024),
    "produce 8x16 KiB": lambda: _produce(8, 16 * 1024),
    "produce 1x1 KiB": lambda: _produce(1, 1024),
    "fetch 8 partitions": _fetch,
    "metadata 3 topics": _metadata,
    "heartbeat": _heartbeat,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    parts = []
    for name, make in CASES.items():
        msg = make()
        buf = io.BytesIO()
        entity_writer(type(msg))(buf, msg)
        data = buf.getvalue()
        ours = message_reader(type(msg))
        native = entity_reader(type(msg))
        assert ours(data, 0) == native(data, 0)
        n = max(args.number // max(1, len(data) // 65536), 50)
        t_ours, t_native = (
            min(timeit.repeat(lambda f=f, d=data: f(d, 0), number=n, repeat=args.repeat)) / n * 1e6
            for f in (ours, native)
        )
        print(
            f"{name:20} {len(data):>9} bytes: zonegate {t_ours:7.2f} us, "
            f"kio native {t_native:7.2f} us, ratio {t_ours / t_native:.1f}",
            flush=True,
        )
        parts.append(f"{name} {t_ours:.1f} us (native {t_native:.1f})")
    print("decode: " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
