"""The QoS rows of settings.py: the object-store budget and the I/O classes' weights and
floors, made into `QosSettings` (docs/qos.md); client quotas' windows and the Kafka
listener's memory bounds beside them."""

from __future__ import annotations

import argparse

from zonegate.broker.setting_types import (
    KAFKA_MAX_INT,
    MS,
    REQUEST_MAX_BYTES,
    Setting,
    bytes_or_unbounded,
    size_at_least,
)
from zonegate.qos.admission import QosSettings
from zonegate.qos.scheduler import DEFAULT_POLICIES, Budget, ClassPolicy, check_policies
from zonegate.runtime.io_class import IO_CLASSES
from zonegate.runtime.units import at_least

DEFAULT_QOS = QosSettings()  # the settings' defaults


def per_class(text: str) -> dict[str, float]:
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


per_class.__name__ = "CLASS=NUMBER list"


def _qos_lane(lane: str, what: str) -> tuple[Setting, ...]:
    """One lane of the object-store budget: PUTs (and LISTs and deletes), or GETs."""
    key = f"zonegate.qos.{lane}"
    default = getattr(DEFAULT_QOS, lane)
    return (
        Setting(
            f"--qos-{lane}-bytes-per-s",
            f"{key}.bytes.per.s",
            default.bytes_per_s,
            f"object-store budget of this node's {what} in bytes per second, shared by "
            "the I/O classes by weight and floor (default {default}: no limit)",
            size_at_least(0),
            "BYTES",
            into=None,
        ),
        Setting(
            f"--qos-{lane}-requests-per-s",
            f"{key}.requests.per.s",
            default.requests_per_s,
            f"object-store budget of this node's {what} in requests per second "
            "(default {default}: no limit)",
            at_least(0, float),
            "N",
            into=None,
        ),
        Setting(
            f"--qos-{lane}-in-flight",
            f"{key}.in.flight",
            default.max_in_flight,
            f"most {what} under way at once; the others wait in the scheduler's queues, "
            "by class (default {default}; 0: no limit)",
            at_least(0, int),
            "N",
            into=None,
        ),
    )


def _per_class_default(what: str) -> str:
    return ",".join(f"{c}={getattr(p, what):g}" for c, p in DEFAULT_POLICIES.items())


QOS_SETTINGS: tuple[Setting, ...] = (
    # The object-store scheduler (docs/qos.md).
    *_qos_lane("put", "PUTs (and LISTs and DeleteObjects)"),
    *_qos_lane("get", "GETs"),
    Setting(
        "--qos-weights",
        "zonegate.qos.weights",
        {},
        "each I/O class's weight: classes waiting share the budget in these "
        f"proportions (default {_per_class_default('weight')})",
        per_class,
        "CLASS=W,...",
        into=None,
    ),
    Setting(
        "--qos-floors",
        "zonegate.qos.floors",
        {},
        "each I/O class's floor: the least share of the budget it gets while it waits, "
        f"whatever the weights; at most 1 in all (default {_per_class_default('floor')})",
        per_class,
        "CLASS=F,...",
        into=None,
    ),
    Setting(
        "--qos-tail-window-ms",
        "zonegate.qos.tail.window.ms",
        60_000,
        "a Fetch's object-store read of data appended less than this ago is a tail "
        "read (class tail_fetch), else a catch-up read (catch_up_fetch) (default {default})",
        **MS,
    ),
    # Client quotas' rates (docs/qos.md).
    Setting(
        "--quota-window-num",
        "quota.window.num",
        11,
        "quota.window.num: how many samples a client's rate is measured over, for its "
        "quotas (default {default}, Kafka's)",
        at_least(1, int),
        "N",
    ),
    Setting(
        "--quota-window-size-seconds",
        "quota.window.size.seconds",
        1,
        "quota.window.size.seconds: how long each sample of a client's rate lasts "
        "(default {default}, Kafka's)",
        at_least(1, int),
        "S",
        into="quota_window_size_s",
    ),
    # The Kafka listener's memory bounds (docs/qos.md).
    Setting(
        "--queued-max-request-bytes",
        "queued.max.request.bytes",
        REQUEST_MAX_BYTES,
        "queued.max.request.bytes: the most bytes of requests read and not yet "
        "answered; beyond it connections are not read until answers free memory (default "
        "{default}, socket.request.max.bytes's default; -1: no bound, Kafka's default)",
        bytes_or_unbounded,
        "BYTES",
    ),
    Setting(
        "--max-connections",
        "max.connections",
        KAFKA_MAX_INT,
        "max.connections: Kafka client connections the node keeps open at most; one "
        "more is closed at once (default {default}, Kafka's)",
        at_least(1, int),
        "N",
    ),
    Setting(
        "--max-connections-per-ip",
        "max.connections.per.ip",
        KAFKA_MAX_INT,
        "max.connections.per.ip: connections from one address at most; one more is "
        "closed at once (default {default}, Kafka's)",
        at_least(1, int),
        "N",
    ),
)


def qos_from_args(args: argparse.Namespace) -> QosSettings:
    """ValueError for weights and floors the scheduler cannot honour."""
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
        raise ValueError(f"--qos-weights/--qos-floors: {exc}") from None
    return QosSettings(
        put=Budget(args.qos_put_bytes_per_s, args.qos_put_requests_per_s, args.qos_put_in_flight),
        get=Budget(args.qos_get_bytes_per_s, args.qos_get_requests_per_s, args.qos_get_in_flight),
        policies=policies,
    )
