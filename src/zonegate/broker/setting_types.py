"""What a setting is (`Setting`, one row of settings.py) and the value types and
conversions the rows use. argparse names a type's `__name__` in its messages."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zonegate.runtime.units import UnitError, at_least, parse_ms, parse_size

KAFKA_MAX_INT = 2_147_483_647
# socket.request.max.bytes's default, and queued.max.request.bytes's here (docs/qos.md).
REQUEST_MAX_BYTES = 104_857_600


@dataclass(frozen=True)
class Setting:
    """One setting: all the CLI, the config file, the environment, NodeConfig and
    docs/configuration.md need to know of it."""

    flag: str
    key: str  # in the config file
    default: Any  # as `type` returns it
    help: str  # `{default}` in it shows the default
    type: Callable[[str], Any] | None = None  # parses and checks a value; None: the text
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    # The NodeConfig field(s) the value sets: "" the flag's own name, None none (read
    # from the parsed arguments instead), a tuple: the value's parts, field by field.
    into: str | tuple[str, ...] | None = ""
    convert: Callable[[Any], Any] | None = None  # value -> field; ValueError: refused
    only: str | None = None  # the one command it belongs to
    serve_help: str | None = None  # `serve`'s help, where it differs (one node per zone)

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def env(self) -> str:
        return env_name(self.flag)

    def help_for(self, command: str) -> str:
        text = self.serve_help if command == "serve" and self.serve_help else self.help
        shown = f"{self.default:g}" if isinstance(self.default, float) else self.default
        return text.format(default=shown)

    def parse(self, text: str) -> Any:
        """A value from the config file or the environment, checked as the flag's is."""
        value = self.type(text.strip()) if self.type is not None else text.strip()
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(self.choices)
            raise argparse.ArgumentTypeError(f"expected one of {allowed}, got {text!r}")
        return value

    def node_fields(self, value: Any) -> dict[str, Any]:
        """The NodeConfig fields this value sets."""
        if self.into is None:
            return {}
        converted = self.convert(value) if self.convert is not None else value
        if isinstance(self.into, tuple):
            return dict(zip(self.into, converted, strict=True))
        return {self.into or self.dest: converted}


def env_name(flag: str) -> str:
    return "ZONEGATE_" + flag.removeprefix("--").replace("-", "_").upper()


# -- value types: argparse names `__name__` in its messages -----------------------------


def size_at_least(lo: int) -> Callable[[str], int]:
    """Bytes, with or without a unit (`8MiB`, `512KiB`, `1048576`: runtime/units.py)."""

    def parse(text: str) -> int:
        try:
            value = parse_size(text)
        except UnitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo} bytes, got {text}")
        return value

    parse.__name__ = "size"
    return parse


def ms_at_least(lo: float, kind: type[int] | type[float] = int) -> Callable[[str], Any]:
    """Milliseconds, with or without a unit (`250ms`, `2s`, `5m`, `250`: runtime/units.py)."""

    def parse(text: str) -> int | float:
        try:
            value = parse_ms(text)
        except UnitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if kind is int:
            if value != int(value):
                raise argparse.ArgumentTypeError(f"expected whole milliseconds, got {text!r}")
            value = int(value)
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo:g} ms, got {text}")
        return value

    parse.__name__ = "duration"
    return parse


def host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "0.0.0.0", int(port)


def node_id(text: str) -> int:
    """A number, or `from-ip:ADDRESS` (the DaemonSet's: broker/k8s_node.py)."""
    if text.startswith("from-ip:"):
        from zonegate.broker.k8s_node import NodeIdentityError, node_id_from_ip

        try:
            return node_id_from_ip(text)
        except NodeIdentityError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    value: int = at_least(0, int)(text)
    if value > KAFKA_MAX_INT:
        raise argparse.ArgumentTypeError(f"must be at most {KAFKA_MAX_INT} (Kafka's broker ids)")
    return value


node_id.__name__ = "int"

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(LOG_LEVELS)} (any case), got {text!r}"
        )
    return text.upper()


def bytes_or_unbounded(text: str) -> int:
    try:
        value = parse_size(text)
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError(f"must be at least 1, or -1 for no bound; got {text}")
    return value


bytes_or_unbounded.__name__ = "size"


# -- conversions into NodeConfig fields ----------------------------------------------------


def is_true(text: str) -> bool:
    return text == "true"


def ms_to_s(ms: int) -> float:
    return ms / 1000


def zone_cidrs(spec: str) -> tuple[tuple[str, str], ...]:
    import ipaddress

    from zonegate.router.zones import parse_cidr_map

    try:
        cidrs = parse_cidr_map(spec)
        for cidr in cidrs:
            ipaddress.ip_network(cidr, strict=False)
    except ValueError as exc:
        raise ValueError(f"--zone-map {spec!r}: {exc}") from None
    return tuple(cidrs.items())


def zone(value: str) -> str:
    from zonegate.broker.k8s_node import FROM_NODE_LABEL

    if value != FROM_NODE_LABEL:
        return value
    from zonegate.broker.k8s_node import NodeIdentityError, zone_from_node_label

    try:
        return zone_from_node_label()
    except NodeIdentityError as exc:
        raise ValueError(f"--zone {FROM_NODE_LABEL}: {exc}") from None


def rpc_dial_map(spec: str) -> tuple[tuple[str, str], ...]:
    """`HOST:PORT=HOST:PORT,...`: each advertised leader RPC address and the address
    this node dials for it instead."""
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        advertised, sep, dial = item.partition("=")
        try:
            if not sep:
                raise argparse.ArgumentTypeError("expected HOST:PORT=HOST:PORT")
            a_host, a_port = host_port(advertised.strip())
            d_host, d_port = host_port(dial.strip())
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"--rpc-dial-map item {item!r}: {exc}") from None
        out[f"{a_host}:{a_port}"] = f"{d_host}:{d_port}"
    return tuple(out.items())


def rpc_listener(value: tuple[str, int] | None) -> tuple[str | None, int]:
    return value or (None, 0)  # the Kafka host, any free port


ON_OFF = ("true", "false")
MS: dict[str, Any] = {"metavar": "MS", "type": ms_at_least(0)}
MS_POSITIVE: dict[str, Any] = {"metavar": "MS", "type": ms_at_least(1)}
