"""Topics and partitions, leader moves, nodes and leases, and the cluster-wide values
in the PostgreSQL store: `ClusterStore` and `ProducerIds` (api.py), statement by
statement as cluster_sqlite.py, with row locks where SQLite's one writer serializes."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Sequence

import asyncpg

from zonegate.metastore.models import (
    MetaStoreError,
    NodeRecord,
    PartitionCountChanged,
    PartitionInfo,
    TopicExists,
    TopicInfo,
)
from zonegate.metastore.tables_postgres import Db, PostgresTables, changed_rows, put_values


class ClusterTables(PostgresTables):
    # -- topics and partitions ---------------------------------------------
    @staticmethod
    async def _topic(db: Db, where: str, arg: str, *, lock: bool = False) -> TopicInfo | None:
        # `lock`: writers hold the live topic's row until they commit, so two nodes
        # growing, reconfiguring or deleting one topic take turns.
        row = await db.fetchrow(
            f"SELECT topic_id, name FROM topics WHERE deleted = 0 AND {where} = $1"
            + (" FOR UPDATE" if lock else ""),
            arg,
        )
        if row is None:
            return None
        topic_id, name = row["topic_id"], row["name"]
        parts = tuple(
            PartitionInfo(uuid.UUID(topic_id), name, r[0], r[1], r[2], r[3], r[4])
            for r in await db.fetch(
                "SELECT partition, stream_id, leader_node, leader_epoch, preferred_node "
                "FROM partitions "
                "WHERE topic_id = $1 ORDER BY partition",
                topic_id,
            )
        )
        configs = {
            r[0]: r[1]
            for r in await db.fetch(
                "SELECT key, value FROM topic_configs WHERE topic_id = $1", topic_id
            )
        }
        return TopicInfo(uuid.UUID(topic_id), name, parts, configs)

    async def create_topic(
        self, name: str, configs: dict[str, str], leaders: Sequence[int]
    ) -> TopicInfo:
        async def fn(db: Db) -> TopicInfo:
            if await self._topic(db, "name", name) is not None:
                raise TopicExists(f"topic {name!r} already exists")
            topic_id = str(uuid.uuid4())
            try:
                # The live-name unique index decides between nodes creating at once:
                # the second insert waits for the first's commit, then fails.
                await db.execute(
                    "INSERT INTO topics (topic_id, name, created_ms) VALUES ($1, $2, $3)",
                    topic_id,
                    name,
                    int(time.time() * 1000),
                )
            except asyncpg.exceptions.UniqueViolationError:
                raise TopicExists(f"topic {name!r} already exists") from None
            await db.executemany(
                "INSERT INTO topic_configs (topic_id, key, value) VALUES ($1, $2, $3)",
                [(topic_id, k, v) for k, v in configs.items()],
            )
            await db.executemany(
                "INSERT INTO partitions (topic_id, partition, leader_node, leader_epoch, "
                "preferred_node) VALUES ($1, $2, $3, 0, $3)",
                [(topic_id, p, leader) for p, leader in enumerate(leaders)],
            )
            await _bump_version(db)
            info = await self._topic(db, "topic_id", topic_id)
            assert info is not None
            return info

        return await self._tx(fn)

    async def delete_topic(self, name: str) -> TopicInfo | None:
        async def fn(db: Db) -> TopicInfo | None:
            info = await self._topic(db, "name", name, lock=True)
            if info is None:
                return None
            # The topic row stays (deleted) so its id is never reused; the index
            # entries go, so object GC can reclaim what only they referred to.
            await db.execute(
                "UPDATE topics SET deleted = 1 WHERE topic_id = $1", str(info.topic_id)
            )
            sids = [p.stream_id for p in info.partitions]
            await db.execute("DELETE FROM stream_index WHERE stream_id = ANY($1)", sids)
            await db.execute("DELETE FROM producer_state WHERE stream_id = ANY($1)", sids)
            await db.execute("DELETE FROM aborted_txns WHERE stream_id = ANY($1)", sids)
            await db.execute("DELETE FROM leader_epochs WHERE stream_id = ANY($1)", sids)
            await _lock_partitions(db, sids)
            await db.execute(
                "UPDATE partitions SET leader_epoch = leader_epoch + 1 WHERE stream_id = ANY($1)",
                sids,
            )
            # As Kafka does: groups' committed offsets of a deleted topic go with it, so a
            # topic created again under the name starts with no stale positions.
            await db.execute("DELETE FROM group_offsets WHERE topic = $1", name)
            await db.execute("DELETE FROM txn_pending_offsets WHERE topic = $1", name)
            await _bump_version(db)
            return info

        return await self._tx(fn)

    async def add_partitions(
        self, name: str, leaders: Sequence[int], have: int | None = None
    ) -> TopicInfo:
        """As cluster_sqlite.py: with `have`, only if the topic still has that many
        partitions (counted under the topic row's lock), else PartitionCountChanged."""

        async def fn(db: Db) -> TopicInfo:
            info = await self._topic(db, "name", name, lock=True)
            if info is None:
                raise MetaStoreError(f"topic {name!r} does not exist")
            if have is not None and len(info.partitions) != have:
                raise PartitionCountChanged(name, have, len(info.partitions))
            await db.executemany(
                "INSERT INTO partitions (topic_id, partition, leader_node, leader_epoch, "
                "preferred_node) VALUES ($1, $2, $3, 0, $3)",
                [
                    (str(info.topic_id), len(info.partitions) + i, leader)
                    for i, leader in enumerate(leaders)
                ],
            )
            await _bump_version(db)
            new = await self._topic(db, "name", name)
            assert new is not None
            return new

        return await self._tx(fn)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        async def fn(db: Db) -> TopicInfo:
            info = await self._topic(db, "name", name, lock=True)
            if info is None:
                raise MetaStoreError(f"topic {name!r} does not exist")
            await db.execute("DELETE FROM topic_configs WHERE topic_id = $1", str(info.topic_id))
            await db.executemany(
                "INSERT INTO topic_configs (topic_id, key, value) VALUES ($1, $2, $3)",
                [(str(info.topic_id), k, v) for k, v in configs.items()],
            )
            await _bump_version(db)
            new = await self._topic(db, "name", name)
            assert new is not None
            return new

        return await self._tx(fn)

    async def get_topic(self, name: str) -> TopicInfo | None:
        return await self._read(lambda db: self._topic(db, "name", name))

    async def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return await self._read(lambda db: self._topic(db, "topic_id", str(topic_id)))

    async def list_topics(self) -> list[TopicInfo]:
        # Three statements for the whole catalog (every node reads it several times a
        # second), not three per topic: a round trip to the server costs more than
        # SQLite's call into its library.
        async def fn(db: Db) -> list[TopicInfo]:
            topics = await db.fetch(
                "SELECT topic_id, name FROM topics WHERE deleted = 0 ORDER BY name"
            )
            parts: dict[str, list[PartitionInfo]] = {}
            names = {r["topic_id"]: r["name"] for r in topics}
            for r in await db.fetch(
                "SELECT p.topic_id, partition, stream_id, leader_node, leader_epoch, "
                "preferred_node FROM partitions p JOIN topics t ON t.topic_id = p.topic_id "
                "WHERE t.deleted = 0 ORDER BY p.topic_id, partition"
            ):
                tid = r[0]
                parts.setdefault(tid, []).append(
                    PartitionInfo(uuid.UUID(tid), names[tid], r[1], r[2], r[3], r[4], r[5])
                )
            configs: dict[str, dict[str, str]] = {}
            for r in await db.fetch(
                "SELECT c.topic_id, key, value FROM topic_configs c "
                "JOIN topics t ON t.topic_id = c.topic_id WHERE t.deleted = 0"
            ):
                configs.setdefault(r[0], {})[r[1]] = r[2]
            return [
                TopicInfo(
                    uuid.UUID(r["topic_id"]),
                    r["name"],
                    tuple(parts.get(r["topic_id"], ())),
                    configs.get(r["topic_id"], {}),
                )
                for r in topics
            ]

        return await self._read(fn)

    # -- leader moves and the metadata version -------------------------------
    async def move_partitions(self, moves: Sequence[tuple[int, int]]) -> None:
        async def fn(db: Db) -> None:
            ordered = sorted(moves)
            await _lock_partitions(db, [sid for sid, _ in ordered])
            await _move(db, ordered)
            await _bump_version(db)

        await self._tx(fn)

    async def reassign_partitions(self, assignments: Sequence[tuple[int, int, int]]) -> None:
        async def fn(db: Db) -> None:
            ordered = sorted(assignments)
            sids = [sid for sid, _, _ in ordered]
            await _lock_partitions(db, sids)
            leaders = {
                r[0]: r[1]
                for r in await db.fetch(
                    "SELECT stream_id, leader_node FROM partitions WHERE stream_id = ANY($1)",
                    sids,
                )
            }
            await db.executemany(
                "UPDATE partitions SET preferred_node = $1 WHERE stream_id = $2",
                [(preferred, sid) for sid, preferred, _ in ordered],
            )
            moves = [(sid, leader) for sid, _, leader in ordered if leaders.get(sid) != leader]
            if moves:
                await _move(db, moves)
            await _bump_version(db)

        await self._tx(fn)

    async def metadata_version(self) -> int:
        async def fn(db: Db) -> int:
            found = await db.fetchval("SELECT value FROM counters WHERE name = 'metadata_version'")
            return int(found) if found is not None else 0

        return await self._one(fn)  # one statement: one round trip

    # -- nodes and leases ---------------------------------------------------
    async def register_node(self, node: NodeRecord, lease_ms: int, now_ms: int) -> bool:
        # One statement: the row is taken if absent, expired, or held by this same
        # incarnation; a live row of another incarnation (a zombie's renewal, or a
        # second process started as this node) is left alone and False answered.
        status = await self._write1(
            "INSERT INTO nodes (node_id, zone, kafka_host, kafka_port, rpc_host, rpc_port, "
            "lease_expires_ms, incarnation, endpoints, unreached) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $10, $11) "
            "ON CONFLICT (node_id) DO UPDATE "
            "SET zone = excluded.zone, kafka_host = excluded.kafka_host, "
            "kafka_port = excluded.kafka_port, rpc_host = excluded.rpc_host, "
            "rpc_port = excluded.rpc_port, lease_expires_ms = excluded.lease_expires_ms, "
            "incarnation = excluded.incarnation, endpoints = excluded.endpoints, "
            "unreached = excluded.unreached "
            "WHERE nodes.incarnation = excluded.incarnation OR nodes.lease_expires_ms <= $9",
            node.node_id,
            node.zone,
            node.kafka_host,
            node.kafka_port,
            node.rpc_host,
            node.rpc_port,
            now_ms + lease_ms,
            node.incarnation,
            now_ms,
            node.endpoints_text(),
            node.unreached_text(),
        )
        return changed_rows(status) == 1

    async def expire_node(self, node_id: int, incarnation: int | None = None) -> None:
        if incarnation is None:
            await self._write1("UPDATE nodes SET lease_expires_ms = 0 WHERE node_id = $1", node_id)
        else:
            await self._write1(
                "UPDATE nodes SET lease_expires_ms = 0 WHERE node_id = $1 AND incarnation = $2",
                node_id,
                incarnation,
            )

    async def list_nodes(self) -> list[NodeRecord]:
        async def fn(db: Db) -> list[NodeRecord]:
            return [
                NodeRecord.from_row(tuple(row))
                for row in await db.fetch(
                    "SELECT node_id, zone, kafka_host, kafka_port, rpc_host, rpc_port, "
                    "lease_expires_ms, incarnation, endpoints, unreached, cut_off_ms "
                    "FROM nodes ORDER BY node_id"
                )
            ]

        return await self._one(fn)  # one statement: one round trip

    async def set_cut_off(self, node_id: int, since_ms: int) -> None:
        await self._write1("UPDATE nodes SET cut_off_ms = $2 WHERE node_id = $1", node_id, since_ms)

    async def acquire_lease(self, name: str, holder: int, ttl_ms: int, now_ms: int) -> bool:
        # One statement: taken if free, expired, already ours, or its holder's node lease
        # ended. Two nodes inserting a free lease at once: the second's conflict sees
        # the first's row, not its own.
        status = await self._write1(
            "INSERT INTO leases (name, holder, expires_ms) VALUES ($1, $2, $3) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            "expires_ms = excluded.expires_ms "
            "WHERE leases.holder = excluded.holder OR leases.expires_ms <= $4 "
            "OR EXISTS (SELECT 1 FROM nodes WHERE nodes.node_id = leases.holder "
            "AND nodes.lease_expires_ms <= $4)",
            name,
            holder,
            now_ms + ttl_ms,
            now_ms,
        )
        return changed_rows(status) == 1

    # -- cluster-wide values ------------------------------------------------
    async def get_cluster_configs(self) -> dict[str, dict[str, str]]:
        async def fn(db: Db) -> dict[str, dict[str, str]]:
            out: dict[str, dict[str, str]] = {}
            for r in await db.fetch("SELECT scope, name, value FROM cluster_configs"):
                out.setdefault(str(r[0]), {})[str(r[1])] = str(r[2])
            return out

        return await self._one(fn)  # one statement: one round trip

    async def set_cluster_configs(
        self, scope: str, changes: dict[str, str | None]
    ) -> dict[str, str]:
        async def fn(db: Db) -> dict[str, str]:
            await put_values(db, "cluster_configs", "scope", scope, changes)
            await _bump_version(db)
            rows = await db.fetch("SELECT name, value FROM cluster_configs WHERE scope = $1", scope)
            return {str(r[0]): str(r[1]) for r in rows}

        return await self._tx(fn)

    async def cluster_secret(self, name: str) -> str:
        async def fn(db: Db) -> str:
            # Whoever asks first makes it; everyone reads the one that was kept.
            await db.execute(
                "INSERT INTO cluster_secrets (name, value) VALUES ($1, $2) "
                "ON CONFLICT (name) DO NOTHING",
                name,
                secrets.token_hex(32),
            )
            value = await db.fetchval("SELECT value FROM cluster_secrets WHERE name = $1", name)
            return str(value)

        return await self._tx(fn)

    async def allocate_producer_id(self) -> int:
        async def fn(db: Db) -> int:
            value: int = await db.fetchval(
                "INSERT INTO counters (name, value) VALUES ('producer_id', 1000) "
                "ON CONFLICT (name) DO UPDATE SET value = counters.value + 1 RETURNING value"
            )
            return value

        return await self._tx(fn)

    async def allocate_producer_ids(self, count: int) -> int:
        async def fn(db: Db) -> int:
            # The counter holds the last id handed out (cluster_sqlite.py).
            value: int = await db.fetchval(
                "INSERT INTO counters (name, value) VALUES ('producer_id', 999 + $1) "
                "ON CONFLICT (name) DO UPDATE SET value = counters.value + $1 RETURNING value",
                count,
            )
            return value - count + 1

        return await self._tx(fn)


async def _move(db: Db, moves: Sequence[tuple[int, int]]) -> None:
    """Sets each (stream id, leader) of rows the caller locked, bumping its epoch and
    recording where it starts."""
    await db.executemany(
        "UPDATE partitions SET leader_node = $1, leader_epoch = leader_epoch + 1 "
        "WHERE stream_id = $2",
        [(node, sid) for sid, node in moves],
    )
    # Commits are fenced by epoch under the partition row's lock, so the next
    # offset now is the first the new epoch can write.
    await db.executemany(
        "INSERT INTO leader_epochs (stream_id, leader_epoch, start_offset) "
        "SELECT stream_id, leader_epoch, next_offset FROM partitions "
        "WHERE stream_id = $1 ON CONFLICT (stream_id, leader_epoch) "
        "DO UPDATE SET start_offset = excluded.start_offset",
        [(sid,) for sid, _ in moves],
    )


async def _lock_partitions(db: Db, sids: Sequence[int]) -> None:
    """Locks partition rows in stream id order, the one order every writer uses."""
    await db.execute(
        "SELECT 1 FROM partitions WHERE stream_id = ANY($1) ORDER BY stream_id FOR UPDATE",
        list(sids),
    )


async def _bump_version(db: Db) -> None:
    """Every change to topics, partitions or leaders bumps one counter nodes poll cheaply."""
    await db.execute(
        "INSERT INTO counters (name, value) VALUES ('metadata_version', 1) "
        "ON CONFLICT (name) DO UPDATE SET value = counters.value + 1"
    )
