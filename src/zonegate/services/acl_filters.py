"""Which ACLs a filter selects, and which new ACLs are refused, as Kafka decides both.

Pure. DescribeAcls and DeleteAcls select with Kafka's AclBindingFilter
(ResourcePatternFilter.matches and AccessControlEntryFilter.matches): ANY matches
every value; a pattern type of MATCH selects the ACLs that would apply to the named
resource (its literal name, the literal `*`, the prefixes of the name). CreateAcls
refuses what Kafka's AclApis and AclControlManager.validateNewAcl refuse, with their
messages; and DELEGATION_TOKEN and USER ACLs, which need delegation tokens that
zonegate does not have yet, by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from zonegate.metastore.models import (
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from zonegate.services.acl_engine import CLUSTER_NAME, WILDCARD


def resource_type(code: int) -> ResourceType:
    """Kafka's fromCode: a code it does not know is UNKNOWN."""
    try:
        return ResourceType(code)
    except ValueError:
        return ResourceType.UNKNOWN


def pattern_type(code: int) -> PatternType:
    try:
        return PatternType(code)
    except ValueError:
        return PatternType.UNKNOWN


def operation(code: int) -> AclOperation:
    try:
        return AclOperation(code)
    except ValueError:
        return AclOperation.UNKNOWN


def permission(code: int) -> AclPermission:
    try:
        return AclPermission(code)
    except ValueError:
        return AclPermission.UNKNOWN


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter; None for a name, principal or host matches any."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermission

    def problem(self) -> str | None:
        """AclControlManager.validateFilter: a filter with an unknown part is refused."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == AclOperation.UNKNOWN or self.permission == AclPermission.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != acl.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if wanted in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        if acl.pattern_type == PatternType.LITERAL:  # MATCH
            return acl.resource_name in (self.resource_name, WILDCARD)
        return self.resource_name.startswith(acl.resource_name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission == AclPermission.ANY or self.permission == acl.permission


MATCH_ALL = AclFilter(
    ResourceType.ANY,
    None,
    PatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermission.ANY,
)


def principal_problem(principal: str) -> str | None:
    """SecurityUtils.parseKafkaPrincipal: `Type:name`, both parts present."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        return f"expected a string in format principalType:principalName but got {principal}"
    return None


def unbindable(acl: AclBinding) -> bool:
    """Whether Kafka cannot even build the AclBinding: its ResourcePattern refuses type
    ANY and pattern types MATCH and ANY, its AccessControlEntry operation and permission
    ANY. Kafka's broker then fails the whole CreateAcls request (UNKNOWN_SERVER_ERROR
    for every creation, no message), before any ACL is checked."""
    return (
        acl.resource_type == ResourceType.ANY
        or acl.pattern_type in (PatternType.ANY, PatternType.MATCH)
        or acl.operation == AclOperation.ANY
        or acl.permission == AclPermission.ANY
    )


def creation_problem(acl: AclBinding) -> str | None:
    """Why CreateAcls refuses this ACL (INVALID_REQUEST with this message), else None."""
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.resource_name:
        return "Invalid empty resource name"
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.resource_type in (ResourceType.DELEGATION_TOKEN, ResourceType.USER):
        return (
            f"ACLs on resource type {acl.resource_type.name} are not supported:"
            " zonegate has no delegation tokens"
        )
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission not in (AclPermission.ALLOW, AclPermission.DENY):
        return f"Invalid permissionType {acl.permission.name}"
    return principal_problem(acl.principal)
