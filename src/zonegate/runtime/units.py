"""Sizes and durations as people write them: `8MiB`, `512KiB`, `1048576`; `250ms`, `2s`, `1h`.

One parser for every command and setting, so a size or a duration that one
flag takes is taken by all (`node --wal-seal-bytes 8MiB` as `cost --wal-seal-size
8MiB`). A plain number keeps Kafka's meaning: bytes for a size, milliseconds
for a `.ms` setting, so Kafka's own config lines read the same.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
}
DURATION_UNITS_MS = {"": 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")


class UnitError(ValueError):
    pass


def parse_size(text: str) -> int:
    """`8MiB`, `1.5GiB`, `512KiB`, `100kB`, `1048576` -> bytes (a whole number)."""
    value = _parse(text, SIZE_UNITS, "a size (e.g. 8MiB, 512KiB, 1048576)")
    if value != int(value):
        raise UnitError(f"expected a whole number of bytes, got {text!r}")
    return int(value)


def parse_ms(text: str) -> float:
    """`250ms`, `2s`, `5m`, `1h`, `250` -> milliseconds."""
    return _parse(text, DURATION_UNITS_MS, "a duration (e.g. 250ms, 2s, 5m, 1h, or milliseconds)")


def _parse(text: str, units: dict[str, int], what: str) -> float:
    m = _NUMBER.fullmatch(text)
    if m is None or m.group(2).lower() not in units:
        raise UnitError(f"expected {what}, got {text!r}")
    return float(m.group(1)) * units[m.group(2).lower()]


def at_least(lo: float, kind: type[int] | type[float]) -> Callable[[str], Any]:
    """An argparse type: a number of `kind`, refused by name when below `lo` (argparse
    then names the flag). Every command's plain numbers use it."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo:g}, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse
