"""Any API's answer carrying one error code, as Kafka's `AbstractRequest.getErrorResponse`.

Kafka answers some requests it refuses without serving them, such as a request
other than SaslAuthenticate between SaslHandshake and SaslAuthenticate (its
SaslServerAuthenticator answers ILLEGAL_SASL_STATE, then closes). Its
per-request `getErrorResponse` puts the error in the answer's top-level
`error_code` where the API has one, and otherwise in one entry per item the
request named (Metadata: one topic per topic asked for; Produce: one per
partition, none at all for acks=0). This does the same for every API and
version zonegate decodes, from the response's schema: every `error_code`, and
each list the request has under the same name (Produce's under its own) mirrored
by its items' `name`, `topic_id` and `index`; the other fields at their
defaults, -1 for offsets and leaders, or zero, empty or null.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from types import NoneType, UnionType
from typing import Any

from kio.index import KioIndexError
from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from zonegate.proxy.codec import decode_request, encode_response, peek_header, response_type
from zonegate.proxy.errors import PeerProtocolError

# The fields an item of a mirrored list keeps from the request's item.
_MIRRORED = ("name", "topic_id", "index")
_PRODUCE = 0
# A response list mirrored from a request list of another name (Produce's).
_ASKED_AS = {"responses": "topic_data", "partition_responses": "partition_data"}
# Offsets, times and ids not known: -1, as Kafka's error answers have them.
_UNKNOWN = frozenset(
    {"base_offset", "log_append_time", "log_start_offset", "leader_id", "leader_epoch"}
)


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _entity_of(hint: Any) -> type[Any] | None:
    """The item type of a `tuple[Entity, ...]` field, or None for other fields."""
    if typing.get_origin(hint) is not tuple:
        return None
    args = typing.get_args(hint)
    if args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
        return args[0]
    return None


def _zero(field: dataclasses.Field[Any], hint: Any, code: ErrorCode) -> Any:
    """A value for a field the answer must carry and the request says nothing about."""
    if field.metadata.get("kafka_type") == "error_code":
        return code
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    origin = typing.get_origin(hint)
    if origin is tuple:
        return ()
    if (origin is UnionType or origin is typing.Union) and NoneType in typing.get_args(hint):
        return None
    if hint is bool:
        return False
    if hint is bytes:
        return b""
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return datetime.timedelta(0)
    if isinstance(hint, type) and issubclass(hint, str):
        return hint("")
    if isinstance(hint, type) and issubclass(hint, int):
        return hint(0)
    raise TypeError(f"no zero value for {field.name}: {hint}")  # a schema kio added since


def _build(cls: type[Any], code: ErrorCode, source: Any) -> Any:
    """`cls` filled for `source` (the request, or one of its items): its lists mirrored
    from the request's lists of the same meaning, their items' names and indexes kept."""
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        item = _entity_of(hint)
        asked = getattr(source, _ASKED_AS.get(field.name, field.name), None)
        mirrored = getattr(source, field.name, None) if field.name in _MIRRORED else None
        if item is not None and isinstance(asked, tuple):
            values[field.name] = tuple(_build(item, code, one) for one in asked)
        elif mirrored is not None:
            # a topic asked for by id has no name: the answer's stays at its zero ("")
            values[field.name] = mirrored
        elif field.name in _UNKNOWN and field.default is dataclasses.MISSING:
            values[field.name] = hint(-1)
        else:
            values[field.name] = _zero(field, hint, code)
    return cls(**values)


def error_answer(api_key: int, api_version: int, request: Any, error_code: int) -> ResponsePayload:
    """The answer to `request` (its decoded body) with `error_code` in it."""
    answer: ResponsePayload = _build(
        response_type(api_key, api_version), ErrorCode(error_code), request
    )
    return answer


def refusal_answer(frame: bytes, error_code: int) -> bytes | None:
    """The whole answer frame to a refused request `frame`, or None when the request
    cannot be read (an API or version without a schema, a malformed body): the
    connection then closes unanswered, as Kafka closes on a request it cannot parse."""
    header, body_offset = peek_header(frame)
    try:
        request = decode_request(frame, header, body_offset)
    except (KioIndexError, PeerProtocolError):
        return None
    if header.api_key == _PRODUCE and getattr(request.body, "acks", None) == 0:
        return None  # ProduceRequest.getErrorResponse: no answer is wanted
    answer = error_answer(header.api_key, header.api_version, request.body, error_code)
    return encode_response(header.correlation_id, header.api_key, answer)
