"""Sizes and durations: the one parser every command and setting uses."""

from __future__ import annotations

import pytest

from zonegate.runtime.units import UnitError, parse_ms, parse_size

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1048576", 1_048_576),
        ("8MiB", 8 << 20),
        ("8 mib", 8 << 20),
        ("512KiB", 512 << 10),
        ("1.5GiB", 3 << 29),
        ("100kB", 100_000),
        ("2MB", 2_000_000),
        ("-1", -1),
    ],
)
def test_sizes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text, expected", [("250", 250), ("250ms", 250), ("2s", 2000), ("5m", 300_000), ("1h", 3.6e6)]
)
def test_durations(text: str, expected: float) -> None:
    assert parse_ms(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "8 parsecs", "1.5B", "0x10"])
def test_bad_sizes_are_named(text: str) -> None:
    with pytest.raises(UnitError, match="expected a"):
        parse_size(text)


def test_bad_durations_are_named() -> None:
    with pytest.raises(UnitError, match=r"expected a duration .*, got '3 weeks'"):
        parse_ms("3 weeks")
