"""Fixtures for end-to-end tests: real nodes in subprocesses, always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.e2e.group_harness import Members
from tests.node_harness import RunningNode, start_node

NodeFactory = Callable[..., RunningNode]


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


@pytest.fixture
def node(node_factory: NodeFactory) -> RunningNode:
    return node_factory()


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    """Consumer-group members in their own processes (tests/e2e/group_worker.py)."""
    m = Members(tmp_path)
    yield m
    m.close()
