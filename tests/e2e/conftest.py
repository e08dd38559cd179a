"""Fixtures for end-to-end tests: real nodes in subprocesses, always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.e2e.group_harness import Members
from tests.inprocess import InProcessNode, start_inprocess_node
from tests.node_harness import RunningNode, start_node

NodeFactory = Callable[..., RunningNode]
InProcessFactory = Callable[..., InProcessNode]


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[NodeFactory]:
    started: list[RunningNode] = []

    def make(
        args: Sequence[str] = (), env: dict[str, str] | None = None, name: str = "node"
    ) -> RunningNode:
        n = start_node(tmp_path / name, args, env)
        started.append(n)
        return n

    yield make
    for n in started:
        if n.alive():
            n.stop()


@pytest.fixture(scope="session")
def session_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    """One `zonegate serve` process shared by every test that asks for it in a session
    (the Java client and tools tests: a JVM per call is slow enough without a node per
    test); such tests name their topics and groups uniquely. A new group's first
    assignment is not held 3 s for more members (group.initial.rebalance.delay.ms 0, as
    tests/apache_kafka.py's broker): these tests' groups start with their one member."""
    n = start_node(
        tmp_path_factory.mktemp("session-node"), ["--group-initial-rebalance-delay-ms", "0"]
    )
    try:
        yield n
    finally:
        if n.alive():
            n.stop()


@pytest.fixture
def inprocess_factory(tmp_path: Path) -> Iterator[InProcessFactory]:
    """Nodes in the test's own process (tests/inprocess.py): for tests that never kill
    or restart their node, which is most; no interpreter to start for each."""
    started: list[InProcessNode] = []

    def make(args: Sequence[str] = (), name: str = "inproc") -> InProcessNode:
        n = start_inprocess_node(tmp_path / name, args)
        started.append(n)
        return n

    yield make
    for n in started:
        n.stop()


@pytest.fixture
def node(inprocess_factory: InProcessFactory) -> InProcessNode:
    return inprocess_factory()


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    """Consumer-group members in their own processes (tests/e2e/group_worker.py)."""
    m = Members(tmp_path)
    yield m
    m.close()
