"""What the leader keeps of its partitions' state when the catalog moves them."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import pytest

from zonegate.leader_forwarder.moves import forget_moved
from zonegate.metastore.models import PartitionInfo

pytestmark = pytest.mark.unit
ME = 1


class States:
    def __init__(self) -> None:
        self.forgotten: list[int] = []
        self.kept_if_at: dict[int, int] = {}

    def forget(self, stream_ids: Iterable[int]) -> None:
        self.forgotten += stream_ids

    def forget_unless_at(self, epochs: Mapping[int, int]) -> None:
        self.kept_if_at.update(epochs)


def _p(stream_id: int, leader: int, epoch: int) -> PartitionInfo:
    return PartitionInfo(uuid.UUID(int=1), "t", stream_id, stream_id, leader, epoch)


def test_state_of_partitions_gone_moved_or_at_a_new_epoch_is_dropped() -> None:
    before = {
        1: _p(1, ME, 3),  # deleted
        2: _p(2, ME, 3),  # moved to node 2
        3: _p(3, 2, 3),  # moved here, at epoch 4
        4: _p(4, 2, 3),  # still on node 2, at a new epoch
        5: _p(5, ME, 3),  # unchanged
        6: _p(6, 2, 3),  # unchanged, elsewhere
    }
    now = {2: _p(2, 2, 4), 3: _p(3, ME, 4), 4: _p(4, 2, 5), 5: _p(5, ME, 3), 6: _p(6, 2, 3)}
    states = States()
    forget_moved(states, ME, now.get)(before)
    assert sorted(states.forgotten) == [1, 2, 4]
    assert states.kept_if_at == {3: 4}
