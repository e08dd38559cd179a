"""ApiVersions (key 18), v0-3: built from the handler registry.

It advertises only what is served. v3 also names Kafka's `transaction.version` feature
(KIP-890 part 2, KIP-1022), supported 0-2 and finalized at 2 as a Kafka 4 cluster
created at its latest version: clients that know it end transactions with EndTxn v5
(the epoch bumped at every transaction) and let Produce v12 and TxnOffsetCommit v5
add partitions for them.

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
TRANSACTION_VERSION = "transaction.version"
_TXN_VERSION_MAX = 2
# Kafka's epoch is the metadata offset of the last feature change; clients only keep the
# highest they saw, so any fixed value >= 0 serves (-1 would mean "none").
_FEATURES_EPOCH = 1


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
        supported_features=(
            make(
                cls(ctx, "SupportedFeatureKey"),
                name=TRANSACTION_VERSION,
                min_version=0,
                max_version=_TXN_VERSION_MAX,
            ),
        )
        if ctx.api_version >= 3
        else (),
        finalized_features_epoch=_FEATURES_EPOCH,
        finalized_features=(
            make(
                cls(ctx, "FinalizedFeatureKey"),
                name=TRANSACTION_VERSION,
                min_version_level=_TXN_VERSION_MAX,
                max_version_level=_TXN_VERSION_MAX,
            ),
        )
        if ctx.api_version >= 3
        else (),
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
