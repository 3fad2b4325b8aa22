"""End-to-end fixtures: the three services as real processes, and a recording target."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sundial.devstack import Stack
from tests.helpers.cluster import Cluster, running_cluster
from tests.helpers.target_server import RecordingTarget


@pytest.fixture
async def cluster(
    stack: Stack, migrated_database_url: str, tmp_path: Path
) -> AsyncIterator[Cluster]:
    """API, scheduler and executor processes on this test's database."""
    async with running_cluster(stack, migrated_database_url, tmp_path) as running:
        yield running


@pytest.fixture
async def target() -> AsyncIterator[RecordingTarget]:
    """An HTTP target on loopback that records every call."""
    async with RecordingTarget() as server:
        yield server
