"""DescribeAcls (key 29), v0-3: the ACLs a filter selects, grouped by resource pattern.

As Kafka's AclApis: the caller needs DESCRIBE on the cluster
(CLUSTER_AUTHORIZATION_FAILED); with no authorizer the answer is SECURITY_DISABLED.
Filters are Kafka's (services/acl_filters.py): ANY, MATCH, LITERAL, PREFIXED; one with
an unknown part selects nothing (no error), as Kafka's.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.acl_wire import (
    CLUSTER_REFUSED,
    NO_AUTHORIZER_DESCRIBE,
    acl_filter,
    refused,
)
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclBinding, AclOperation

API_KEY = 29


@REGISTRY.register(API_KEY, 0, 3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    def answer(error: ErrorCode, message: str | None, resources: tuple[Any, ...] = ()) -> Any:
        return make(
            cls(ctx, "DescribeAclsResponse"),
            throttle_time=datetime.timedelta(milliseconds=ctx.throttle.ms),
            error_code=error,
            error_message=message,
            resources=resources,
        )

    if refused(ctx, AclOperation.DESCRIBE):
        return answer(ErrorCode.cluster_authorization_failed, CLUSTER_REFUSED)
    authorizer = ctx.services.authorizer
    if not authorizer.enabled:
        return answer(ErrorCode.security_disabled, NO_AUTHORIZER_DESCRIBE)
    # A filter with an unknown part matches nothing, as Kafka's authorizer answers it.
    wanted = acl_filter(request)
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in await authorizer.describe_acls(wanted):
        key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
        grouped.setdefault(key, []).append(acl)
    resource_cls, acl_cls = cls(ctx, "DescribeAclsResource"), cls(ctx, "AclDescription")
    return answer(
        ErrorCode.none,
        "",  # Kafka's default on success: "" rather than null
        tuple(
            make(
                resource_cls,
                resource_type=rt,
                resource_name=name,
                pattern_type=pt,
                acls=tuple(
                    make(
                        acl_cls,
                        principal=a.principal,
                        host=a.host,
                        operation=int(a.operation),
                        permission_type=int(a.permission),
                    )
                    for a in acls
                ),
            )
            for (rt, name, pt), acls in grouped.items()
        ),
    )
