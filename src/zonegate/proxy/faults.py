"""Test hooks: make one request kind misbehave on one node (after kfake's ControlKey).

Set by `ZONEGATE_FAULTS`, a comma-separated list of `API_KEY:ACTION:COUNT`.
The one action today, `drop_response`, handles the request fully (the data is
staged and committed) and then closes the connection instead of answering, as
a network failure after the broker's commit would. Clients must retry, and the
retry must not duplicate (idempotent producers). Never set in production.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


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
