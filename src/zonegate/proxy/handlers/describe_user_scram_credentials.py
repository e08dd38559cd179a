"""DescribeUserScramCredentials (key 50, v0): which SCRAM mechanisms each user has
credentials for, and their iteration counts (KIP-554); never a salt or a key.

As Kafka's ScramImage.describe (services/scram.py): no users named (null or an
empty list) describes every user with a credential; a user without one is
RESOURCE_NOT_FOUND ("Attempt to describe a user credential that does not exist:
NAME"), a user named twice DUPLICATE_RESOURCE. kafka-configs asks it whenever it
describes users (`--entity-type users --describe`), beside their quotas.
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
from zonegate.services.api import AclOperation


@REGISTRY.register(50, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    named = None if request.users is None else [u.name for u in request.users]
    allowed = authorize_cluster(ctx, AclOperation.DESCRIBE)
    answers = await ctx.services.scram.describe(named) if allowed else []
    result, info = cls(ctx, "DescribeUserScramCredentialsResult"), cls(ctx, "CredentialInfo")
    return make(
        cls(ctx, "DescribeUserScramCredentialsResponse"),
        throttle_time=datetime.timedelta(milliseconds=ctx.throttle.ms),
        error_code=ErrorCode.none if allowed else ErrorCode.cluster_authorization_failed,
        error_message=None,
        results=tuple(
            make(
                result,
                user=a.user,
                error_code=a.error,
                error_message=a.message,
                credential_infos=tuple(
                    make(info, mechanism=mechanism, iterations=iterations)
                    for mechanism, iterations in a.credentials
                ),
            )
            for a in answers
        ),
    )
