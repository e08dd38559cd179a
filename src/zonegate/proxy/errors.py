"""Protocol errors that say whose fault they are and what to answer with.

`PeerProtocolError` is the client's fault: the bytes it sent cannot be a Kafka
request we serve. The connection is closed with a log line naming the reason,
as Kafka does when it cannot parse a request (there is no request to answer).
Errors with a Kafka error code are answered in the response instead.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class PeerProtocolError(Exception):
    """The peer broke the protocol; close the connection and log `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KafkaError(Exception):
    """An error answered to the client with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


__all__ = ["ErrorCode", "KafkaError", "PeerProtocolError"]
