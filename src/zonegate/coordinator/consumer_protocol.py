"""Reads the topics out of a classic consumer's subscription (Kafka's ConsumerProtocol).

The coordinator treats member metadata as opaque except here: OffsetDelete must
refuse to drop offsets of a topic the group still consumes
(GROUP_SUBSCRIBED_TO_TOPIC), which needs the subscribed topic names. Layout
(ConsumerProtocolSubscription v0-3, not flexible): int16 version, then an
int32-counted array of int16-length strings; what follows is not needed here.
kio has no schema for this embedded format, so these few lines do it by hand.
"""

from __future__ import annotations

import struct


def subscription_topics(metadata: bytes) -> set[str] | None:
    """The subscribed topics, or None when the bytes are not a consumer subscription."""
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        if version < 0:
            return None
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos = 6
        topics: set[str] = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(metadata[pos : pos + length].decode())
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
