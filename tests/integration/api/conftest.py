"""The API service's real graph (``app.build``) on a fresh database, served in-process.

``api`` starts it with loopback targets allowed (tests call 127.0.0.1) and gives stubs
plus helpers: ``api.tenant()`` creates a tenant through AdminService and issues it a
token, so every test exercises the same path a real client does. ``start_api`` builds
more servers (other settings, a manual clock) on the same database.

``shared_api`` is one server and database for a whole module, for read-only checks (the
validation matrix), with ``shared_tenant`` a new tenant of it per test: the tests using
them run on the module-scoped event loop (``pytest.mark.asyncio(loop_scope="module")``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.integration.api.support import Api, StartApi, Tenant, launch


@pytest.fixture
async def start_api(migrated_database_url: str) -> AsyncIterator[StartApi]:
    """Factory: start API servers on this test's database; all stopped at the end."""
    started: list[Api] = []

    async def start(**settings: Any) -> Api:
        api = await launch(migrated_database_url, **settings)
        started.append(api)
        return api

    yield start
    for api in reversed(started):
        await api.shutdown()


@pytest.fixture
async def api(start_api: StartApi) -> Api:
    """An API server with loopback targets allowed."""
    return await start_api()


@pytest.fixture
async def tenant(api: Api) -> Tenant:
    """A tenant of ``api`` with default quotas."""
    return await api.tenant("acme")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_api(module_database_url: str) -> AsyncIterator[Api]:
    """One API server on one fresh database for every test of a module.

    Creating a database and a server per test costs most of a read-only test's time.
    Background errors on the module's loop fail the module here, since the per-test
    guard watches the per-test loop.
    """
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    api = await launch(module_database_url)
    try:
        yield api
    finally:
        await api.shutdown()
        loop.set_exception_handler(previous)
    if errors:
        pytest.fail(f"unhandled errors in background tasks: {errors!r}")


@pytest_asyncio.fixture(loop_scope="module")
async def shared_tenant(shared_api: Api) -> Tenant:
    """A new tenant of ``shared_api`` for each test (names never clash between tests)."""
    return await shared_api.tenant()
