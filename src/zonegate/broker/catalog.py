"""The node's view of topics and partitions: a cache over the metadata store.

Handlers ask the catalog, never the store, on the hot path; topic changes go
through the catalog so the cache and the store never disagree on this node.
"""

from __future__ import annotations

import asyncio
import re
import uuid

from zonegate.broker.topic_configs import validate_topic_configs
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import PartitionInfo, TopicExists, TopicInfo

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 10_000


class InvalidTopic(ValueError):
    pass


def check_topic_name(name: str | None) -> str:
    """Kafka's rules: 1..249 of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name:
        raise InvalidTopic("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopic(f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL.match(name):
        raise InvalidTopic(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")
    return name


class Catalog:
    def __init__(self, meta: MetaStore, node_id: int) -> None:
        self._meta = meta
        self._node_id = node_id
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        for t in await self._meta.list_topics():
            self._put(t)

    def _put(self, t: TopicInfo) -> None:
        self._by_name[t.name] = t
        self._by_id[t.topic_id] = t

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> PartitionInfo | None:
        t = self._by_name.get(name)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def topics(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    async def create(self, name: str, partitions: int, configs: dict[str, str | None]) -> TopicInfo:
        """Raises InvalidTopic, InvalidConfig, TopicExists or ValueError (bad partition count)."""
        check_topic_name(name)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise ValueError(f"number of partitions {partitions} is outside 1..{MAX_PARTITIONS}")
        checked = validate_topic_configs(configs)
        async with self._lock:
            if name in self._by_name:
                raise TopicExists(f"topic {name!r} already exists")
            t = await self._meta.create_topic(name, partitions, checked, self._node_id)
            self._put(t)
            return t

    async def get_or_create(self, name: str, partitions: int) -> TopicInfo:
        t = self.get(name)
        if t is not None:
            return t
        try:
            return await self.create(name, partitions, {})
        except TopicExists:
            t = self.get(name)
            assert t is not None
            return t

    async def delete(self, name: str) -> TopicInfo | None:
        async with self._lock:
            t = await self._meta.delete_topic(name)
            if t is not None:
                self._by_name.pop(t.name, None)
                self._by_id.pop(t.topic_id, None)
            return t

    async def add_partitions(self, name: str, total: int) -> TopicInfo:
        if total > MAX_PARTITIONS:
            raise ValueError(f"number of partitions {total} is above {MAX_PARTITIONS}")
        async with self._lock:
            t = await self._meta.add_partitions(name, total, self._node_id)
            self._put(t)
            return t
