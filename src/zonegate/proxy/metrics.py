"""What the Kafka listener measures of each answered request: latency by API, and the
error codes its answer carries (top-level and per topic or partition).

Read at scrape time by broker/metrics.py. Errors are found by walking the
answer's records: which fields hold an error code and which hold nested
records is learned from the first record of each type and kept, so a Produce
answer costs a few attribute reads, not a reflection pass.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.runtime.histogram import Histograms

# type -> (fields holding an ErrorCode, fields holding records or tuples of them)
_SHAPES: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _shape(entity: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    kind = type(entity)
    found = _SHAPES.get(kind)
    if found is None:
        codes, nested = [], []
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if f.name == "error_code":
                codes.append(f.name)
            elif isinstance(value, tuple) or (
                dataclasses.is_dataclass(value) and not isinstance(value, type)
            ):
                nested.append(f.name)  # records inside: walked (ints, bytes, names: not)
        found = _SHAPES[kind] = (tuple(codes), tuple(nested))
    return found


def error_codes(entity: Any, out: Counter[int]) -> None:
    """Counts every non-zero error code in `entity` and the records it holds."""
    _many_error_codes((entity,), out)


def _many_error_codes(items: tuple[Any, ...], out: Counter[int]) -> None:
    """`error_codes` of each record of a list: one type (kio's arrays are typed), so
    its shape is looked up once, and a Metadata answer's 100,000 partitions cost a
    few attribute reads each."""
    codes, nested = _shape(items[0])
    for item in items:
        for name in codes:
            code = getattr(item, name)
            if code != ErrorCode.none:
                out[int(code)] += 1
        for name in nested:
            value = getattr(item, name)
            if isinstance(value, tuple):
                if value and dataclasses.is_dataclass(value[0]):
                    _many_error_codes(value, out)
            elif dataclasses.is_dataclass(value) and not isinstance(value, type):
                error_codes(value, out)


class RequestMetrics:
    def __init__(self) -> None:
        self.latency = Histograms()  # seconds from read to answered, by API key
        self.errors: Counter[tuple[int, int]] = Counter()  # (api key, error code) -> n
        self._codes: Counter[int] = Counter()

    def answered(self, api_key: int, received_at: float, response: Any) -> None:
        self.latency.observe(api_key, time.perf_counter() - received_at)
        if response is None or not dataclasses.is_dataclass(response):
            return
        codes = self._codes
        codes.clear()
        error_codes(response, codes)
        for code, n in codes.items():
            self.errors[(api_key, code)] += n
