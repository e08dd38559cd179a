"""AlterUserScramCredentials (key 51, v0): add, replace and delete users' SCRAM
credentials (KIP-554), kept salted in the metadata store, used by every node.

The client sends the salt and the salted password it computed; the node keeps
the keys derived from them, never the password (services/scram.py). As Kafka's
controller: one result per user named; an unknown mechanism is
UNSUPPORTED_SASL_MECHANISM, an empty user name or iterations outside
4096..16384 UNACCEPTABLE_CREDENTIAL, a user named twice in one request
DUPLICATE_RESOURCE, deleting a credential that does not exist
RESOURCE_NOT_FOUND; the others are made in one transaction.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, ScramAnswer, ScramUpsertion


@REGISTRY.register(51, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        users = dict.fromkeys(
            [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        )
        answers = [
            ScramAnswer(user, ErrorCode.cluster_authorization_failed, None) for user in users
        ]
    else:
        answers = await _alter(ctx, request)
    result = cls(ctx, "AlterUserScramCredentialsResult")
    return make(
        cls(ctx, "AlterUserScramCredentialsResponse"),
        throttle_time=datetime.timedelta(milliseconds=ctx.throttle.ms),
        results=tuple(
            make(result, user=a.user, error_code=a.error, error_message=a.message) for a in answers
        ),
    )


async def _alter(ctx: RequestContext, request: Any) -> list[ScramAnswer]:
    return await ctx.services.scram.alter(
        [(d.name, int(d.mechanism)) for d in request.deletions],
        [
            ScramUpsertion(
                u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
            )
            for u in request.upsertions
        ],
    )
