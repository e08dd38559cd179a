"""Any API's answer carrying one error code, as Kafka's `AbstractRequest.getErrorResponse`.

Kafka answers some requests it refuses without serving them, such as a request
other than SaslAuthenticate between SaslHandshake and SaslAuthenticate (its
SaslServerAuthenticator answers ILLEGAL_SASL_STATE, then closes). Its
per-request `getErrorResponse` puts the error in the answer's top-level
`error_code` where the API has one, and otherwise in one entry per item the
request named (Metadata: one topic per topic asked for). This does the same
for every API and version zonegate decodes, from the response's schema: the
top-level `error_code`, and each top-level list the request has under the same
name mirrored by its items' `name` (and `topic_id`), each with the error; the
other fields at their defaults, or zero, empty or null.
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
_MIRRORED = ("name", "topic_id")


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


def _entity(cls: type[Any], code: ErrorCode, source: Any = None) -> Any:
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        mirrored = getattr(source, field.name, None) if field.name in _MIRRORED else None
        # a topic asked for by id has no name; the answer's may not be null (Kafka: "")
        if mirrored is not None:
            values[field.name] = mirrored
        else:
            values[field.name] = _zero(field, hints[field.name], code)
    return cls(**values)


def error_answer(api_key: int, api_version: int, request: Any, error_code: int) -> ResponsePayload:
    """The answer to `request` (its decoded body) with `error_code` in it."""
    cls = response_type(api_key, api_version)
    code = ErrorCode(error_code)
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        item = _entity_of(hint)
        asked = getattr(request, field.name, None)
        if item is not None and isinstance(asked, tuple) and "error_code" in _hints(item):
            values[field.name] = tuple(_entity(item, code, one) for one in asked)
        else:
            values[field.name] = _zero(field, hint, code)
    answer: ResponsePayload = cls(**values)
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
    answer = error_answer(header.api_key, header.api_version, request.body, error_code)
    return encode_response(header.correlation_id, header.api_key, answer)
