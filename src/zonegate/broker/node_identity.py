"""Never two processes as one node: the data directory's lock and the node's incarnation.

Two guards, each a refusal at start in one line:

- The data directory is locked (`flock` on DATA_DIR/.lock, held for the
  process's life and let go by the kernel when it dies, kill -9 included). A
  second process on the same directory is refused, naming the first's pid.
- The node id is claimed in the metadata store under a new random incarnation
  (metastore/api.py `register_node`): while another process holds the node's
  live lease, the claim is refused, naming where that process serves. One
  exception: the incarnation recorded in this data directory by the previous
  process on it. That process is dead (we hold its lock), so its lease, still
  running after a kill -9, is ended at once instead of waited out.

Once claimed, the new incarnation bumps the leader epoch of every partition the
node leads (a move to itself), so a zombie of an earlier incarnation, still
holding those partitions in memory, can commit nothing more.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from pathlib import Path

from zonegate.broker.startup import StartupError
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import NodeRecord

_LOCK = ".lock"
_INCARNATION = "incarnation"


def new_incarnation() -> int:
    """Random, so two starts (on two machines at one millisecond) never share one."""
    return secrets.randbits(62) | 1  # never 0, the value rows of older releases carry


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir
        self._fd: int | None = None

    def acquire(self) -> None:
        path = self._dir / _LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StartupError(
                f"the data directory {self._dir} is in use by another zonegate process "
                f"(pid {holder}): stop it, or give this one another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing lets the lock go
            self._fd = None

    def previous_incarnation(self) -> int | None:
        try:
            return int((self._dir / _INCARNATION).read_text().strip())
        except (OSError, ValueError):
            return None

    def record_incarnation(self, incarnation: int) -> None:
        tmp = self._dir / f"{_INCARNATION}.tmp"
        tmp.write_text(f"{incarnation}\n")
        tmp.replace(self._dir / _INCARNATION)


async def claim_node(
    meta: MetaStore, me: NodeRecord, lease_ms: int, now_ms: int, previous: int | None
) -> None:
    """Takes node `me.node_id` for incarnation `me.incarnation`, or raises StartupError."""
    if await meta.register_node(me, lease_ms, now_ms):
        return
    holder = next((n for n in await meta.list_nodes() if n.node_id == me.node_id), None)
    if holder is not None and previous is not None and holder.incarnation == previous:
        # The last process on this data directory, dead since we hold its lock.
        await meta.expire_node(me.node_id, previous)
        if await meta.register_node(me, lease_ms, now_ms):
            return
        holder = next((n for n in await meta.list_nodes() if n.node_id == me.node_id), None)
    where = (
        f"serving Kafka on {holder.kafka_host}:{holder.kafka_port} in zone {holder.zone}, "
        f"its lease running {max(holder.lease_expires_ms - now_ms, 0)} ms more"
        if holder is not None
        else "just claimed it"
    )
    raise StartupError(
        f"node {me.node_id} is alive: another process runs as it ({where}); stop it, or "
        "give this one another --node-id"
    )


async def fence_earlier_incarnations(meta: MetaStore, node_id: int) -> int:
    """Bumps the leader epoch of every partition `node_id` leads; returns how many."""
    mine = [
        p.stream_id
        for t in await meta.list_topics()
        for p in t.partitions
        if p.leader_node == node_id
    ]
    if mine:
        await meta.move_partitions([(sid, node_id) for sid in mine])
    return len(mine)
