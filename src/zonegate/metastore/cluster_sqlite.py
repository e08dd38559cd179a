"""Topics and partitions, leader moves, nodes and leases, and the cluster-wide values
(secrets, producer ids, the metadata version) in the SQLite store: `ClusterStore` and
`ProducerIds` (api.py) over the tables of tables_sqlite.py."""

from __future__ import annotations

import secrets
import sqlite3
import time
import uuid
from collections.abc import Sequence

from zonegate.metastore.models import (
    MetaStoreError,
    NodeRecord,
    PartitionCountChanged,
    PartitionInfo,
    TopicExists,
    TopicInfo,
)
from zonegate.metastore.tables_sqlite import SqliteTables, put_values


class ClusterTables(SqliteTables):
    # -- topics and partitions ---------------------------------------------
    @staticmethod
    def _topic(db: sqlite3.Connection, where: str, arg: str) -> TopicInfo | None:
        row = db.execute(
            f"SELECT topic_id, name FROM topics WHERE deleted = 0 AND {where} = ?", (arg,)
        ).fetchone()
        if row is None:
            return None
        topic_id, name = row
        tid = uuid.UUID(topic_id)  # parsed once, not per partition
        parts = tuple(
            PartitionInfo(tid, name, p, sid, leader, epoch, preferred)
            for p, sid, leader, epoch, preferred in db.execute(
                "SELECT partition, stream_id, leader_node, leader_epoch, preferred_node "
                "FROM partitions "
                "WHERE topic_id = ? ORDER BY partition",
                (topic_id,),
            )
        )
        configs = dict(
            db.execute("SELECT key, value FROM topic_configs WHERE topic_id = ?", (topic_id,))
        )
        return TopicInfo(tid, name, parts, configs)

    async def create_topic(
        self, name: str, configs: dict[str, str], leaders: Sequence[int]
    ) -> TopicInfo:
        def fn(db: sqlite3.Connection) -> TopicInfo:
            if self._topic(db, "name", name) is not None:
                raise TopicExists(f"topic {name!r} already exists")
            topic_id = str(uuid.uuid4())
            db.execute(
                "INSERT INTO topics (topic_id, name, created_ms) VALUES (?, ?, ?)",
                (topic_id, name, int(time.time() * 1000)),
            )
            db.executemany(
                "INSERT INTO topic_configs (topic_id, key, value) VALUES (?, ?, ?)",
                [(topic_id, k, v) for k, v in configs.items()],
            )
            db.executemany(
                "INSERT INTO partitions (topic_id, partition, leader_node, leader_epoch, "
                "preferred_node) VALUES (?, ?, ?, 0, ?)",
                [(topic_id, p, leader, leader) for p, leader in enumerate(leaders)],
            )
            _bump_version(db)
            info = self._topic(db, "topic_id", topic_id)
            assert info is not None
            return info

        return await self._run(fn)

    async def delete_topic(self, name: str) -> TopicInfo | None:
        def fn(db: sqlite3.Connection) -> TopicInfo | None:
            info = self._topic(db, "name", name)
            if info is None:
                return None
            # The topic row stays (deleted) so its id is never reused; the index
            # entries go, so object GC can reclaim what only they referred to.
            db.execute("UPDATE topics SET deleted = 1 WHERE topic_id = ?", (str(info.topic_id),))
            for p in info.partitions:
                db.execute("DELETE FROM stream_index WHERE stream_id = ?", (p.stream_id,))
                db.execute("DELETE FROM producer_state WHERE stream_id = ?", (p.stream_id,))
                db.execute("DELETE FROM aborted_txns WHERE stream_id = ?", (p.stream_id,))
                db.execute("DELETE FROM leader_epochs WHERE stream_id = ?", (p.stream_id,))
                db.execute(
                    "UPDATE partitions SET leader_epoch = leader_epoch + 1 WHERE stream_id = ?",
                    (p.stream_id,),
                )
            # As Kafka does: groups' committed offsets of a deleted topic go with it, so a
            # topic created again under the name starts with no stale positions.
            db.execute("DELETE FROM group_offsets WHERE topic = ?", (name,))
            db.execute("DELETE FROM txn_pending_offsets WHERE topic = ?", (name,))
            _bump_version(db)
            return info

        return await self._run(fn)

    async def add_partitions(
        self, name: str, leaders: Sequence[int], have: int | None = None
    ) -> TopicInfo:
        """Appends one partition per entry of `leaders`, led by that node.

        With `have`, only if the topic still has that many partitions (checked in the
        same transaction), else PartitionCountChanged: two nodes growing a topic to the
        same total at once must not both add.
        """

        def fn(db: sqlite3.Connection) -> TopicInfo:
            info = self._topic(db, "name", name)
            if info is None:
                raise MetaStoreError(f"topic {name!r} does not exist")
            if have is not None and len(info.partitions) != have:
                raise PartitionCountChanged(name, have, len(info.partitions))
            db.executemany(
                "INSERT INTO partitions (topic_id, partition, leader_node, leader_epoch, "
                "preferred_node) VALUES (?, ?, ?, 0, ?)",
                [
                    (str(info.topic_id), len(info.partitions) + i, leader, leader)
                    for i, leader in enumerate(leaders)
                ],
            )
            _bump_version(db)
            new = self._topic(db, "name", name)
            assert new is not None
            return new

        return await self._run(fn)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        def fn(db: sqlite3.Connection) -> TopicInfo:
            info = self._topic(db, "name", name)
            if info is None:
                raise MetaStoreError(f"topic {name!r} does not exist")
            db.execute("DELETE FROM topic_configs WHERE topic_id = ?", (str(info.topic_id),))
            db.executemany(
                "INSERT INTO topic_configs (topic_id, key, value) VALUES (?, ?, ?)",
                [(str(info.topic_id), k, v) for k, v in configs.items()],
            )
            _bump_version(db)
            new = self._topic(db, "name", name)
            assert new is not None
            return new

        return await self._run(fn)

    async def get_topic(self, name: str) -> TopicInfo | None:
        return await self._read(lambda db: self._topic(db, "name", name))

    async def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return await self._read(lambda db: self._topic(db, "topic_id", str(topic_id)))

    async def list_topics(self) -> list[TopicInfo]:
        def fn(db: sqlite3.Connection) -> list[TopicInfo]:
            names = [r[0] for r in db.execute("SELECT name FROM topics WHERE deleted = 0")]
            return [t for n in names if (t := self._topic(db, "name", n)) is not None]

        return await self._read(fn)

    # -- leader moves and the metadata version -------------------------------
    async def move_partitions(self, moves: Sequence[tuple[int, int]]) -> None:
        def fn(db: sqlite3.Connection) -> None:
            _move(db, moves)
            _bump_version(db)

        await self._run(fn)

    async def reassign_partitions(self, assignments: Sequence[tuple[int, int, int]]) -> None:
        def fn(db: sqlite3.Connection) -> None:
            leaders = {
                sid: row[0]
                for sid, _, _ in assignments
                if (
                    row := db.execute(
                        "SELECT leader_node FROM partitions WHERE stream_id = ?", (sid,)
                    ).fetchone()
                )
                is not None
            }
            db.executemany(
                "UPDATE partitions SET preferred_node = ? WHERE stream_id = ?",
                [(preferred, sid) for sid, preferred, _ in assignments],
            )
            moves = [(sid, leader) for sid, _, leader in assignments if leaders.get(sid) != leader]
            if moves:
                _move(db, moves)
            _bump_version(db)

        await self._run(fn)

    async def metadata_version(self) -> int:
        def fn(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT value FROM counters WHERE name = 'metadata_version'")
            found = row.fetchone()
            return int(found[0]) if found else 0

        return await self._read(fn)

    # -- nodes and leases ---------------------------------------------------
    async def register_node(self, node: NodeRecord, lease_ms: int, now_ms: int) -> bool:
        # One statement: the row is taken if absent, expired, or held by this same
        # incarnation; a live row of another incarnation (a zombie's renewal, or a
        # second process started as this node) is left alone and False answered.
        changed = await self._write1(
            "INSERT INTO nodes (node_id, zone, kafka_host, kafka_port, rpc_host, rpc_port, "
            "lease_expires_ms, incarnation, endpoints, unreached) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(node_id) DO UPDATE "
            "SET zone = excluded.zone, kafka_host = excluded.kafka_host, "
            "kafka_port = excluded.kafka_port, rpc_host = excluded.rpc_host, "
            "rpc_port = excluded.rpc_port, lease_expires_ms = excluded.lease_expires_ms, "
            "incarnation = excluded.incarnation, endpoints = excluded.endpoints, "
            "unreached = excluded.unreached "
            "WHERE nodes.incarnation = excluded.incarnation OR nodes.lease_expires_ms <= ?",
            (
                node.node_id,
                node.zone,
                node.kafka_host,
                node.kafka_port,
                node.rpc_host,
                node.rpc_port,
                now_ms + lease_ms,
                node.incarnation,
                node.endpoints_text(),
                node.unreached_text(),
                now_ms,
            ),
        )
        return changed == 1

    async def expire_node(self, node_id: int, incarnation: int | None = None) -> None:
        if incarnation is None:
            await self._write1(
                "UPDATE nodes SET lease_expires_ms = 0 WHERE node_id = ?", (node_id,)
            )
        else:
            await self._write1(
                "UPDATE nodes SET lease_expires_ms = 0 WHERE node_id = ? AND incarnation = ?",
                (node_id, incarnation),
            )

    async def list_nodes(self) -> list[NodeRecord]:
        return await self._read(
            lambda db: [
                NodeRecord.from_row(row)
                for row in db.execute(
                    "SELECT node_id, zone, kafka_host, kafka_port, rpc_host, rpc_port, "
                    "lease_expires_ms, incarnation, endpoints, unreached, cut_off_ms "
                    "FROM nodes ORDER BY node_id"
                )
            ]
        )

    async def set_cut_off(self, node_id: int, since_ms: int) -> None:
        await self._write1("UPDATE nodes SET cut_off_ms = ? WHERE node_id = ?", (since_ms, node_id))

    async def acquire_lease(self, name: str, holder: int, ttl_ms: int, now_ms: int) -> bool:
        # One statement (see `_write1`): taken if free, expired, already ours, or its
        # holder's node lease ended.
        changed = await self._write1(
            "INSERT INTO leases (name, holder, expires_ms) VALUES (?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, "
            "expires_ms = excluded.expires_ms "
            "WHERE leases.holder = excluded.holder OR leases.expires_ms <= ? "
            "OR EXISTS (SELECT 1 FROM nodes WHERE nodes.node_id = leases.holder "
            "AND nodes.lease_expires_ms <= ?)",
            (name, holder, now_ms + ttl_ms, now_ms, now_ms),
        )
        return changed == 1

    # -- cluster-wide values ------------------------------------------------
    async def get_cluster_configs(self) -> dict[str, dict[str, str]]:
        def fn(db: sqlite3.Connection) -> dict[str, dict[str, str]]:
            out: dict[str, dict[str, str]] = {}
            for scope, name, value in db.execute("SELECT scope, name, value FROM cluster_configs"):
                out.setdefault(scope, {})[name] = value
            return out

        return await self._read(fn)

    async def set_cluster_configs(
        self, scope: str, changes: dict[str, str | None]
    ) -> dict[str, str]:
        def fn(db: sqlite3.Connection) -> dict[str, str]:
            put_values(db, "cluster_configs", "scope", scope, changes)
            _bump_version(db)
            rows = db.execute(
                "SELECT name, value FROM cluster_configs WHERE scope = ?", (scope,)
            ).fetchall()
            return dict(rows)

        return await self._run(fn)

    async def cluster_secret(self, name: str) -> str:
        def fn(db: sqlite3.Connection) -> str:
            # Whoever asks first makes it; everyone reads the one that was kept.
            db.execute(
                "INSERT OR IGNORE INTO cluster_secrets (name, value) VALUES (?, ?)",
                (name, secrets.token_hex(32)),
            )
            (value,) = db.execute(
                "SELECT value FROM cluster_secrets WHERE name = ?", (name,)
            ).fetchone()
            return str(value)

        return await self._run(fn)

    async def allocate_producer_id(self) -> int:
        def fn(db: sqlite3.Connection) -> int:
            db.execute(
                "INSERT INTO counters (name, value) VALUES ('producer_id', 1000) "
                "ON CONFLICT(name) DO UPDATE SET value = value + 1"
            )
            value: int = db.execute(
                "SELECT value FROM counters WHERE name = 'producer_id'"
            ).fetchone()[0]
            return value

        return await self._run(fn)

    async def allocate_producer_ids(self, count: int) -> int:
        def fn(db: sqlite3.Connection) -> int:
            # The counter holds the last id handed out; the first ever is 1000, as for
            # `allocate_producer_id`, whose ids these never repeat.
            db.execute(
                "INSERT INTO counters (name, value) VALUES ('producer_id', 999 + ?) "
                "ON CONFLICT(name) DO UPDATE SET value = value + ?",
                (count, count),
            )
            value: int = db.execute(
                "SELECT value FROM counters WHERE name = 'producer_id'"
            ).fetchone()[0]
            return value - count + 1

        return await self._run(fn)


def _move(db: sqlite3.Connection, moves: Sequence[tuple[int, int]]) -> None:
    """Sets each (stream id, leader), bumping its epoch and recording where it starts."""
    db.executemany(
        "UPDATE partitions SET leader_node = ?, leader_epoch = leader_epoch + 1 "
        "WHERE stream_id = ?",
        [(node, sid) for sid, node in moves],
    )
    # Commits are fenced by epoch in their own transactions, so the next offset
    # now is the first the new epoch can write.
    db.executemany(
        "INSERT OR REPLACE INTO leader_epochs (stream_id, leader_epoch, start_offset) "
        "SELECT stream_id, leader_epoch, next_offset FROM partitions WHERE stream_id = ?",
        [(sid,) for sid, _ in moves],
    )


def _bump_version(db: sqlite3.Connection) -> None:
    """Every change to topics, partitions or leaders bumps one counter nodes poll cheaply."""
    db.execute(
        "INSERT INTO counters (name, value) VALUES ('metadata_version', 1) "
        "ON CONFLICT(name) DO UPDATE SET value = value + 1"
    )
