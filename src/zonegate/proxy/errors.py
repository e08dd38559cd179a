"""Protocol errors that say whose fault they are.

`PeerProtocolError` is the client's fault: the bytes it sent cannot be a Kafka
request we serve. The connection is closed with a log line naming the reason,
as Kafka does when it cannot parse a request (there is no request to answer).
Errors with a Kafka error code are answered in the response instead; the codes,
with Kafka's retriable flags, are in zonegate/kafka_errors.py.
"""

from __future__ import annotations


class PeerProtocolError(Exception):
    """The peer broke the protocol; close the connection and log `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


__all__ = ["PeerProtocolError"]
