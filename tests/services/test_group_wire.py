"""Group calls passed between nodes come back equal, and a payload can build nothing else."""

from __future__ import annotations

import json
import uuid

import pytest
from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import JoinRequest, JoinResult, SyncResult
from zonegate.coordinator.consumer_group import HeartbeatRequest, HeartbeatResult
from zonegate.coordinator.describe import ConsumerGroupDescription, ConsumerMemberDescription
from zonegate.coordinator.service import OffsetToCommit
from zonegate.services.group_wire import (
    BadPayload,
    decode_call,
    decode_result,
    encode_call,
    encode_result,
)

pytestmark = pytest.mark.unit

T = uuid.UUID("11111111-2222-3333-4444-555555555555")


@pytest.mark.parametrize(
    "value",
    [
        JoinResult(
            ErrorCode.none, "m", 3, "consumer", "range", "m", False, (("m", None, b"\x00"),)
        ),
        SyncResult(ErrorCode.rebalance_in_progress, None, None, b""),
        HeartbeatResult(ErrorCode.none, None, "m", 7, 5000, {T: frozenset({0, 2})}),
        (ErrorCode.none, [ErrorCode.unknown_member_id, ErrorCode.none]),
        [OffsetToCommit("t", 0, 42, -1, None, -1)],
        ConsumerGroupDescription(
            "g",
            ErrorCode.none,
            None,
            "Stable",
            4,
            4,
            "uniform",
            (
                ConsumerMemberDescription(
                    "m", None, None, 4, "c", "/h", ("t",), None, ((T, "t", (0, 1)),), ()
                ),
            ),
        ),
        None,
        ErrorCode.not_coordinator,
    ],
)
def test_results_round_trip(value: object) -> None:
    assert decode_result(encode_result(value)) == value


def test_calls_round_trip() -> None:
    join = JoinRequest("", None, "c", "/h", 10_000, 30_000, "consumer", [("range", b"\x01")], True)
    assert decode_call(encode_call("join", ("g", join), {})) == ("join", ["g", join], {})
    sync = encode_call("sync", ("g",), {"member_id": "m", "assignments": {"m": b"\x02"}})
    assert decode_call(sync) == ("sync", ["g"], {"member_id": "m", "assignments": {"m": b"\x02"}})
    hb = HeartbeatRequest("m", 0, owned=((T, (0, 1)),))
    assert decode_call(encode_call("consumer_heartbeat", ("g", hb), {}))[1] == ["g", hb]


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        json.dumps({"$c": "Popen", "f": {"args": "rm -rf /"}}).encode(),
        json.dumps({"m": "join", "a": [{"$c": "os.system", "f": {}}], "k": {"$d": []}}).encode(),
        json.dumps({"m": 1, "a": [], "k": {"$d": []}}).encode(),
        json.dumps({"weird": 1, "x": 2, "y": 3}).encode(),
    ],
)
def test_anything_else_is_refused(payload: bytes) -> None:
    with pytest.raises(BadPayload):
        decode_call(payload)
