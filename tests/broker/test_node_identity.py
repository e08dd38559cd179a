"""Never two processes as one node, and a clean restart keeps partitions where they were.

Real `zonegate` processes: a second one on a data directory in use, or with the
id of a live node, is refused with one line; a node killed -9 restarts at once
on its own data directory; a zombie (paused past its lease, replaced, then
resumed) stops instead of serving as the node it was.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster_harness import ClusterNode, wait_until
from tests.node_harness import start_node

pytestmark = pytest.mark.integration


def _zonegate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zonegate", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def _node(tmp_path: Path, node_id: int, data: str, *extra: str) -> ClusterNode:
    args = [
        "--listen", "127.0.0.1:0", "--http-port", "0", "--node-id", str(node_id),
        "--data-dir", str(tmp_path / data), "--metastore", f"sqlite:///{tmp_path / 'meta.db'}",
        "--object-store", (tmp_path / "objects").resolve().as_uri(), "--lease-ms", "3000",
        *extra,
    ]  # fmt: skip
    return ClusterNode(node_id, "zone-a", args, tmp_path / f"{data}.log")


def test_a_second_serve_on_a_data_directory_in_use_is_refused(tmp_path: Path) -> None:
    first = start_node(tmp_path / "data")
    try:
        done = _zonegate("serve", "--listen", "127.0.0.1:0", "--data-dir", "data", cwd=tmp_path)
        assert done.returncode == 2
        assert done.stdout == ""
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("zonegate serve: the data directory data/node-1 is in use")
        assert f"(pid {first.proc.pid if first.proc else 0})" in line
        assert first.alive()
        assert "UNIQUE constraint" not in first.log_text()
    finally:
        first.stop()


def test_a_node_id_that_is_alive_is_refused_and_a_killed_one_restarts_at_once(
    tmp_path: Path,
) -> None:
    first = _node(tmp_path, 4, "one")
    first.start()
    done = subprocess.run(
        [sys.executable, "-m", "zonegate", "node", *_node(tmp_path, 4, "two").args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("zonegate node: node 4 is alive: another process runs as it")
    assert f":{first.port} in zone zone-a" in line
    assert first.alive()

    # Killed -9, its lease still running: restarted on its own data directory, it knows
    # the lease is its dead predecessor's and starts at once.
    first.kill9()
    again = _node(tmp_path, 4, "one")
    again.start()
    try:
        assert again.alive()
    finally:
        again.stop()


def test_a_zombie_that_lost_its_lease_stops(tmp_path: Path) -> None:
    zombie = _node(tmp_path, 5, "old")
    zombie.start()
    assert zombie.proc is not None
    os.kill(zombie.proc.pid, signal.SIGSTOP)  # a pause longer than its lease
    try:
        time.sleep(3.5)
        successor = _node(tmp_path, 5, "new")
        successor.start()
    finally:
        os.kill(zombie.proc.pid, signal.SIGCONT)
    try:
        assert zombie.proc.wait(30) == 1
        log = zombie.log_path.read_text()
        assert "another process now holds this node's lease" in log
        assert successor.alive()
        assert "another process now holds" not in successor.log_path.read_text()
    finally:
        successor.stop()


def test_a_clean_restart_of_serve_keeps_partitions_on_their_nodes(tmp_path: Path) -> None:
    node = start_node(tmp_path / "data")
    try:
        time.sleep(1)  # every node has seen the others' leases (a heartbeat)
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=6)])["t"].result(30)

        def layout() -> list[int]:
            md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics("t", timeout=30)
            return [md.topics["t"].partitions[p].leader for p in range(6)]

        # Zone routing answers with nodes of the client's zone; the real leaders are in
        # the store, read here through the SQLite file the three nodes share.
        def leaders() -> list[tuple[int, int]]:
            db = sqlite3.connect(tmp_path / "data" / "meta.db")
            try:
                return db.execute(
                    "SELECT partition, leader_node FROM partitions ORDER BY partition"
                ).fetchall()
            finally:
                db.close()

        before = leaders()
        assert len({n for _, n in before}) == 3, before
        assert node.stop() == 0
        node.restart()
        assert wait_until(lambda: len(layout()) == 6)
        time.sleep(7)  # past the controller's first lease (6 s): it would have moved by now
        assert leaders() == before
        assert "moved" not in node.log_text()
    finally:
        node.stop()
