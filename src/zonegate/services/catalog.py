"""The node's view of topics and partitions: a cache over the metadata store.

Handlers ask the catalog, never the store, on the hot path. Changes made here
update the cache at once; changes made by other nodes (topics, leader moves)
arrive by `refresh`, which reloads only when the store's metadata version moved:
every few hundred ms, and at once when a name is not in the cache (`lookup`), so
a topic created through one node is known to the others the next moment.
Each topic's rules (`TopicRules`: produce, segmenting, retention, cleaning) are
parsed here, whenever its configs or the defaults change, so the write path, the
read path and the storage jobs never read a config string (DescribeConfigs answers
the strings themselves, from each topic's configs and `defaults`).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections import Counter
from collections.abc import Callable, Mapping

from zonegate.metastore.api import ClusterStore
from zonegate.metastore.models import (
    PartitionCountChanged,
    PartitionInfo,
    TopicExists,
    TopicInfo,
)
from zonegate.services.broker_configs import validate_broker_configs
from zonegate.services.group_configs import group_scope, validate_group_configs
from zonegate.services.topic_configs import topic_rules, validate_topic_configs
from zonegate.storage.topic_rules import TopicRules

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249


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


# place(count, partitions led per node now) -> a leader node for each new partition
Placer = Callable[[int, Mapping[int, int]], list[int]]


class Catalog:
    """The node's topics; the `Topics` service the handlers call (services/api.py)."""

    def __init__(
        self,
        meta: ClusterStore,
        placer: Placer,
        *,
        default_partitions: int = 1,
        auto_create: bool = True,
        on_deleted: Callable[[TopicInfo], None] | None = None,
        node_id: int | None = None,
    ) -> None:
        self._meta = meta
        self._place = placer
        self._default_partitions = default_partitions
        self._auto_create = auto_create
        self._on_deleted = on_deleted
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._by_stream: dict[int, PartitionInfo] = {}
        self._rules: dict[uuid.UUID, TopicRules] = {}
        # Partitions led per node, kept as topics come and go: placing a new topic's
        # partitions must not count all of the cluster's (1,000 topics of 100 would
        # count 50 million leaders between them).
        self._leader_counts: Counter[int] = Counter()
        self._lock = asyncio.Lock()
        self._version = -1
        # Counts the changes this node made to the cache. A refresh whose reads of the
        # store overlapped one may hold data from before it, and must not put it back:
        # a change is answered only once this node shows it (read-your-writes).
        self._writes = 0
        # The broker configs set at run time per scope ("" the cluster's defaults,
        # str(node id) a node's own: Kafka's dynamic broker configs), topic defaults
        # under their topic names (services/broker_configs.py `stored_name`).
        self._scoped: dict[str, dict[str, str]] = {}
        self.local_scope = "" if node_id is None else str(node_id)
        # Those in force on this node: its own over the cluster's.
        self.defaults: dict[str, str] = {}
        self.listeners: list[Callable[[dict[int, PartitionInfo]], None]] = []

    @property
    def changes(self) -> int:
        """Counts the changes to this cache (topics, partitions, leaders, configs): what
        is derived from it may be kept while the count stands (maintenance/targets.py)."""
        return self._writes

    @property
    def default_partitions(self) -> int:
        return self._default_partitions

    @property
    def auto_create(self) -> bool:
        return self._auto_create

    def rules(self, topic: TopicInfo) -> TopicRules:
        """The rules in force for `topic`, as parsed when the catalog changed."""
        rules = self._rules.get(topic.topic_id)
        if rules is None:  # a topic this cache no longer holds (deleted meanwhile)
            rules = topic_rules(topic.configs, self.defaults)
        return rules

    def defaults_at(self, scope: str) -> dict[str, str]:
        return dict(self._scoped.get(scope, {}))

    def _set_scoped(self, scoped: dict[str, dict[str, str]]) -> None:
        self._writes += 1
        self._scoped = scoped
        local = scoped.get(self.local_scope, {}) if self.local_scope else {}
        self.defaults = {**scoped.get("", {}), **local}
        self._rules = {
            t.topic_id: topic_rules(t.configs, self.defaults) for t in self._by_id.values()
        }

    async def alter_configs(
        self, name: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool
    ) -> TopicInfo:
        """AlterConfigs (`replace`: the topic's configs become `changes`) or
        IncrementalAlterConfigs (`changes` merged in; None removes); LookupError for an
        unknown topic, InvalidConfig naming a bad config."""
        await self.refresh()
        topic = self._by_name.get(name)
        if topic is None:
            raise LookupError(f"topic {name!r} does not exist")
        merged: dict[str, str | None] = {} if replace else dict(topic.configs)
        merged.update(changes)
        checked = validate_topic_configs(merged)
        if validate_only:
            return topic
        async with self._lock:
            t = await self._meta.set_topic_configs(name, checked)
            self._put(t)
            return t

    async def alter_defaults(
        self, scope: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool
    ) -> None:
        """The broker configs of `scope` ("" the cluster's defaults, a node id a node's
        own), by their broker names (`log.retention.ms`, `num.io.threads`...); with
        `replace`, those not named are removed. InvalidBrokerConfig (Kafka's
        INVALID_REQUEST) for a refused one."""
        checked = validate_broker_configs(changes, cluster_default=scope == "")
        if replace:
            for stored in self._scoped.get(scope, {}):
                checked.setdefault(stored, None)
        if not validate_only:
            after = await self._meta.set_cluster_configs(scope, checked)
            self._set_scoped({**self._scoped, scope: after})

    def group_configs(self, group_id: str) -> dict[str, str]:
        """A group's own configs (KIP-848's group configs), as set at run time."""
        return self.defaults_at(group_scope(group_id))

    async def alter_group_configs(
        self,
        group_id: str,
        changes: dict[str, str | None],
        *,
        replace: bool,
        validate_only: bool,
        bounds: Mapping[str, int] | None = None,
    ) -> None:
        """Sets (None: removes) a group's configs; with `replace`, those not named go.
        InvalidConfig with Kafka's message for a refused one."""
        scope = group_scope(group_id)
        merged: dict[str, str | None] = {} if replace else dict(self._scoped.get(scope, {}))
        merged.update(changes)
        checked = validate_group_configs(merged, bounds)
        if validate_only:
            return
        delta: dict[str, str | None] = {k: None for k in self._scoped.get(scope, {})}
        delta.update(checked)
        after = await self._meta.set_cluster_configs(scope, delta)
        self._set_scoped({**self._scoped, scope: after})

    async def load(self) -> None:
        await self.refresh(force=True)

    async def refresh(self, force: bool = False) -> bool:
        """Reloads from the store if anything changed there; True when it reloaded.

        If this node changed the cache while the store was being read, what was read
        may predate that change (the reads and the change's write interleave): it is
        read again rather than put over the newer cache.
        """
        for _ in range(5):
            writes = self._writes
            version = await self._meta.metadata_version()
            if version == self._version and not force:
                return False
            topics = await self._meta.list_topics()
            scoped = await self._meta.get_cluster_configs()
            if self._writes == writes:
                self._apply(version, topics, scoped)
                return True
        # Changed under every read: keep the cache, whose own changes are newer; the
        # version is not taken, so the next refresh reloads.
        return False

    def _apply(
        self, version: int, topics: list[TopicInfo], scoped: dict[str, dict[str, str]]
    ) -> None:
        old = self._by_stream
        self._by_name, self._by_id, self._by_stream = {}, {}, {}
        self._leader_counts = Counter()
        self._set_scoped(scoped)  # before the topics: each one's rules are parsed as it is put
        for t in topics:
            self._put(t)
        self._version = version
        for listener in self.listeners:
            listener(old)

    def _put(self, t: TopicInfo) -> None:
        self._writes += 1
        replaced = self._by_name.get(t.name)
        if replaced is not None:
            self._leader_counts.subtract(p.leader_node for p in replaced.partitions)
        self._leader_counts.update(p.leader_node for p in t.partitions)
        self._by_name[t.name] = t
        self._by_id[t.topic_id] = t
        self._rules[t.topic_id] = topic_rules(t.configs, self.defaults)
        for p in t.partitions:
            self._by_stream[p.stream_id] = p

    def by_stream(self, stream_id: int) -> PartitionInfo | None:
        return self._by_stream.get(stream_id)

    def partitions(self) -> list[PartitionInfo]:
        return list(self._by_stream.values())

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    async def by_id_fresh(self, topic_id: uuid.UUID) -> TopicInfo | None:
        t = self._by_id.get(topic_id)
        if t is None:
            await self.refresh()
            t = self._by_id.get(topic_id)  # also when another refresh reloaded it meanwhile
        return t

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
        # No cap on a topic's partitions, as in Kafka: what one request may make is
        # capped by the handlers (services/partition_limits.py).
        if partitions < 1:
            raise ValueError(f"number of partitions {partitions} is not >= 1")
        checked = validate_topic_configs(configs)
        async with self._lock:
            if name in self._by_name:
                raise TopicExists(f"topic {name!r} already exists")
            leaders = self._place(partitions, self._leader_counts)
            t = await self._meta.create_topic(name, checked, leaders)
            self._put(t)
            return t

    async def lookup(self, name: str) -> TopicInfo | None:
        """The topic, also when another node made it since this cache's last refresh.

        A miss costs one read of the store's metadata version (a reload only if it
        moved); a hit costs nothing, so handlers on the hot path may use it too.
        """
        t = self._by_name.get(name)
        if t is None:
            # Read the cache again whatever this refresh did: one running beside it (another
            # lookup's, the periodic one) may have reloaded it, leaving this one nothing to
            # reload (it answers False) though the topic is there now.
            await self.refresh()
            t = self._by_name.get(name)
        return t

    async def get_or_create(self, name: str, partitions: int) -> TopicInfo | None:
        """The topic, created if it does not exist; None if it went again meanwhile."""
        t = await self.lookup(name)
        if t is not None:
            return t
        try:
            return await self.create(name, partitions, {})
        except TopicExists:
            # Another node made it after our refresh.
            await self.refresh(force=True)
            return self.get(name)

    async def delete(self, name: str) -> TopicInfo | None:
        async with self._lock:
            t = await self._meta.delete_topic(name)
            if t is not None:
                self._writes += 1
                cached = self._by_name.pop(t.name, None)
                if cached is not None:
                    self._leader_counts.subtract(p.leader_node for p in cached.partitions)
                self._by_id.pop(t.topic_id, None)
                self._rules.pop(t.topic_id, None)
                for p in t.partitions:
                    self._by_stream.pop(p.stream_id, None)
                if self._on_deleted is not None:
                    self._on_deleted(t)  # the leader drops what it kept of them
            return t

    async def add_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> TopicInfo:
        """Grows the topic to `total` partitions, counting from the store's view.

        LookupError if the topic does not exist, ValueError if `total` is not a
        growth or too many; `validate_only` runs every check and adds nothing.
        """
        async with self._lock:
            for _ in range(3):
                await self.refresh()  # counts other nodes changed
                current = self._by_name.get(name)
                if current is None:
                    raise LookupError(f"topic {name!r} does not exist")
                have = len(current.partitions)
                if total <= have:
                    raise ValueError(
                        f"topic {name!r} has {have} partitions; the new count {total} "
                        "must be larger"
                    )
                if validate_only:
                    return current
                leaders = self._place(total - have, self._leader_counts)
                try:
                    t = await self._meta.add_partitions(name, leaders, have)
                except PartitionCountChanged:
                    continue  # another node added some meanwhile: count again
                self._put(t)
                return t
            raise ValueError(f"partitions of topic {name!r} kept changing; try again")
