"""Every metadata-store backend (backends.py) through one fixture: each runs every case.

Cases are `async def`: the hook below runs each in its own event loop and closes
the stores it opened in that same loop (a backend's connections may be bound to
the loop that made them), whatever the case's outcome.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

from tests.metastore.backends import BACKENDS, Stores
from zonegate.metastore.api import MetaStore


@pytest.fixture(
    # Every backend keeps its store in files or a server: integration, not unit.
    params=[pytest.param(name, marks=pytest.mark.integration) for name in BACKENDS]
)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    return Stores(BACKENDS[request.param](request, tmp_path))


@pytest.fixture
def store(stores: Stores) -> MetaStore:
    """The case's first connection to its fresh store."""
    return stores.open()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    case = pyfuncitem.obj
    if not inspect.iscoroutinefunction(case):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in inspect.signature(case).parameters}
    opened = pyfuncitem.funcargs.get("stores")

    async def run() -> None:
        try:
            await case(**kwargs)
        finally:
            if isinstance(opened, Stores):
                await opened.close_all()

    asyncio.run(run())
    return True
