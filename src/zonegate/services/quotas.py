"""Kafka's client quotas on a node: AlterClientQuotas / DescribeClientQuotas against the
metadata store, and the rates and throttle times of its clients (qos/client_quotas.py).

Quotas are kept in the metadata store, so they outlive restarts and every node
applies the same; each node reads them again every `refresh_s` and on every
change it makes itself. Rates are per node, as Kafka's are per broker: a client
spread over several nodes gets the quota on each (the same as Kafka).

Validation is Kafka's (KRaft's ClientQuotaControlManager and ClientQuotasImage):
entity types `user` and `client-id`, alone or together, each a name or the
default; an empty name, a type named twice, an unknown type, an unknown key, a
value <= 0 or a fractional value of an integral key are INVALID_REQUEST with
Kafka's message. `ip` entities (connection_creation_rate) are not implemented
and are refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.metastore.api import QuotaStore
from zonegate.metastore.models import QuotaEntity
from zonegate.qos.client_quotas import (
    CLIENT_ID,
    IP,
    QUOTA_KEYS,
    USER,
    QuotaManager,
    QuotaWindow,
)
from zonegate.runtime.clock import Clock

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class QuotaRequestError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True, slots=True)
class QuotaChange:
    key: str
    value: float
    remove: bool


def user_of(principal: str) -> str:
    """The quota user of a principal ("User:alice" -> "alice"), as Kafka's quotas name it."""
    return principal.split(":", 1)[1] if ":" in principal else principal


def check_entity(parts: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    """A validated entity, or QuotaRequestError with Kafka's message."""
    seen: dict[str, str | None] = {}
    if not parts:
        raise QuotaRequestError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    for kind, name in parts:
        if kind in seen:
            raise QuotaRequestError(
                ErrorCode.invalid_request,
                f"Invalid client quota entity, duplicate entity entry {kind}",
            )
        if kind == IP:
            raise QuotaRequestError(
                ErrorCode.invalid_request,
                "ip quotas (connection_creation_rate) are not supported by zonegate; "
                "set max.connections.per.ip on the node instead",
            )
        if kind not in (USER, CLIENT_ID):
            raise QuotaRequestError(
                ErrorCode.invalid_request, f"Unhandled client quota entity type: {kind}"
            )
        if name is not None and name == "":
            raise QuotaRequestError(ErrorCode.invalid_request, f"Empty {kind} not supported")
        seen[kind] = name
    return tuple(sorted(seen.items()))


def check_value(key: str, value: float) -> None:
    kind = QUOTA_KEYS.get(key)
    if kind is None:
        raise QuotaRequestError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
    if value <= 0.0:
        raise QuotaRequestError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
    if not math.isfinite(value):  # Kafka stores NaN and infinity as they come; we refuse them
        raise QuotaRequestError(ErrorCode.invalid_request, f"Quota {key} must be a finite number")
    if kind == "long":
        if value > 2**63 - 1:
            raise QuotaRequestError(
                ErrorCode.invalid_request, f"Proposed value for {key} is too large for a LONG."
            )
        if abs(value % 1.0) > 1e-6:
            raise QuotaRequestError(
                ErrorCode.invalid_request, f"{key} cannot be a fractional value."
            )


def matching(
    quotas: dict[QuotaEntity, dict[str, float]], filters: Sequence[QuotaFilter], strict: bool
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """ClientQuotasImage.describe: the entities the filter matches, or QuotaRequestError."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for f in filters:
        if not f.entity_type:
            raise QuotaRequestError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if f.entity_type in exact or f.entity_type in specified:
            raise QuotaRequestError(
                ErrorCode.invalid_request,
                f"Entity type {f.entity_type} cannot appear more than once in the filter.",
            )
        if f.entity_type not in (IP, USER, CLIENT_ID):
            raise QuotaRequestError(
                ErrorCode.unsupported_version, f"Unsupported entity type {f.entity_type}"
            )
        if f.match_type == MATCH_EXACT:
            if f.match is None:
                raise QuotaRequestError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[f.entity_type] = f.match
        elif f.match_type == MATCH_DEFAULT:
            if f.match is not None:
                raise QuotaRequestError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[f.entity_type] = None
        elif f.match_type == MATCH_SPECIFIED:
            if f.match is not None:
                raise QuotaRequestError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            specified.add(f.entity_type)
        else:
            raise QuotaRequestError(ErrorCode.invalid_request, f"Unknown match type {f.match_type}")
    if (IP in exact or IP in specified) and (exact.keys() | specified) - {IP}:
        raise QuotaRequestError(
            ErrorCode.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    out = []
    for ent, values in sorted(quotas.items(), key=lambda kv: repr(kv[0])):
        parts = dict(ent)
        if strict and len(parts) != len(exact) + len(specified):
            continue
        if any(t not in parts or parts[t] != name for t, name in exact.items()):
            continue
        if any(t not in parts for t in specified):
            continue
        out.append((ent, dict(values)))
    return out


class QuotaService:
    def __init__(self, store: QuotaStore, clock: Clock, window: QuotaWindow) -> None:
        self._store = store
        self._clock = clock
        self.window = window
        self.produce = QuotaManager("producer_byte_rate", window)
        self.fetch = QuotaManager("consumer_byte_rate", window)
        self.request = QuotaManager("request_percentage", window)
        self.mutation = QuotaManager("controller_mutation_rate", window)
        self._managers = (self.produce, self.fetch, self.request, self.mutation)

    async def refresh(self) -> None:
        quotas = await self._store.client_quotas()
        for m in self._managers:
            m.update(quotas)

    # -- the admin APIs -----------------------------------------------------------------
    async def describe(
        self, filters: Sequence[QuotaFilter], strict: bool
    ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        return matching(await self._store.client_quotas(), filters, strict)

    async def alter(
        self,
        entries: Sequence[tuple[Sequence[tuple[str, str | None]], Sequence[QuotaChange]]],
        validate_only: bool,
    ) -> list[tuple[ErrorCode, str | None]]:
        results: list[tuple[ErrorCode, str | None]] = []
        changes: list[tuple[QuotaEntity, dict[str, float | None]]] = []
        seen: set[QuotaEntity] = set()
        for parts, ops in entries:
            try:
                ent = check_entity(parts)
                if ent in seen:
                    raise QuotaRequestError(
                        ErrorCode.invalid_request, "Entity named twice in one request"
                    )
                seen.add(ent)
                values: dict[str, float | None] = {}
                for op in ops:
                    if op.key in values:
                        raise QuotaRequestError(
                            ErrorCode.invalid_request, f"Duplicate quota key {op.key}"
                        )
                    if op.remove:
                        if op.key not in QUOTA_KEYS:
                            raise QuotaRequestError(
                                ErrorCode.invalid_request, f"Invalid configuration key {op.key}"
                            )
                        values[op.key] = None
                    else:
                        check_value(op.key, op.value)
                        values[op.key] = float(op.value)
            except QuotaRequestError as exc:
                results.append((exc.code, str(exc)))
                continue
            results.append((ErrorCode.none, None))
            changes.append((ent, values))
        if changes and not validate_only:
            await self._store.alter_client_quotas(changes)
            await self.refresh()
        return results

    # -- rates ----------------------------------------------------------------------------
    def applies(self, principal: str, client_id: str) -> bool:
        """Whether any quota applies to the client (then the listener handles its
        requests one at a time, as Kafka's broker does every client's)."""
        user = user_of(principal)
        return any(
            m.enabled and m.limit(m.metric_tags(user, client_id)) is not None
            for m in self._managers
        )

    def _now(self) -> int:
        return self._clock.wall_ms()

    def record_produce(self, principal: str, client_id: str, nbytes: int) -> int:
        """Throttle time in ms of a Produce request of `nbytes`."""
        return self.produce.record(user_of(principal), client_id, nbytes, self._now())

    def record_fetch(self, principal: str, client_id: str, nbytes: int) -> int:
        """Throttle time in ms of a Fetch answer of `nbytes`; when throttled, the bytes
        are taken back (the answer goes out empty, as Kafka's)."""
        user, now = user_of(principal), self._now()
        ms = self.fetch.record(user, client_id, nbytes, now)
        if ms > 0:
            self.fetch.unrecord(user, client_id, nbytes, now)
        return ms

    def record_request_time(self, principal: str, client_id: str, seconds: float) -> int:
        """Throttle time in ms of a request that kept the node busy `seconds`: the
        request_percentage quota counts percent of one thread, per second."""
        return self.request.record(user_of(principal), client_id, seconds * 100.0, self._now())

    def take_mutations(self, principal: str, client_id: str, partitions: int, strict: bool) -> int:
        """Controller mutations of `partitions`: -1 refused (strict, over quota), else
        the throttle time in ms."""
        return self.mutation.take_tokens(
            user_of(principal), client_id, partitions, self._now(), strict=strict
        )

    def mutation_throttle_ms(self, principal: str, client_id: str) -> int:
        return self.mutation.mutation_throttle_ms(user_of(principal), client_id, self._now())
