"""End-to-end fixtures: the three services as real processes, and a recording target."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sundial.devstack import Services, Stack
from tests.helpers.cluster import Cluster, client_of, running_cluster, shared_services
from tests.helpers.target_server import RecordingTarget


@pytest.fixture
async def cluster(
    stack: Stack, migrated_database_url: str, tmp_path: Path
) -> AsyncIterator[Cluster]:
    """API, scheduler and executor processes of this test's own, on its database (a
    module whose tests can share them overrides this with ``shared_cluster``)."""
    async with running_cluster(stack, migrated_database_url, tmp_path) as running:
        yield running


@pytest.fixture(scope="module")
def module_services(
    stack: Stack, module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    """API, scheduler and executor processes shared by a module's tests (see
    ``shared_cluster``)."""
    with shared_services(stack, module_database_url, tmp_path_factory.mktemp("services")) as s:
        yield s


@pytest.fixture
async def shared_cluster(module_services: Services) -> AsyncIterator[Cluster]:
    """``cluster`` for a module whose tests may share the processes: each keeps to
    tenants of its own and leaves the processes running as they were (see
    ``tests.helpers.cluster.shared_services``). Such a module overrides ``cluster``
    with a fixture returning this one."""
    async with client_of(module_services) as running:
        yield running


@pytest.fixture
async def target() -> AsyncIterator[RecordingTarget]:
    """An HTTP target on loopback that records every call."""
    async with RecordingTarget() as server:
        yield server
