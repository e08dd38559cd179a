"""Small shared pieces of the handlers: the versioned response classes and zero throttle."""

from __future__ import annotations

import datetime
from typing import Any

from zonegate.proxy.context import RequestContext
from zonegate.proxy.schema import response_class

NO_THROTTLE = datetime.timedelta(0)


def cls(ctx: RequestContext, name: str) -> type[Any]:
    """The response class `name` of the request's API at the request's version."""
    return response_class(ctx.api_key, ctx.api_version, name)
