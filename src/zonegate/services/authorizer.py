"""The node's authorizer: Kafka's StandardAuthorizer over the ACLs of the metadata store.

One service every handler asks (`Authorizer` in services/api.py). It keeps one
snapshot of the ACLs (services/acl_engine.py decides over it), reads the store's
ACL version every `refresh` (every half second, broker/node.py) and reloads the
ACLs only when the version moved, so a change made on any node holds on every node
within about a second, and at once on the node that made it. CreateAcls and
DeleteAcls change the store in one transaction each.

With `authorizer.class.name` empty (no authorizer) every check passes, every
authorized-operations field holds every operation, and the ACL admin APIs answer
SECURITY_DISABLED, all as Kafka does.

Denials are logged on Kafka's authorizer logger (`kafka.authorizer.logger`), in its
words (StandardAuthorizerData.buildAuditMessage), but at most one line per principal,
operation and resource every `LOG_WINDOW_S`, and at most `LOG_LINES_PER_WINDOW` lines
in all per window, so a client retrying a refused request cannot flood the log; the
next line says how many were left out. Every denial is counted, by resource type and
operation (`denials`, the node's metrics).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.metastore.api import AclStore
from zonegate.metastore.models import AclBinding, AclOperation, ResourceType
from zonegate.runtime.clock import Clock
from zonegate.services.acl_engine import AclEngine, AclIndex, all_operations
from zonegate.services.acl_filters import AclFilter, creation_problem

audit_log = logging.getLogger("kafka.authorizer.logger")

LOG_WINDOW_S = 10.0
LOG_LINES_PER_WINDOW = 100

_RESOURCE_NAMES = {  # SecurityUtils.resourceTypeName
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}


@dataclass(frozen=True, slots=True)
class DeleteResult:
    error: ErrorCode
    message: str | None
    deleted: tuple[AclBinding, ...] = ()


class DenialLog:
    """Rate-limited audit lines of denials (see the module doc)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._window_start = clock.monotonic()
        self._seen: set[tuple[str, str, str]] = set()
        self._lines = 0
        self._left_out = 0

    def denied(self, key: tuple[str, str, str], line: str) -> bool:
        """Logs `line` unless its key was logged this window or the window is full;
        whether it was logged."""
        now = self._clock.monotonic()
        if now - self._window_start >= LOG_WINDOW_S:
            self._window_start, self._seen, self._lines = now, set(), 0
        if key in self._seen or self._lines >= LOG_LINES_PER_WINDOW:
            self._left_out += 1
            return False
        self._seen.add(key)
        self._lines += 1
        if self._left_out:
            line += f" ({self._left_out} denials like it or others left out of this log before)"
            self._left_out = 0
        audit_log.info(line)
        return True


class AuthorizerService:
    """The `Authorizer` of services/api.py."""

    def __init__(
        self,
        store: AclStore | None,
        clock: Clock,
        *,
        enabled: bool,
        super_users: Sequence[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self._store = store
        self.enabled = enabled
        self._engine = AclEngine(
            AclIndex(), super_users=frozenset(super_users), allow_if_no_acl=allow_if_no_acl
        )
        self._version = -1
        self.log = DenialLog(clock)
        self.denials: dict[tuple[str, str], int] = {}  # (resource type, operation) -> count

    @property
    def acl_count(self) -> int:
        return len(self._engine.index)

    async def refresh(self) -> None:
        if not self.enabled or self._store is None:
            return
        if await self._store.acl_version() == self._version:
            return
        version, acls = await self._store.acls()
        # One assignment: a check sees the old snapshot or the new one, never half.
        self._engine = self._engine.with_index(AclIndex(acls))
        self._version = version

    # -- checks ---------------------------------------------------------------------
    def authorize(
        self,
        principal: str,
        host: str,
        op: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        request: str,
        log_denied: bool = True,
    ) -> bool:
        if not self.enabled:
            return True
        decision = self._engine.authorize(principal, host, op, resource_type, name)
        if decision.allowed:
            return True
        key = (resource_type.name, op.name)
        self.denials[key] = self.denials.get(key, 0) + 1
        if log_denied:
            resource = f"{_RESOURCE_NAMES.get(resource_type, resource_type.name)}:LITERAL:{name}"
            self.log.denied(
                (principal, op.name, resource),
                f"Principal = {principal} is Denied operation = {op.name} from host = {host}"
                f" on resource = {resource} for request = {request} with resourceRefCount = 1"
                f" based on rule {decision.rule}",
            )
        return False

    def authorize_by_resource_type(
        self, principal: str, host: str, op: AclOperation, resource_type: ResourceType
    ) -> bool:
        if not self.enabled:
            return True
        return self._engine.authorize_by_resource_type(principal, host, op, resource_type)

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        if not self.enabled:
            return all_operations(resource_type)
        return self._engine.authorized_operations(principal, host, resource_type, name)

    # -- the admin APIs -------------------------------------------------------------
    def _acl_store(self) -> AclStore:
        if self._store is None:  # the handlers answer SECURITY_DISABLED before asking
            raise RuntimeError("no authorizer is configured")
        return self._store

    async def create_acls(self, acls: Sequence[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """CreateAcls: one (error, message) per ACL, in order; the valid ones are added
        in one transaction."""
        answers: list[tuple[ErrorCode, str | None]] = []
        valid: list[AclBinding] = []
        for acl in acls:
            problem = creation_problem(acl)
            if problem is None:
                valid.append(acl)
                answers.append((ErrorCode.none, ""))  # Kafka's default: "" not null
            else:
                answers.append((ErrorCode.invalid_request, problem))
        if valid:
            await self._acl_store().create_acls(valid)
            await self.refresh()
        return answers

    async def describe_acls(self, acl_filter: AclFilter) -> list[AclBinding]:
        """DescribeAcls, from the store (what every node will have within a second)."""
        _, acls = await self._acl_store().acls()
        return [a for a in acls if acl_filter.matches(a)]

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteResult]:
        """DeleteAcls: per filter, the ACLs it matched and this call removed."""
        _, acls = await self._acl_store().acls()
        matched: list[list[AclBinding] | DeleteResult] = []
        wanted: dict[AclBinding, None] = {}
        for f in filters:
            problem = f.problem()
            if problem is not None:
                matched.append(DeleteResult(ErrorCode.invalid_request, problem))
                continue
            found = [a for a in acls if f.matches(a)]
            wanted.update(dict.fromkeys(found))
            matched.append(found)
        gone = set(await self._acl_store().delete_acls(list(wanted))) if wanted else set()
        if gone:
            await self.refresh()
        return [
            m
            if isinstance(m, DeleteResult)
            else DeleteResult(ErrorCode.none, None, tuple(a for a in m if a in gone))
            for m in matched
        ]
