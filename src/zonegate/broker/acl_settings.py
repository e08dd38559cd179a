"""Kafka's authorizer settings: `authorizer.class.name`, `super.users`,
`allow.everyone.if.no.acl.found` (settings.py adds these rows to SETTINGS).

The one authorizer zonegate has is Kafka's StandardAuthorizer (ACLs in the metadata
store, services/authorizer.py), so its class name turns it on and the empty name (Kafka's
default) leaves it off. Any other class is refused at start by name: ZooKeeper's
AclAuthorizer is gone from Kafka 4, and a custom class cannot be loaded here.
"""

from __future__ import annotations

import argparse

from zonegate.broker.setting_types import ON_OFF, Setting, is_true

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_REMOVED = {
    "kafka.security.authorizer.AclAuthorizer": "ZooKeeper's AclAuthorizer, removed in Kafka 4.0",
    "kafka.security.auth.SimpleAclAuthorizer": "removed in Kafka 3.0",
}


def authorizer_class(text: str) -> str:
    name = text.strip()
    if name in ("", STANDARD_AUTHORIZER):
        return name
    why = _REMOVED.get(name, "not an authorizer zonegate has")
    raise argparse.ArgumentTypeError(
        f"authorizer.class.name={name} is refused ({why}): use {STANDARD_AUTHORIZER},"
        " whose ACLs live in the metadata store, or leave it empty for no authorizer"
    )


authorizer_class.__name__ = "class name"


def super_users(text: str) -> tuple[str, ...]:
    """Kafka's StandardAuthorizer.getConfiguredSuperUsers: `;`-separated principals,
    each `Type:name`."""
    found: list[str] = []
    for part in text.split(";"):
        principal = part.strip()
        if not principal:
            continue
        kind, sep, name = principal.partition(":")
        if not sep or not kind or not name:
            raise argparse.ArgumentTypeError(
                f"super.users: expected a string in format principalType:principalName"
                f" but got {principal}"
            )
        found.append(principal)
    return tuple(found)


super_users.__name__ = "principals"


def is_on(name: str) -> bool:
    return name == STANDARD_AUTHORIZER


ACL_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "--authorizer-class-name",
        "authorizer.class.name",
        "",
        "authorizer.class.name: " + STANDARD_AUTHORIZER + " turns on Kafka's ACLs (kept in "
        "the metadata store, managed with CreateAcls/DeleteAcls, e.g. kafka-acls); empty "
        "(the default): no authorizer, every request is allowed; any other class is refused",
        authorizer_class,
        "CLASS",
        into="authorizer_enabled",
        convert=is_on,
    ),
    Setting(
        "--super-users",
        "super.users",
        (),
        "super.users: principals allowed everything whatever the ACLs, "
        "User:admin;User:ops (default none)",
        super_users,
        "PRINCIPAL;...",
    ),
    Setting(
        "--allow-everyone-if-no-acl-found",
        "allow.everyone.if.no.acl.found",
        "false",
        "allow.everyone.if.no.acl.found: with the authorizer on, a resource that no ACL "
        "names is open to everyone (default {default}, as Kafka)",
        choices=ON_OFF,
        convert=is_true,
    ),
)
