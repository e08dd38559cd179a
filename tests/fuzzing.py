"""Malformed Kafka frames for a real node: generation, mutation, delivery.

Used by tests/e2e/test_fuzz.py (a bounded, seeded run in the suite) and by
benchmarks/fuzz.py (long runs for deeper hunts). Frames come from three
sources, then are mutated:

- real clients: kafka-python, confluent-kafka and aiokafka produce, consume,
  use groups and admin calls through a recording proxy (`capture_client_frames`);
- synthetic requests: a random but well-formed request of every (API, version)
  the node serves, built from kio's schema classes (`synthetic_frame`);
- pure noise.

Mutations: byte flips, truncation, a corrupted size prefix, huge or negative
counts written over any field, a random API key and version in front of
another body, two frames spliced. Names come from small pools, so the topics
and groups a run creates stay few however long it runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import random
import re
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

import zonegate.proxy.handlers  # noqa: F401  (registers the served versions)
from zonegate.proxy.codec import encode_request, request_type
from zonegate.proxy.registry import REGISTRY
from zonegate.records.build import build_batch

_LOG_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
# Every version the node decodes: served ones, and the refused ones it answers with
# UNSUPPORTED_VERSION (Produce v0-2, Fetch v0-3).
SERVED: list[tuple[int, int]] = [
    (reg.api_key, v)
    for reg in [*REGISTRY, *REGISTRY.refused()]
    for v in range(reg.min_version, reg.max_version + 1)
]
TOPICS = ["fuzz-a", "fuzz-b", "fuzz-c", "__consumer_offsets", "", "x" * 300]
GROUPS = ["fuzz-g1", "fuzz-g2", ""]
_INTS = [0, 1, -1, 2, 3, 100, 0x7FFF, -0x8000, 0x7FFFFFFF, -0x80000000, 2**63 - 1, -(2**63)]
_RANGES = {"b": 8, "h": 16, "i": 32, "q": 64, "B": 8, "H": 16, "I": 32, "Q": 64}


def _int_for(kafka_type: str, rng: random.Random) -> int:
    bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}.get(kafka_type)
    if bits is None:  # unsigned
        bits = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}[kafka_type]
        return rng.choice([0, 1, 2**bits - 1, rng.randrange(2**bits)])
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    choices = [v for v in _INTS if lo <= v <= hi]
    return rng.choice([*choices, rng.randint(lo, hi), rng.randint(-3, 10)])


def _batch(rng: random.Random) -> bytes:
    n = rng.randint(1, 4)
    recs = [
        (b"k%d" % i, rng.randbytes(rng.randint(0, 40)), [], 1_700_000_000_000 + i) for i in range(n)
    ]
    return build_batch(
        recs,
        compression=rng.choice([0, 0, 1, 2, 3, 4]),
        producer_id=rng.choice([-1, 0, 7]),
        producer_epoch=rng.choice([-1, 0]),
        base_sequence=rng.choice([-1, 0, 5]),
    )


def _value(f: dataclasses.Field[Any], kafka_type: str, rng: random.Random) -> Any:
    name = f.name
    if kafka_type in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        return _int_for(kafka_type, rng)
    if kafka_type == "float64":
        return rng.choice([0.0, 1.5, -1.0])
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "error_code":
        return rng.choice([ErrorCode.none, ErrorCode.unknown_server_error])
    if kafka_type == "uuid":
        return rng.choice([None, uuid.uuid4()]) if is_optional(f) else uuid.uuid4()
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.choice([0, 1, 100, 5000, 2**31 - 1, -1]))
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(rng.choice([0, 1_700_000_000]), datetime.UTC)
    if kafka_type == "records":
        return b"".join(_batch(rng) for _ in range(rng.randint(1, 2)))
    if kafka_type == "bytes":
        return rng.randbytes(rng.randint(0, 32))
    if kafka_type == "string":
        if "topic" in name or name == "name":
            return rng.choice(TOPICS[:3] if rng.random() < 0.9 else TOPICS)
        if "group" in name:
            return rng.choice(GROUPS)
        return rng.choice(["", "a", "zonegate-fuzz", "range", "consumer", "cleanup.policy"])
    raise TypeError(kafka_type)


def random_message(cls: type[Any], rng: random.Random, depth: int = 0) -> Any:
    """A well-formed instance of kio message class `cls` with random field values."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None and rng.random() < 0.7:
            continue  # absent tagged field: its default
        fc = classify_field(f)
        nullable = is_optional(f)
        if nullable and rng.random() < 0.15:
            values[f.name] = None
            continue
        if isinstance(fc, PrimitiveField):
            values[f.name] = _value(f, get_schema_field_type(f), rng)
        elif isinstance(fc, PrimitiveTupleField):
            kt = get_schema_field_type(f)
            values[f.name] = tuple(_value(f, kt, rng) for _ in range(rng.randint(0, 3)))
        elif isinstance(fc, EntityField):
            values[f.name] = random_message(fc.type_, rng, depth + 1)
        else:
            assert isinstance(fc, EntityTupleField)
            n = rng.randint(0, 3 if depth < 3 else 1)
            values[f.name] = tuple(random_message(fc.type_, rng, depth + 1) for _ in range(n))
    return cls(**values)


# Each API's versions: a synthetic frame picks its API first, then a version of it, so
# an API of one version is sent as often as one of seventeen (picked by pair, the
# one-version APIs got about 55 frames in 20,000 and at times fewer than the 50 the
# fuzz test asks of every API).
_VERSIONS: dict[int, list[int]] = {}
for _key, _version in SERVED:
    _VERSIONS.setdefault(_key, []).append(_version)
_APIS = sorted(_VERSIONS)


def synthetic_frame(rng: random.Random) -> bytes:
    api_key = rng.choice(_APIS)
    version = rng.choice(_VERSIONS[api_key])
    msg = random_message(request_type(api_key, version), rng)
    return encode_request(
        rng.randrange(2**31), rng.choice(["fuzz", None, "zonegate_az=zone-b"]), msg
    )


def _body(frame: bytes) -> bytes:
    return frame[4:]


def _framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def mutate(frame: bytes, rng: random.Random, corpus: list[bytes]) -> tuple[str, bytes]:
    """(the kind of mutation, the mutated frame) of a well-formed frame."""
    body = bytearray(_body(frame))
    kind = rng.choice(
        ["flip", "flip", "truncate", "size", "count", "count", "header", "splice", "noise"]
    )
    if kind == "flip" and body:
        for _ in range(rng.randint(1, 6)):
            body[rng.randrange(len(body))] = rng.getrandbits(8)
    elif kind == "truncate":
        del body[rng.randrange(len(body) + 1) :]
    elif kind == "size":
        wrong = rng.choice([0, 1, 7, len(body) - 1, len(body) + 1, -1, -(2**31), 2**31 - 1])
        return kind, struct.pack(">i", wrong) + bytes(body)
    elif kind == "count" and len(body) > 10:
        pos = rng.randrange(8, len(body))
        body[pos : pos + 4] = rng.choice(
            [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\x7f"]
        )
    elif kind == "header" and len(body) >= 4:
        api_key, version = rng.choice(SERVED) if rng.random() < 0.8 else (rng.randrange(-5, 80), 0)
        body[0:4] = struct.pack(">hh", api_key, rng.choice([version, version + 1, -1]))
    elif kind == "splice" and corpus:
        other = _body(rng.choice(corpus))
        cut = rng.randrange(len(body) + 1)
        body = body[:cut] + other[rng.randrange(len(other) + 1) :]
    else:
        kind = "noise"
        body = bytearray(rng.randbytes(rng.randint(0, 200)))
    return kind, _framed(bytes(body))


@dataclass
class FuzzStats:
    frames: int = 0
    connections: int = 0
    answers: int = 0
    closed_by_node: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    apis: dict[int, int] = field(default_factory=dict)  # frames sent by header API key


# After the last answer owed, how long a connection waits for the node to close it.
ANSWERED_GRACE_S = 0.05


async def _deliver(port: int, frames: list[bytes], stats: FuzzStats, read_timeout: float) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    stats.connections += 1
    try:
        for f in frames:
            writer.write(f)
        await writer.drain()
        stats.frames += len(frames)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + read_timeout
        answered = 0
        while True:
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                head = await asyncio.wait_for(reader.readexactly(4), left)
                (size,) = struct.unpack(">i", head)
                await asyncio.wait_for(reader.readexactly(size), left)
                stats.answers += 1
                answered += 1
                if answered >= len(frames):
                    # Every frame answered: no more answers can be owed, only a close
                    # (sent at once after the last answer), so the rest of the read
                    # timeout would be idle.
                    deadline = min(deadline, loop.time() + ANSWERED_GRACE_S)
            except asyncio.IncompleteReadError:
                stats.closed_by_node += 1
                break
            except TimeoutError:
                break
    except (ConnectionError, OSError):
        stats.closed_by_node += 1
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def fuzz(
    port: int,
    frames: int,
    rng: random.Random,
    corpus: list[bytes],
    *,
    concurrency: int = 16,
    read_timeout: float = 0.3,
    stats: FuzzStats | None = None,
) -> FuzzStats:
    """Sends `frames` frames: mutated from `corpus` and synthetic requests, and noise."""
    stats = stats or FuzzStats()
    target = stats.frames + frames
    sem = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[None]] = set()

    def next_batch() -> list[bytes]:
        batch = []
        for _ in range(rng.choice([1, 1, 1, 2, 4])):
            source = rng.random()
            if source < 0.35 and corpus:
                kind, frame = mutate(rng.choice(corpus), rng, corpus)
            elif source < 0.7:
                kind, frame = mutate(synthetic_frame(rng), rng, corpus)
            elif source < 0.95:
                kind, frame = "synthetic", synthetic_frame(rng)
            else:
                kind, frame = "client", rng.choice(corpus) if corpus else synthetic_frame(rng)
            stats.kinds[kind] = stats.kinds.get(kind, 0) + 1
            if len(frame) >= 6:
                (api_key,) = struct.unpack_from(">h", frame, 4)
                stats.apis[api_key] = stats.apis.get(api_key, 0) + 1
            batch.append(frame)
        return batch

    sent = stats.frames
    while sent < target:
        batch = next_batch()
        sent += len(batch)
        await sem.acquire()
        task = asyncio.create_task(_deliver(port, batch, stats, read_timeout))
        tasks.add(task)
        task.add_done_callback(lambda t: (tasks.discard(t), sem.release()))
    if tasks:
        await asyncio.gather(*tasks)
    return stats


# -- real clients, recorded by the node (ZONEGATE_CAPTURE_FRAMES) ---------------
def drive_real_clients(bootstrap: str, topic: str) -> None:
    """Produce, consume in a group, commit, and admin calls with each client library,
    so that the node's frame capture holds what real clients send."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(30)
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for codec in ("none", "gzip", "lz4"):
        q = Producer({"bootstrap.servers": bootstrap, "compression.type": codec})
        for i in range(5):
            q.produce(topic, key=b"k%d" % i, value=b"v" * i, headers=[("h", b"x")])
        q.flush(30)
    for i in range(10):
        p.produce(topic, key=b"k%d" % i, value=b"value-%d" % i, partition=i % 3)
    p.flush(30)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fuzz-capture-ck",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    got = 0
    for _ in range(60):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
            if got >= 10:
                break
    c.commit(asynchronous=False)
    c.offsets_for_times([TopicPartition(topic, 0, 1)], timeout=10)
    c.close()
    admin.list_consumer_groups().result(30)
    admin.describe_consumer_groups(["fuzz-capture-ck"])["fuzz-capture-ck"].result(30)

    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    for i in range(5):
        kp.send(topic, key=b"kp%d" % i, value=b"x" * 50)
    kp.flush(30)
    kp.close()
    kc = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id="fuzz-capture-kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    for n, _ in enumerate(kc):
        if n > 5:
            break
    kc.commit()
    kc.close()
    ka = KafkaAdminClient(bootstrap_servers=bootstrap)
    ka.list_groups()
    ka.describe_groups(["fuzz-capture-kp"])
    ka.list_group_offsets("fuzz-capture-kp")
    ka.describe_cluster()
    ka.describe_topics([topic])
    admin.create_topics([NewTopic(topic + "-gone", num_partitions=1)])[topic + "-gone"].result(30)
    ka.delete_topics([topic + "-gone"])
    ka.close()


def read_capture(path: str) -> list[bytes]:
    """The frames a node wrote to its ZONEGATE_CAPTURE_FRAMES file (size prefix included)."""
    data = open(path, "rb").read()
    frames = []
    pos = 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        frames.append(data[pos : pos + 4 + size])
        pos += 4 + size
    return frames


class HealthCheck:
    """What must hold between fuzz rounds: the node is up, a real client still produces
    and reads back, and the node logged no ERROR and no traceback (client garbage is
    logged at INFO or WARNING; ERROR is for the node's own faults)."""

    TOPIC = "fuzz-health"

    def __init__(self, node: Any) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic

        self._node = node
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(self.TOPIC, num_partitions=1)])[self.TOPIC].result(30)
        self._producer = Producer(
            {"bootstrap.servers": node.bootstrap, "enable.idempotence": True, "linger.ms": 0}
        )
        self._consumer = Consumer(
            {
                "bootstrap.servers": node.bootstrap,
                "group.id": "fuzz-health",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
            }
        )
        self._consumer.assign([TopicPartition(self.TOPIC, 0, 0)])
        self._n = 0
        self._log_seen = 0

    def rss_mib(self) -> float:
        for line in open(f"/proc/{self._node.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def problem(self, timeout: float = 20.0) -> str | None:
        if not self._node.alive():
            return f"node exited with {self._node.proc.returncode}"
        bad = self.bad_log_lines()
        if bad:
            return "node logged:\n" + "\n".join(bad[:20])
        self._n += 1
        value = b"health-%d" % self._n
        errors: list[str] = []
        self._producer.produce(
            self.TOPIC, value=value, on_delivery=lambda err, _: err and errors.append(str(err))
        )
        if self._producer.flush(timeout) or errors:
            return f"produce failed: {errors or 'not delivered in time'}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self._consumer.poll(0.5)
            if msg is not None and msg.error() is None and msg.value() == value:
                return None
        return f"record {value!r} was not read back within {timeout} s"

    def bad_log_lines(self) -> list[str]:
        """New log records at ERROR or above, or holding a traceback, each whole."""
        text = self._node.log_text()
        new, self._log_seen = text[self._log_seen :], len(text)
        records: list[str] = []
        for line in new.splitlines():
            if _LOG_START.match(line) or not records:
                records.append(line)
            else:
                records[-1] += "\n" + line
        return [
            r
            for r in records
            if " ERROR " in r.split("\n", 1)[0] or " CRITICAL " in r or "Traceback" in r
        ]

    def close(self) -> None:
        self._consumer.close()


# -- the leader's gRPC port and the HTTP port ---------------------------------------
_RPC_METHODS = {
    "Append": "AppendRequest",
    "ReadIndex": "ReadIndexRequest",
    "Watch": "WatchRequest",
    "GroupCall": "GroupCallRequest",
}


def _random_proto(message: Any, rng: random.Random, depth: int = 0) -> Any:
    """A protobuf message of `message`'s type with random field values."""
    from google.protobuf.descriptor import FieldDescriptor as F

    msg = message()
    for f in message.DESCRIPTOR.fields:
        if rng.random() < 0.3:
            continue
        repeated = f.is_repeated
        count = rng.choice([0, 1, 2, 5, 20_000 if rng.random() < 0.02 else 3]) if repeated else 1
        values: list[Any] = []
        for _ in range(count):
            if f.type == F.TYPE_MESSAGE:
                if depth > 2:
                    break
                sub = _random_proto(f.message_type._concrete_class, rng, depth + 1)
                values.append(sub)
            elif f.type == F.TYPE_STRING:
                values.append(rng.choice(["", "wal/x", "fuzz", "k" * 300]))
            elif f.type == F.TYPE_BYTES:
                values.append(rng.randbytes(rng.randint(0, 64)))
            elif f.type == F.TYPE_ENUM:
                values.append(rng.choice([0, 1, 2, 3]))
            elif f.type in (F.TYPE_UINT32, F.TYPE_UINT64):
                values.append(rng.choice([0, 1, 7, 2**31, 2**32 - 1]))
            else:
                bits = 31 if f.type == F.TYPE_INT32 else 63
                values.append(rng.choice([0, 1, -1, 3, 2**bits - 1, -(2**bits)]))
        if not values:
            continue
        if repeated and f.type == F.TYPE_MESSAGE:
            getattr(msg, f.name).extend(values)
        elif repeated:
            getattr(msg, f.name).extend(values)
        elif f.type == F.TYPE_MESSAGE:
            getattr(msg, f.name).CopyFrom(values[0])
        else:
            setattr(msg, f.name, values[0])
    return msg


async def fuzz_rpc(port: int, calls: int, rng: random.Random, token: str = "") -> int:
    """`calls` calls of random methods with random or garbage bodies; how many were answered.

    With the cluster's `token` the calls pass its check and reach the methods. A peer
    holding it is one of the cluster's nodes, trusted to name objects that exist, so
    then Append names only streams that do not (nothing is committed).
    """
    import grpc

    from zonegate.leader_forwarder.proto import leader_pb2 as pb

    answered = 0

    async def one(channel: Any) -> None:
        nonlocal answered
        method = rng.choice(list(_RPC_METHODS))
        # With the token, an Append body is only ever built here (a flipped byte or
        # random bytes could name a real stream); other bodies may be anything.
        trusted_append = bool(token) and method == "Append"
        if trusted_append or rng.random() < 0.6:
            msg = _random_proto(getattr(pb, _RPC_METHODS[method]), rng)
            if trusted_append:
                for b in msg.batches:
                    b.stream_id = 10**9 + rng.randrange(1000)
            body = msg.SerializeToString()
            if rng.random() < 0.3 and body and not trusted_append:
                mutated = bytearray(body)
                mutated[rng.randrange(len(mutated))] = rng.getrandbits(8)
                body = bytes(mutated)
        else:
            body = rng.randbytes(rng.randint(0, 100))
        path = f"/zonegate.leader.v1.Leader/{method}"
        metadata = (("zonegate-rpc-token", token),) if token else None
        try:
            if method == "Watch":
                call = channel.unary_stream(path)(body, timeout=0.3, metadata=metadata)
                async for _ in call:
                    pass
            else:
                await channel.unary_unary(path)(body, timeout=2, metadata=metadata)
            answered += 1
        except grpc.aio.AioRpcError:
            pass

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        for start in range(0, calls, 16):
            await asyncio.gather(*(one(channel) for _ in range(min(16, calls - start))))
    return answered


async def fuzz_raw(port: int, connections: int, rng: random.Random) -> None:
    """Bytes that are not the port's protocol at all, or half of a request, then a close."""

    async def one() -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return
        choice = rng.random()
        if choice < 0.3:
            data = rng.randbytes(rng.randint(1, 3000))
        elif choice < 0.5:
            data = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + rng.randbytes(rng.randint(0, 200))
        elif choice < 0.7:
            data = b"GET /" + b"a" * rng.randint(0, 20_000) + b" HTTP/1.1\r\n"
        elif choice < 0.85:
            data = b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * rng.randint(0, 3000) + b"\r\n"
        else:
            data = rng.choice(
                [b"GET /readyz HTTP/1.0\r\n\r\n", b"POST / HTTP/1.1\r\n\r\n", b"\r\n"]
            )
        try:
            writer.write(data)
            await writer.drain()
            await asyncio.wait_for(reader.read(65536), 0.2)
        except (TimeoutError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    for start in range(0, connections, 16):
        await asyncio.gather(*(one() for _ in range(min(16, connections - start))))
