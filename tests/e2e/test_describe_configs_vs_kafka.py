"""A topic's DescribeConfigs from zonegate and from Apache Kafka 4.3.1 (the
`apache_kafka` fixture), compared config by config: names, values of the
defaults, sources, read-only and sensitive flags, synonyms. The differences
allowed are the intended ones docs/compatibility.md lists."""

from __future__ import annotations

from typing import Any

import pytest

from tests.apache_kafka import ApacheKafkaBroker
from tests.e2e.conftest import InProcessFactory

pytestmark = pytest.mark.e2e

# Intended differences (docs/compatibility.md, "Configs").
# The fixture's Kafka sets min.insync.replicas as a cluster default when formatting.
SOURCE_DIFFERS = {"min.insync.replicas"}


def _describe(bootstrap: str, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"file.delete.delay.ms": "10000", "preallocate": "true"})]
    )
    futures[topic].result(30)
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(30)
    return {
        name: (
            e.value,
            e.source,
            e.is_read_only,
            e.is_sensitive,
            [(s.name, s.value, s.source) for s in e.synonyms.values()],
        )
        for name, e in entries.items()
    }


def test_a_topics_configs_as_apache_kafka_describes_them(
    inprocess_factory: InProcessFactory, apache_kafka: ApacheKafkaBroker
) -> None:
    ours = _describe(inprocess_factory(["--zones", "zone-a"]).bootstrap, "compared")
    kafkas = _describe(apache_kafka.bootstrap, "compared")
    assert sorted(ours) == sorted(kafkas)
    # The synonyms were asked for and compared: the topic's own, then the broker's.
    assert [s[0] for s in ours["file.delete.delay.ms"][4]] == [
        "file.delete.delay.ms",
        "log.segment.delete.delay.ms",
    ]
    for name in sorted(ours):
        value, source, read_only, sensitive, synonyms = ours[name]
        k_value, k_source, k_read_only, k_sensitive, k_synonyms = kafkas[name]
        assert value == k_value, name
        assert (read_only, sensitive) == (k_read_only, k_sensitive), name
        if name not in SOURCE_DIFFERS:
            assert source == k_source, name
            assert synonyms == k_synonyms, name
