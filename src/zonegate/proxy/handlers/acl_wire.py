"""What the three ACL admin handlers share: Kafka's messages for their refusals, and
filters and bindings read from the wire (v0 carries no pattern type: LITERAL, as
Kafka reads it)."""

from __future__ import annotations

from typing import Any

from zonegate.proxy.authz import authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.services.api import (
    AclBinding,
    AclFilter,
    AclOperation,
    operation,
    pattern_type,
    permission,
    resource_type,
)

NO_AUTHORIZER = "No Authorizer is configured."  # CreateAcls, DeleteAcls
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"  # DescribeAcls
CLUSTER_REFUSED = "Cluster authorization failed."
_LITERAL = 3


def refused(ctx: RequestContext, op: AclOperation) -> bool:
    """Kafka's AuthHelper.authorizeClusterOperation, made before anything else."""
    return not authorize_cluster(ctx, op)


def acl_filter(f: Any) -> AclFilter:
    return AclFilter(
        resource_type(int(f.resource_type_filter)),
        f.resource_name_filter,
        pattern_type(int(getattr(f, "pattern_type_filter", _LITERAL))),
        f.principal_filter,
        f.host_filter,
        operation(int(f.operation)),
        permission(int(f.permission_type)),
    )


def creation(c: Any) -> AclBinding:
    return AclBinding(
        resource_type(int(c.resource_type)),
        c.resource_name,
        pattern_type(int(getattr(c, "resource_pattern_type", _LITERAL))),
        c.principal,
        c.host,
        operation(int(c.operation)),
        permission(int(c.permission_type)),
    )
