"""ApiVersions (key 18), v0-3: built from the handler registry.

It advertises only what is served.

An ApiVersions request with a version above 3 is answered at v0 with
UNSUPPORTED_VERSION and the supported ranges (KIP-511), by the server.
"""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

API_KEY = 18


@REGISTRY.register(API_KEY, 0, 3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    version_cls = cls(ctx, "ApiVersion")
    keys = tuple(
        make(version_cls, api_key=r.api_key, min_version=r.min_version, max_version=r.max_version)
        for r in REGISTRY
    )
    return make(
        cls(ctx, "ApiVersionsResponse"),
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )


async def unsupported_version_answer() -> ApiVersionsResponseV0:
    return ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(
            make(
                ApiVersionV0,
                api_key=r.api_key,
                min_version=r.min_version,
                max_version=r.max_version,
            )
            for r in REGISTRY
        ),
    )
