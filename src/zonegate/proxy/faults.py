"""Test hooks: make one request kind misbehave on one node (after kfake's ControlKey),
or keep the frames clients send.

`ZONEGATE_FAULTS` is a comma-separated list of `API_KEY:ACTION:COUNT`. The one
action today, `drop_response`, handles the request fully (the data is staged
and committed) and then closes the connection instead of answering, as a
network failure after the broker's commit would. Clients must retry, and the
retry must not duplicate (idempotent producers).

`ZONEGATE_CAPTURE_FRAMES=PATH` appends the first 5,000 request frames the node
reads (size prefix included) to PATH: the fuzz tests mutate what real clients
send. Never set either in production.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO

_CAPTURE_LIMIT = 5000


@dataclass
class _Rule:
    action: str
    remaining: int


class FaultInjector:
    def __init__(self, spec: str | None = None) -> None:
        self._rules: dict[int, _Rule] = {}
        spec = os.environ.get("ZONEGATE_FAULTS", "") if spec is None else spec
        for item in filter(None, (s.strip() for s in spec.split(","))):
            try:
                key, action, count = item.split(":")
                if action != "drop_response":
                    raise ValueError(action)
                self._rules[int(key)] = _Rule(action, int(count))
            except ValueError:
                raise ValueError(
                    f"bad ZONEGATE_FAULTS item {item!r}: expected API_KEY:drop_response:COUNT"
                ) from None

    def take(self, api_key: int, action: str) -> bool:
        rule = self._rules.get(api_key)
        if rule is None or rule.action != action or rule.remaining <= 0:
            return False
        rule.remaining -= 1
        return True


class FrameCapture:
    """Appends request frames to a file, up to a fixed number, for the fuzz tests."""

    def __init__(self, path: str | None = None) -> None:
        path = os.environ.get("ZONEGATE_CAPTURE_FRAMES") if path is None else path
        self._file: BinaryIO | None = open(path, "ab") if path else None  # noqa: SIM115
        self._left = _CAPTURE_LIMIT

    @property
    def active(self) -> bool:
        return self._file is not None

    def record(self, frame: bytes) -> None:
        if self._file is None:
            return
        self._file.write(len(frame).to_bytes(4, "big") + frame)
        self._file.flush()
        self._left -= 1
        if self._left <= 0:
            self._file.close()
            self._file = None
