"""Config definitions with Kafka's types and validators, and its error texts.

Kafka checks every config it is given (topic, broker or group) against a
`ConfigDef`: the value must parse as the config's type (INT, LONG, DOUBLE,
BOOLEAN, STRING, LIST, ...) and pass its validator (a range, a list of valid
strings). `ConfigDef` here is that shape, so topic_configs.py, broker_configs.py
and group_configs.py state each config once as Kafka does and refuse a bad
value with the message Kafka's broker gives (`Invalid value x for configuration
y: ...`). Values are kept as the strings given; only the check parses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


class InvalidConfig(ValueError):
    pass


INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
_BOUNDS = {
    "INT": (INT_MIN, INT_MAX),
    "LONG": (LONG_MIN, LONG_MAX),
    "SHORT": (SHORT_MIN, SHORT_MAX),
}


def items(v: str) -> list[str]:
    """A LIST config's items, as Kafka splits them: on commas, spaces trimmed."""
    return [p.strip() for p in v.split(",") if p.strip()]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config: Kafka's type, default (as DescribeConfigs shows it; None: null),
    and validator."""

    type: str  # INT, LONG, SHORT, DOUBLE, BOOLEAN, STRING, LIST, CLASS, PASSWORD
    default: str | None
    lo: float | None = None  # Range.atLeast / between
    hi: float | None = None
    choices: tuple[str, ...] = ()  # ValidString / ValidList; empty: any
    custom: Callable[[str], str | None] | None = None  # an error text, or None when fine
    sensitive: bool = False  # PASSWORD: DescribeConfigs hides the value

    def check(self, name: str, value: str) -> None:
        """InvalidConfig with Kafka's message if `value` is not a valid `name`."""
        problem = self._problem(value)
        if problem is not None:
            raise InvalidConfig(f"Invalid value {value} for configuration {name}: {problem}")

    def _problem(self, value: str) -> str | None:
        v = value.strip()
        number: float | None = None
        if self.type in _BOUNDS:
            try:
                n = int(v)
            except ValueError:
                return f"Not a number of type {self.type}"
            lo, hi = _BOUNDS[self.type]
            if not lo <= n <= hi:
                return f"Not a number of type {self.type}"
            number = n
        elif self.type == "DOUBLE":
            try:
                number = float(v)
            except ValueError:
                return "Not a number of type DOUBLE"
        elif self.type == "BOOLEAN":
            if v.lower() not in ("true", "false"):
                return "Expected value to be either true or false"
        elif self.type == "LIST":
            if self.choices:
                for item in items(v):
                    if item not in self.choices:
                        return f"String must be one of: {', '.join(self.choices)}"
        elif self.type == "STRING" and self.choices and v not in self.choices:
            return f"String must be one of: {', '.join(self.choices)}"
        if number is not None:
            low = self.lo is not None and number < self.lo
            high = self.hi is not None and number > self.hi
            if (low or high) and self.lo is not None and self.hi is not None:
                return (
                    f"Value must be no less than {_num(self.lo)} and no more than {_num(self.hi)}"
                )
            if low and self.lo is not None:
                return f"Value must be at least {_num(self.lo)}"
            if high and self.hi is not None:
                return f"Value must be no more than {_num(self.hi)}"
        if self.custom is not None:
            return self.custom(v)
        return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def long(default: str | None, lo: int | None = None, hi: int | None = None) -> ConfigDef:
    return ConfigDef("LONG", default, lo, hi)


def int_(default: str | None, lo: int | None = None, hi: int | None = None) -> ConfigDef:
    return ConfigDef("INT", default, lo, hi)


def double(default: str | None, lo: float | None = None, hi: float | None = None) -> ConfigDef:
    return ConfigDef("DOUBLE", default, lo, hi)


def boolean(default: str) -> ConfigDef:
    return ConfigDef("BOOLEAN", default)


def string(default: str | None, choices: Sequence[str] = ()) -> ConfigDef:
    return ConfigDef("STRING", default, choices=tuple(choices))


def list_(default: str, choices: Sequence[str] = ()) -> ConfigDef:
    return ConfigDef("LIST", default, choices=tuple(choices))


def password() -> ConfigDef:
    return ConfigDef("PASSWORD", None, sensitive=True)


def replicas_list(v: str) -> str | None:
    """follower/leader.replication.throttled.replicas: `*` or partition:broker pairs."""
    if v == "*" or not items(v):
        return None
    for item in items(v):
        parts = item.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            return (
                "Value must be either * or a list of [partitionId]:[brokerId],"
                "[partitionId]:[brokerId],..."
            )
    return None
