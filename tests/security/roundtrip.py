"""What each real client does over a secured listener, as a user would: an admin call,
produce, consume in a group (committing), and what a refused login looks like to it.

`roundtrip(client, login, topic, group)` returns the values the group member read;
`refusal(client, login)` returns the text of the authentication error the client reported
(it fails the test when the client got through instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import time
from collections.abc import Iterator
from typing import Any

from tests.security import client_configs
from tests.security.client_configs import Login

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "kcat")
VALUES = [b"secure-%d" % i for i in range(6)]


def roundtrip(client: str, login: Login, topic: str, group: str) -> list[bytes]:
    return sorted(_ROUNDTRIPS[client](login, topic, group))


def refusal(client: str, login: Login) -> str:
    return _REFUSALS[client](login)


# -- confluent-kafka ---------------------------------------------------------------
def _ck_roundtrip(login: Login, topic: str, group: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = client_configs.confluent(login)
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    assert topic in admin.list_topics(timeout=30).topics
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []
    for v in VALUES:
        producer.produce(topic, v, on_delivery=lambda e, _m: e and errors.append(str(e)))
    assert producer.flush(30) == 0 and not errors, errors
    consumer = Consumer(
        {
            **conf,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < len(VALUES) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return got


def _ck_refusal(login: Login) -> str:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**client_configs.confluent(login), "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        producer.poll(0.2)
        found = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if found:
            return str(found[0].str())
    raise AssertionError(f"confluent-kafka saw no authentication error, only {errors}")


# -- kafka-python ------------------------------------------------------------------
def _kp_roundtrip(login: Login, topic: str, group: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    conf = client_configs.kafka_python(login)
    admin = KafkaAdminClient(**conf)
    admin.create_topics([NewTopic(topic, 2, 1)])
    assert admin.describe_cluster()["brokers"]
    admin.close()
    producer = KafkaProducer(**conf, acks="all")
    for f in [producer.send(topic, v) for v in VALUES]:
        f.get(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        **conf,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < len(VALUES) and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got += [r.value for r in records]
    consumer.commit()
    consumer.close()
    return got


def _kp_refusal(login: Login) -> str:
    from kafka import KafkaProducer

    with _logged("kafka") as records:
        try:
            KafkaProducer(**client_configs.kafka_python(login), bootstrap_timeout_ms=5000)
        except Exception as exc:  # the client's own exception types say what it saw
            return "\n".join([f"{type(exc).__name__}: {exc}", *records])
    raise AssertionError("kafka-python connected with a bad login")


@contextlib.contextmanager
def _logged(logger: str) -> Iterator[list[str]]:
    """What a client library logs meanwhile: kafka-python and aiokafka log the broker's
    SASL error where they connect and raise a generic 'cannot bootstrap' after."""
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Keep(logging.INFO)
    log = logging.getLogger(logger)
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)


# -- aiokafka ----------------------------------------------------------------------
def _aio_roundtrip(login: Login, topic: str, group: str) -> list[bytes]:
    return asyncio.run(_aio_roundtrip_async(login, topic, group))


async def _aio_roundtrip_async(login: Login, topic: str, group: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    conf = client_configs.aiokafka(login)
    admin = AIOKafkaAdminClient(**conf)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
        assert topic in await admin.list_topics()
    finally:
        await admin.close()
    producer = AIOKafkaProducer(**conf, acks="all")
    await producer.start()
    try:
        for v in VALUES:
            await producer.send_and_wait(topic, v)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, **conf, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < len(VALUES) and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got += [r.value for r in records]
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


def _aio_refusal(login: Login) -> str:
    async def attempt() -> str:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(**client_configs.aiokafka(login), request_timeout_ms=15000)
        try:
            await producer.start()
        except Exception as exc:
            await producer.stop()
            return f"{type(exc).__name__}: {exc}"
        # aiokafka may take an answer to its first Metadata request for a login (its
        # OAUTHBEARER, below); then it must still get nothing: no broker, no topic.
        try:
            assert not producer.client.cluster.brokers(), "brokers known after a bad login"
            await producer.send_and_wait("refused-" + login.protocol.lower(), b"v")
        except AssertionError:
            raise
        except Exception as exc:
            return f"started, then refused: {type(exc).__name__}: {exc}"
        finally:
            await producer.stop()
        raise AssertionError("aiokafka connected with a bad login")

    with _logged("aiokafka") as records:
        return "\n".join([asyncio.run(attempt()), *records])


# -- kcat --------------------------------------------------------------------------
def _kcat(
    login: Login, *args: str, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["kcat", *client_configs.kcat_args(login), *args],
        input=input,
        capture_output=True,
        timeout=90,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def _kcat_roundtrip(login: Login, topic: str, group: str) -> list[bytes]:
    from confluent_kafka.admin import AdminClient, NewTopic

    # kcat has no admin calls but Metadata: the topic is made by librdkafka's admin
    # client over the same login, and kcat lists it.
    admin = AdminClient(client_configs.confluent(login))
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    listed = _kcat(login, "-L", "-t", topic)
    assert listed.returncode == 0 and f'topic "{topic}"'.encode() in listed.stdout, listed
    produced = _kcat(login, "-P", "-t", topic, input=b"\n".join(VALUES) + b"\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = _kcat(
        login, "-X", "auto.offset.reset=earliest", "-G", group, "-c", str(len(VALUES)),
        "-f", "%s\n", topic,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr.decode()
    return consumed.stdout.split()


def _kcat_refusal(login: Login) -> str:
    # kcat reports the refusal of its first login at once but exits only at its metadata
    # timeout (-m), whatever it saw: 5 s, not 10, of that idle wait.
    proc = _kcat(login, "-L", "-m", "5")
    assert proc.returncode != 0, "kcat listed metadata with a bad login"
    return proc.stderr.decode(errors="replace")


_ROUNDTRIPS = {
    "confluent-kafka": _ck_roundtrip,
    "kafka-python": _kp_roundtrip,
    "aiokafka": _aio_roundtrip,
    "kcat": _kcat_roundtrip,
}
_REFUSALS = {
    "confluent-kafka": _ck_refusal,
    "kafka-python": _kp_refusal,
    "aiokafka": _aio_refusal,
    "kcat": _kcat_refusal,
}
