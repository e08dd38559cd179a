"""Test records with keys, values, headers and timestamps, and the checks applied to them."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@dataclass(frozen=True)
class SampleRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def make_records(n: int, tag: str, value_size: int = 200) -> list[SampleRecord]:
    base_ts = int(time.time() * 1000) - 10_000
    out = []
    for i in range(n):
        out.append(
            SampleRecord(
                key=None if i % 17 == 0 else f"{tag}-key-{i}".encode(),
                value=None
                if i % 29 == 5 and i % 17
                else os.urandom(value_size // 2) + bytes(value_size // 2),
                headers=(
                    (("h1", f"v{i}".encode()), ("bin", bytes([i % 256, 0, 255]))) if i % 3 else ()
                ),
                timestamp_ms=base_ts + i,
            )
        )
    return out
