"""One dispatch table of Kafka API handlers, each registering the versions it serves.

Handler modules register `(api_key, min_version, max_version)`; the ApiVersions
answer is built from these registrations, so the node never advertises an API
or version that has no handler (as franz-go's kfake does).

A few versions below a served range are *refused* rather than unknown
(`refuse`): they are decoded and answered with UNSUPPORTED_VERSION in the
answer, so an old client sees Kafka's error instead of a closed connection.
They are never advertised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.static.protocol import ResponsePayload

if TYPE_CHECKING:
    from zonegate.proxy.context import RequestContext

# A handler answers with the response, or None when no response is sent (acks=0).
Handler = Callable[["RequestContext", Any], Awaitable[ResponsePayload | None]]


@dataclass(frozen=True, slots=True)
class Registration:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler


class HandlerRegistry:
    def __init__(self) -> None:
        self._by_key: dict[int, Registration] = {}
        self._refused: dict[int, Registration] = {}

    def register(
        self, api_key: int, min_version: int, max_version: int
    ) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            if api_key in self._by_key:
                raise ValueError(f"API key {api_key} registered twice")
            self._by_key[api_key] = Registration(api_key, min_version, max_version, handler)
            return handler

        return decorate

    def refuse(
        self, api_key: int, min_version: int, max_version: int
    ) -> Callable[[Handler], Handler]:
        """Registers the handler answering versions that are decoded but not served."""

        def decorate(handler: Handler) -> Handler:
            served = self._by_key.get(api_key)
            if served is not None and max_version >= served.min_version:
                raise ValueError(f"API key {api_key}: refused versions overlap served ones")
            self._refused[api_key] = Registration(api_key, min_version, max_version, handler)
            return handler

        return decorate

    def lookup(self, api_key: int) -> Registration | None:
        return self._by_key.get(api_key)

    def handler_for(self, api_key: int, version: int) -> Handler | None:
        """The handler of a served or refused version; None for any other."""
        for table in (self._by_key, self._refused):
            reg = table.get(api_key)
            if reg is not None and reg.min_version <= version <= reg.max_version:
                return reg.handler
        return None

    def refused(self) -> Iterator[Registration]:
        """The refused version ranges (never advertised)."""
        return iter(sorted(self._refused.values(), key=lambda r: r.api_key))

    def __iter__(self) -> Iterator[Registration]:
        return iter(sorted(self._by_key.values(), key=lambda r: r.api_key))


REGISTRY = HandlerRegistry()
