"""Fixtures of the scheduler's integration tests: a pool on a fresh database."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from sundial.core.bus import Bus, connect_bus, ensure_streams
from sundial.core.config import DatabaseConfig
from sundial.core.db import close_pool, create_pool
from sundial.devstack import Stack
from sundial.scheduler.config import SchedulerConfig
from tests.integration.scheduler.support import add_tenant


@pytest.fixture
async def pool(migrated_database_url: str) -> AsyncIterator[asyncpg.Pool]:
    config = DatabaseConfig(database_url=migrated_database_url, pool_max_size=8)
    pool = await create_pool(config, application_name="test-scheduler")
    await add_tenant(pool)
    yield pool
    await close_pool(pool, 5.0)


@pytest.fixture
async def bus(stack: Stack) -> AsyncIterator[Bus]:
    bus = await connect_bus(stack.nats_config(), name="test-scheduler")
    await ensure_streams(bus.jetstream)
    yield bus
    await bus.close()


def scheduler_config(database_url: str, stack: Stack, **overrides: Any) -> SchedulerConfig:
    """A scheduler configuration for in-process components on ``database_url``."""
    nats = stack.nats_config("scheduler")
    etcd = stack.etcd_config()
    values: dict[str, Any] = {
        "database_url": database_url,
        "nats_url": nats.nats_url,
        "nats_user": nats.nats_user,
        "nats_password": nats.nats_password,
        "nats_inbox_prefix": nats.nats_inbox_prefix,
        "etcd_endpoints": etcd.etcd_endpoints,
        **etcd.etcd_access(),
        "cluster": f"t{uuid.uuid4().hex[:10]}",
        "lease_ttl_s": 3,
        "poll_interval_s": 0.1,
        "sweep_interval_s": 0.2,
        "membership_poll_s": 0.2,
        "migrate_on_start": False,
    }
    values.update(overrides)
    return SchedulerConfig(**values)
