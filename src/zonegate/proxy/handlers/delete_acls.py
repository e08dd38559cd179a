"""DeleteAcls (key 31), v0-3: removes the ACLs each filter selects, and names them.

As Kafka's AclApis: the caller needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED
for every filter); with no authorizer each filter answers SECURITY_DISABLED; a filter
with an unknown part answers INVALID_REQUEST. Filters are Kafka's
(services/acl_filters.py); all the filters' ACLs go in one transaction.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.acl_wire import CLUSTER_REFUSED, NO_AUTHORIZER, acl_filter, refused
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, DeleteResult

API_KEY = 31


@REGISTRY.register(API_KEY, 0, 3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    count = len(request.filters)
    if refused(ctx, AclOperation.ALTER):
        results = [DeleteResult(ErrorCode.cluster_authorization_failed, CLUSTER_REFUSED)] * count
    elif not ctx.services.authorizer.enabled:
        results = [DeleteResult(ErrorCode.security_disabled, NO_AUTHORIZER)] * count
    else:
        results = await ctx.services.authorizer.delete_acls(
            [acl_filter(f) for f in request.filters]
        )
    result_cls, acl_cls = cls(ctx, "DeleteAclsFilterResult"), cls(ctx, "DeleteAclsMatchingAcl")
    return make(
        cls(ctx, "DeleteAclsResponse"),
        throttle_time=datetime.timedelta(milliseconds=ctx.throttle.ms),
        filter_results=tuple(
            make(
                result_cls,
                error_code=r.error,
                error_message=r.message,
                matching_acls=tuple(
                    make(
                        acl_cls,
                        error_code=ErrorCode.none,
                        error_message=None,
                        resource_type=int(a.resource_type),
                        resource_name=a.resource_name,
                        pattern_type=int(a.pattern_type),
                        principal=a.principal,
                        host=a.host,
                        operation=int(a.operation),
                        permission_type=int(a.permission),
                    )
                    for a in r.deleted
                ),
            )
            for r in results
        ),
    )
