"""The group calls one node passes to another, as JSON: a method name and its arguments.

Only the dataclasses listed in `TYPES` (or the `types` a caller passes: the
transaction calls', services/txn_routing.py) can be built from a payload, so a peer
can name nothing else; bytes, UUIDs, error codes, tuples, sets and dicts are
tagged so that what is decoded equals what was encoded.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import JoinRequest, JoinResult, SyncResult
from zonegate.coordinator.consumer_group import HeartbeatRequest, HeartbeatResult
from zonegate.coordinator.describe import (
    ClassicGroupDescription,
    ClassicMemberDescription,
    ConsumerGroupDescription,
    ConsumerMemberDescription,
)
from zonegate.coordinator.service import GroupSummary, OffsetToCommit
from zonegate.metastore.models import CommittedOffset

TYPES: dict[str, type[Any]] = {
    t.__name__: t
    for t in (
        JoinRequest,
        JoinResult,
        SyncResult,
        HeartbeatRequest,
        HeartbeatResult,
        OffsetToCommit,
        GroupSummary,
        CommittedOffset,
        ClassicGroupDescription,
        ClassicMemberDescription,
        ConsumerGroupDescription,
        ConsumerMemberDescription,
    )
}


class BadPayload(ValueError):
    """A payload that is not what this module writes."""


def _to(value: Any, types: Mapping[str, type[Any]] = TYPES) -> Any:
    if value is None or isinstance(value, bool | str | float):
        return value
    if isinstance(value, ErrorCode):
        return {"$e": int(value)}
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode()}
    if isinstance(value, uuid.UUID):
        return {"$u": str(value)}
    if isinstance(value, tuple):
        return {"$t": [_to(v, types) for v in value]}
    if isinstance(value, list):
        return [_to(v, types) for v in value]
    if isinstance(value, frozenset | set):
        return {"$s": [_to(v, types) for v in sorted(value, key=repr)]}
    if isinstance(value, dict):
        return {"$d": [[_to(k, types), _to(v, types)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and type(value).__name__ in types:
        return {
            "$c": type(value).__name__,
            "f": {f.name: _to(getattr(value, f.name), types) for f in dataclasses.fields(value)},
        }
    raise TypeError(f"cannot pass a {type(value).__name__} between nodes")


def _from(obj: Any, types: Mapping[str, type[Any]] = TYPES) -> Any:
    if obj is None or isinstance(obj, bool | int | str | float):
        return obj
    if isinstance(obj, list):
        return [_from(v, types) for v in obj]
    if not isinstance(obj, dict) or len(obj) not in (1, 2):
        raise BadPayload(f"unexpected {type(obj).__name__}")
    if "$e" in obj:
        return ErrorCode(obj["$e"])
    if "$b" in obj:
        return base64.b64decode(obj["$b"], validate=True)
    if "$u" in obj:
        return uuid.UUID(obj["$u"])
    if "$t" in obj:
        return tuple(_from(v, types) for v in obj["$t"])
    if "$s" in obj:
        return frozenset(_from(v, types) for v in obj["$s"])
    if "$d" in obj:
        return {_from(k, types): _from(v, types) for k, v in obj["$d"]}
    if "$c" in obj:
        cls = types.get(obj["$c"])
        if cls is None:
            raise BadPayload(f"type {obj['$c']!r} cannot be passed between nodes")
        return cls(**{k: _from(v, types) for k, v in obj["f"].items()})
    raise BadPayload(f"unexpected object {sorted(obj)}")


def encode_call(
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    types: Mapping[str, type[Any]] = TYPES,
) -> bytes:
    return json.dumps(
        {"m": method, "a": [_to(a, types) for a in args], "k": _to(kwargs, types)}
    ).encode()


def decode_call(
    payload: bytes, types: Mapping[str, type[Any]] = TYPES
) -> tuple[str, list[Any], dict[str, Any]]:
    try:
        obj = json.loads(payload)
        kwargs = _from(obj["k"], types)
        if not isinstance(kwargs, dict) or not isinstance(obj["m"], str):
            raise BadPayload("not a call")
        return obj["m"], [_from(a, types) for a in obj["a"]], kwargs
    except (ValueError, KeyError, TypeError) as exc:
        raise BadPayload(f"bad call: {exc}") from None


def encode_result(value: Any, types: Mapping[str, type[Any]] = TYPES) -> bytes:
    return json.dumps(_to(value, types)).encode()


def decode_result(payload: bytes, types: Mapping[str, type[Any]] = TYPES) -> Any:
    try:
        return _from(json.loads(payload), types)
    except (ValueError, KeyError, TypeError) as exc:
        raise BadPayload(f"bad answer: {exc}") from None
