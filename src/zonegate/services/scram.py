"""Users' SCRAM credentials on a node (KIP-554): AlterUserScramCredentials and
DescribeUserScramCredentials against the metadata store, and the in-memory copy the
SASL SCRAM authenticator reads (`ScramCredentialSource`, services/credentials.py).

The client salts and hashes the password itself (`salted_password`, RFC 5802's
Hi()); from it the node keeps only what Kafka's controller keeps
(ScramControlManager): the salt, the iteration count, StoredKey = H(HMAC(salted,
"Client Key")) and ServerKey = HMAC(salted, "Server Key"). Validation, error codes
and messages are Kafka's (ScramControlManager, ScramImage.describe).

The copy is read again every `refresh` (every couple of seconds, as client quotas:
broker/node.py) and at once after a change made on this node, so a user added on
any node can log in on every node within a couple of seconds, and at once on the
node that added it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.metastore.api import ScramStore
from zonegate.metastore.models import ScramRecord
from zonegate.services.credentials import ScramCredential

log = logging.getLogger(__name__)

# Kafka's ScramMechanism (org.apache.kafka.clients.admin): the wire's int8 and the
# name, and the hash each one uses.
MECHANISMS: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_TYPES: dict[str, int] = {name: t for t, name in MECHANISMS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # ScramMechanism.minIterations(), both mechanisms
MAX_ITERATIONS = 16384  # ScramControlManager.MAX_ITERATIONS

_TWICE = "A user credential cannot be altered twice in the same request"
_DELETE_MISSING = "Attempt to delete a user credential that does not exist"
_DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    """One upsertion as the client sent it (AlterUserScramCredentials)."""

    user: str
    mechanism: int  # the wire's type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class ScramAnswer:
    """One user's result of DescribeUserScramCredentials (`credentials`: mechanism type
    and iterations) or of AlterUserScramCredentials (`credentials` empty)."""

    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def derive(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    """The credential kept for a salted password (Kafka's ScramFormatter)."""
    digest = _HASHES[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    return ScramCredential(
        mechanism=mechanism,
        salt=salt,
        stored_key=hashlib.new(digest, client_key).digest(),
        server_key=hmac.digest(salted_password, b"Server Key", digest),
        iterations=iterations,
    )


def _check_user_and_mechanism(user: str, mechanism: int) -> str:
    """The mechanism's name, or _Refused (validateScramUsernameAndMechanism)."""
    if not user:
        raise _Refused(ErrorCode.unacceptable_credential, "Username must not be empty")
    name = MECHANISMS.get(mechanism)
    if name is None:
        raise _Refused(ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return name


def _record(u: ScramUpsertion) -> ScramRecord:
    """The validated upsertion's record, or _Refused (validateUpsertion, finishUpsertion)."""
    mechanism = _check_user_and_mechanism(u.user, u.mechanism)
    if u.iterations < MIN_ITERATIONS:
        raise _Refused(ErrorCode.unacceptable_credential, "Too few iterations")
    if u.iterations > MAX_ITERATIONS:
        raise _Refused(ErrorCode.unacceptable_credential, "Too many iterations")
    if not u.salted_password:
        # Java's HMAC refuses an empty key; Kafka answers that as an unknown server
        # error, without a message (ApiError.fromThrowable).
        raise _Refused(ErrorCode.unknown_server_error, None)
    c = derive(mechanism, u.salt, u.salted_password, u.iterations)
    return ScramRecord(u.user, mechanism, c.salt, c.stored_key, c.server_key, c.iterations)


class ScramService:
    """KIP-554's two admin calls, and the node's `ScramCredentialSource`."""

    def __init__(self, store: ScramStore) -> None:
        self._store = store
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    # -- the authenticator's look-up --------------------------------------------------
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    async def refresh(self) -> None:
        self._use(await self._store.scram_credentials())

    def _use(self, records: Sequence[ScramRecord]) -> None:
        # One assignment: a look-up sees the old copy or the new one, never half.
        self._credentials = {
            (r.user, r.mechanism): ScramCredential(
                r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations
            )
            for r in records
        }

    # -- the admin APIs -----------------------------------------------------------------
    async def describe(self, users: Sequence[str] | None) -> list[ScramAnswer]:
        """ScramImage.describe: every user with a credential when `users` is None or
        empty, else each user named once (a user named twice: DUPLICATE_RESOURCE)."""
        records = await self._store.scram_credentials()
        self._use(records)  # as fresh as the answer
        by_user: dict[str, list[tuple[int, int]]] = {}
        for r in records:
            by_user.setdefault(r.user, []).append((MECHANISM_TYPES[r.mechanism], r.iterations))
        named: dict[str, bool] = {}  # user -> named more than once
        for user in users or sorted(by_user):
            named[user] = user in named
        out = []
        for user, twice in named.items():
            if twice:
                out.append(ScramAnswer(user, ErrorCode.duplicate_resource, _DESCRIBE_TWICE + user))
            elif user in by_user:
                out.append(ScramAnswer(user, credentials=tuple(sorted(by_user[user]))))
            else:
                out.append(
                    ScramAnswer(user, ErrorCode.resource_not_found, _DESCRIBE_MISSING + user)
                )
        return out

    async def alter(
        self, deletions: Sequence[tuple[str, int]], upsertions: Sequence[ScramUpsertion]
    ) -> list[ScramAnswer]:
        """ScramControlManager.alterCredentials: one result per user named; a user named
        twice in the request (whatever the mechanisms) is DUPLICATE_RESOURCE and nothing
        of it changes; the valid changes are made in one transaction."""
        errors: dict[str, _Refused] = {}
        to_delete: dict[str, str] = {}  # user -> mechanism
        to_upsert: dict[str, ScramRecord] = {}
        # Kafka checks a deletion against the credentials before the upsertions (a user
        # whose deletion finds nothing is not then named twice); the store checks again
        # in its transaction, for a change another node made meanwhile.
        current = await self._store.scram_credentials()
        self._use(current)
        existing = {(r.user, r.mechanism) for r in current}
        for user, mechanism in deletions:
            if user in errors:
                continue
            if to_delete.pop(user, None) is not None:
                errors[user] = _Refused(ErrorCode.duplicate_resource, _TWICE)
                continue
            try:
                name = _check_user_and_mechanism(user, mechanism)
                if (user, name) not in existing:
                    raise _Refused(ErrorCode.resource_not_found, _DELETE_MISSING)
                to_delete[user] = name
            except _Refused as exc:
                errors[user] = exc
        for u in upsertions:
            if u.user in errors:
                continue
            if to_delete.pop(u.user, None) is not None or to_upsert.pop(u.user, None) is not None:
                errors[u.user] = _Refused(ErrorCode.duplicate_resource, _TWICE)
                continue
            try:
                to_upsert[u.user] = _record(u)
            except _Refused as exc:
                errors[u.user] = exc
        if to_delete or to_upsert:
            missing = await self._store.alter_scram_credentials(
                list(to_upsert.values()), list(to_delete.items())
            )
            for user, _ in missing:
                del to_delete[user]
                errors[user] = _Refused(ErrorCode.resource_not_found, _DELETE_MISSING)
            for user, name in to_delete.items():
                log.info("SCRAM credential of user %s for %s deleted", user, name)
            for r in to_upsert.values():
                log.info(
                    "SCRAM credential of user %s for %s set (%d iterations)",
                    r.user,
                    r.mechanism,
                    r.iterations,
                )
            await self.refresh()
        return [
            *(ScramAnswer(user) for user in to_delete),
            *(ScramAnswer(user) for user in to_upsert),
            *(ScramAnswer(user, exc.code, exc.message) for user, exc in errors.items()),
        ]
