"""TxnOffsetCommit at the group's coordinator (coordinator/service.py, routed by
services/groups.py): offsets pending in the producer's transaction, invisible to
OffsetFetch until the transaction's commit moves them into the group's (the role's
`complete_txn_offsets`), dropped by an abort; Kafka 4's checks of the group. Two nodes'
group services over one SQLite metadata store (a temp file), linked in process."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.services.test_groups import GROUP, Cluster, _committed, _offset, run
from zonegate.runtime.clock import ManualClock
from zonegate.transactions.states import shard_for

pytestmark = pytest.mark.unit

E = ErrorCode
PID = 4000
PART = shard_for(GROUP, 50)  # the group's partition of __consumer_offsets


def test_offsets_committed_in_a_transaction_count_only_once_it_commits(tmp_path: Path) -> None:
    async def body(c: Cluster, clock: ManualClock) -> None:
        meta = c.coordinators[1].meta
        # An unknown group and no generation: a simple group, as Kafka makes it.
        errors = await c.nodes[1].txn_commit_offsets(
            GROUP, PID, PART, -1, "", None, [_offset(0, 7), _offset(5, 1)]
        )
        assert errors == [E.none, E.unknown_topic_or_partition]
        assert c.links[2].calls == 1, "served by the group's coordinator"
        assert await _committed(c.nodes[1]) == []
        assert await meta.pending_offsets(GROUP) == [("t", 0)]
        await meta.complete_txn_offsets(PART, PID, commit=True)
        assert await _committed(c.nodes[1]) == [(0, 7)]
        assert await meta.pending_offsets(GROUP) == []
        # Aborted: never the group's.
        await c.nodes[1].txn_commit_offsets(GROUP, PID, PART, -1, "", None, [_offset(0, 9)])
        await meta.complete_txn_offsets(PART, PID, commit=False)
        assert await _committed(c.nodes[2]) == [(0, 7)]

    run(tmp_path, body)


def test_an_unknown_group_with_a_generation_is_illegal_generation(tmp_path: Path) -> None:
    async def body(c: Cluster, clock: ManualClock) -> None:
        errors = await c.nodes[2].txn_commit_offsets(
            "nobody-knows", PID, 0, 3, "m-1", None, [_offset(0, 1)]
        )
        assert errors == [E.illegal_generation]

    run(tmp_path, body)
