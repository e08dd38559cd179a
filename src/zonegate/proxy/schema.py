"""Builds version-specific kio messages from one superset of fields.

kio has one dataclass per (API, version, entity). Handlers describe an answer
once, with every field any version has; `make` drops the fields the chosen
version lacks, so one handler serves its whole version range.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from types import ModuleType
from typing import Any, TypeVar

from kio.index import load_payload_module
from kio.static.constants import EntityType

from zonegate.proxy.legacy_schema import payload_module

T = TypeVar("T")


_FIELDS: dict[type[Any], frozenset[str]] = {}


def _field_names(cls: type[Any]) -> frozenset[str]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def make(cls: type[T], **kwargs: Any) -> T:
    names = _field_names(cls)
    return cls(**{k: v for k, v in kwargs.items() if k in names})


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    """kio's module of the response, or ours for a version Kafka 4 removed."""
    legacy = payload_module(api_key, version)
    if legacy is not None:
        return legacy
    return load_payload_module(api_key, version, EntityType.response)


def response_class(api_key: int, version: int, name: str) -> type[Any]:
    cls: type[Any] = getattr(response_module(api_key, version), name)
    return cls
