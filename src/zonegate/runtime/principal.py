"""Whose request a task is serving: the Kafka principal ("User:alice") of the client.

The Kafka front sets it around each request's task (proxy/connection.py); a
node passing a group call or a DeleteRecords to another node carries it in
the call (leader_forwarder/grpc_client.py), and the receiving node sets it
around serving the call (grpc_server.py). It is read only to name who caused
a change in the logs (the group coordinator, DeleteRecords): never to grant
anything. The check is made once, by the node the client reached
(proxy/authz.py, docs/acls.md). A context variable, so it follows the task
without threading a parameter through every service.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

ANONYMOUS = "User:ANONYMOUS"  # Kafka's principal for a client that did not authenticate

# "" outside any client's request: the node's own timers (a session expiring).
_PRINCIPAL: ContextVar[str] = ContextVar("zonegate_principal", default="")


def current_principal() -> str:
    """The principal of the client whose request this task serves; "" for the node's own."""
    return _PRINCIPAL.get()


@contextlib.contextmanager
def acting_for(principal: str) -> Iterator[None]:
    """Tasks started inside (and code run inside) serve `principal`'s request."""
    token = _PRINCIPAL.set(principal)
    try:
        yield
    finally:
        _PRINCIPAL.reset(token)


def who(principal: str | None = None) -> str:
    """How a log line names the cause of a change: the principal, or the node itself."""
    p = current_principal() if principal is None else principal
    return p or "the node"
