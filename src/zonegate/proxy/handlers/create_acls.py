"""CreateAcls (key 30), v0-3: adds ACLs to the metadata store, every node's within a
second (services/authorizer.py).

As Kafka's AclApis and AclControlManager: the caller needs ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED for every creation); with no authorizer each creation
answers SECURITY_DISABLED; a CLUSTER ACL not named kafka-cluster, an empty name, ANY
or MATCH or UNKNOWN values, and a principal that is not `Type:name` get
INVALID_REQUEST with Kafka's message; DELEGATION_TOKEN and USER ACLs are refused by
name (zonegate has no delegation tokens). An ACL that exists already is a success. A
creation Kafka cannot even build (type ANY, pattern MATCH or ANY, operation or
permission ANY) fails the whole request with UNKNOWN_SERVER_ERROR, as Kafka's broker.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.acl_wire import CLUSTER_REFUSED, NO_AUTHORIZER, creation, refused
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, unbindable

API_KEY = 30


@REGISTRY.register(API_KEY, 0, 3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    count = len(request.creations)
    answers: list[tuple[ErrorCode, str | None]]
    if refused(ctx, AclOperation.ALTER):
        answers = [(ErrorCode.cluster_authorization_failed, CLUSTER_REFUSED)] * count
    elif not ctx.services.authorizer.enabled:
        answers = [(ErrorCode.security_disabled, NO_AUTHORIZER)] * count
    else:
        acls = [creation(c) for c in request.creations]
        if any(unbindable(a) for a in acls):
            answers = [(ErrorCode.unknown_server_error, None)] * count
        else:
            answers = await ctx.services.authorizer.create_acls(acls)
    result_cls = cls(ctx, "AclCreationResult")
    return make(
        cls(ctx, "CreateAclsResponse"),
        throttle_time=datetime.timedelta(milliseconds=ctx.throttle.ms),
        results=tuple(
            make(result_cls, error_code=error, error_message=message) for error, message in answers
        ),
    )
