"""The QoS options of `zonegate node` and `zonegate serve`: the object-store budget and the
classes' weights and floors (docs/qos.md), parsed into `QosSettings`."""

from __future__ import annotations

import argparse
from typing import Any

from zonegate.broker.startup import StartupError
from zonegate.qos.admission import QosSettings
from zonegate.qos.scheduler import DEFAULT_POLICIES, Budget, ClassPolicy, check_policies
from zonegate.runtime.io_class import IO_CLASSES

# argparse dest -> config file key (broker/config_file.py's KEYS takes these in).
QOS_KEYS = {
    "qos_put_bytes_per_s": "zonegate.qos.put.bytes.per.s",
    "qos_put_requests_per_s": "zonegate.qos.put.requests.per.s",
    "qos_put_in_flight": "zonegate.qos.put.in.flight",
    "qos_get_bytes_per_s": "zonegate.qos.get.bytes.per.s",
    "qos_get_requests_per_s": "zonegate.qos.get.requests.per.s",
    "qos_get_in_flight": "zonegate.qos.get.in.flight",
    "qos_weights": "zonegate.qos.weights",
    "qos_floors": "zonegate.qos.floors",
    "qos_tail_window_ms": "zonegate.qos.tail.window.ms",
    "quota_window_num": "quota.window.num",
    "quota_window_size_seconds": "quota.window.size.seconds",
    "queued_max_request_bytes": "queued.max.request.bytes",
    "max_connections": "max.connections",
    "max_connections_per_ip": "max.connections.per.ip",
}
_KAFKA_MAX_INT = 2_147_483_647
_DEFAULT_IN_FLIGHT = 64


def _non_negative(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be at least 0, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _per_class(text: str) -> dict[str, float]:
    """`produce=50,compaction=10`: values for some classes (the others keep theirs)."""
    out: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in IO_CLASSES:
            raise argparse.ArgumentTypeError(
                f"expected CLASS=NUMBER,... with CLASS one of {', '.join(IO_CLASSES)}, got {part!r}"
            )
        try:
            out[name] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: expected a number, got {value!r}") from None
    return out


_per_class.__name__ = "CLASS=NUMBER list"


def add_qos_args(p: argparse.ArgumentParser) -> None:
    for lane, what in (("put", "PUTs (and LISTs and DeleteObjects)"), ("get", "GETs")):
        p.add_argument(
            f"--qos-{lane}-bytes-per-s",
            metavar="BYTES",
            type=_non_negative(float),
            default=0.0,
            help=f"object-store budget of this node's {what} in bytes per second, shared by "
            "the I/O classes by weight and floor (default 0: no limit)",
        )
        p.add_argument(
            f"--qos-{lane}-requests-per-s",
            metavar="N",
            type=_non_negative(float),
            default=0.0,
            help=f"object-store budget of this node's {what} in requests per second "
            "(default 0: no limit)",
        )
        p.add_argument(
            f"--qos-{lane}-in-flight",
            metavar="N",
            type=_non_negative(int),
            default=_DEFAULT_IN_FLIGHT,
            help=f"most {what} under way at once; the others wait in the scheduler's queues, "
            f"by class (default {_DEFAULT_IN_FLIGHT}; 0: no limit)",
        )
    weights = ",".join(f"{c}={p.weight:g}" for c, p in DEFAULT_POLICIES.items())
    floors = ",".join(f"{c}={p.floor:g}" for c, p in DEFAULT_POLICIES.items())
    p.add_argument(
        "--qos-weights",
        metavar="CLASS=W,...",
        type=_per_class,
        default={},
        help="each I/O class's weight: classes waiting share the budget in these "
        f"proportions (default {weights})",
    )
    p.add_argument(
        "--qos-floors",
        metavar="CLASS=F,...",
        type=_per_class,
        default={},
        help="each I/O class's floor: the least share of the budget it gets while it waits, "
        f"whatever the weights; at most 1 in all (default {floors})",
    )
    p.add_argument(
        "--qos-tail-window-ms",
        metavar="MS",
        type=_non_negative(int),
        default=60_000,
        help="a Fetch's object-store read of data appended less than this ago is a tail "
        "read (class tail_fetch), else a catch-up read (catch_up_fetch) (default 60000)",
    )


def add_quota_args(p: argparse.ArgumentParser) -> None:
    """Kafka's settings of client quotas' rates (docs/qos.md)."""
    p.add_argument(
        "--quota-window-num",
        metavar="N",
        type=_at_least_one,
        default=11,
        help="quota.window.num: how many samples a client's rate is measured over, for its "
        "quotas (default 11, Kafka's)",
    )
    p.add_argument(
        "--quota-window-size-seconds",
        metavar="S",
        type=_at_least_one,
        default=1,
        help="quota.window.size.seconds: how long each sample of a client's rate lasts "
        "(default 1, Kafka's)",
    )


def add_memory_args(p: argparse.ArgumentParser) -> None:
    """Kafka's bounds on what the listener holds (docs/qos.md)."""
    p.add_argument(
        "--queued-max-request-bytes",
        metavar="BYTES",
        type=_bytes_or_unbounded,
        default=104_857_600,
        help="queued.max.request.bytes: the most bytes of requests read and not yet "
        "answered; beyond it connections are not read until answers free memory (default "
        "104857600, socket.request.max.bytes's default; -1: no bound, Kafka's default)",
    )
    p.add_argument(
        "--max-connections",
        metavar="N",
        type=_at_least_one,
        default=_KAFKA_MAX_INT,
        help="max.connections: Kafka client connections the node keeps open at most; one "
        f"more is closed at once (default {_KAFKA_MAX_INT}, Kafka's)",
    )
    p.add_argument(
        "--max-connections-per-ip",
        metavar="N",
        type=_at_least_one,
        default=_KAFKA_MAX_INT,
        help="max.connections.per.ip: connections from one address at most; one more is "
        f"closed at once (default {_KAFKA_MAX_INT}, Kafka's)",
    )


def _bytes_or_unbounded(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected int, got {text!r}") from None
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError(f"must be at least 1, or -1 for no bound; got {text}")
    return value


_bytes_or_unbounded.__name__ = "int"


def _at_least_one(text: str) -> int:
    value: int = _non_negative(int)(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


_at_least_one.__name__ = "int"


def qos_from_args(args: argparse.Namespace) -> QosSettings:
    policies = {
        c: ClassPolicy(
            args.qos_weights.get(c, p.weight),
            args.qos_floors.get(c, p.floor),
        )
        for c, p in DEFAULT_POLICIES.items()
    }
    try:
        check_policies(policies)
    except ValueError as exc:
        raise StartupError(f"--qos-weights/--qos-floors: {exc}") from None
    return QosSettings(
        put=Budget(args.qos_put_bytes_per_s, args.qos_put_requests_per_s, args.qos_put_in_flight),
        get=Budget(args.qos_get_bytes_per_s, args.qos_get_requests_per_s, args.qos_get_in_flight),
        policies=policies,
    )
