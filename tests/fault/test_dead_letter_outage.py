"""A NATS outage while runs die: dead letters are delayed, never lost, and the sweep
is not stalled by them (docs/design.md section 7: a dead run's DeadLetter is published).

NATS is cut for real: the sweeper's connection goes through a TCP proxy that the test
closes and reopens.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import asyncpg
import pytest

from sundial.core.bus import Bus, connect_bus, ensure_streams
from sundial.core.clock import ManualClock
from sundial.core.config import DatabaseConfig
from sundial.core.db import close_pool, create_pool
from sundial.devstack import Stack
from sundial.job import JobPolicies
from sundial.schedule import IntervalSpec, Schedule
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from sundial.scheduler.sweeper import Sweeper
from tests.helpers.eventually import assert_eventually
from tests.helpers.tcp_proxy import TcpProxy
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import add_tenant, dead_letters, insert_jobs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
DYING = 40
PUBLISH_TIMEOUT_S = 1.0


@pytest.fixture
async def pool(migrated_database_url: str) -> AsyncIterator[asyncpg.Pool]:
    config = DatabaseConfig(database_url=migrated_database_url, pool_max_size=4)
    pool = await create_pool(config, application_name="test-fault")
    await add_tenant(pool)
    yield pool
    await close_pool(pool, 5.0)


@pytest.fixture
async def bus(stack: Stack) -> AsyncIterator[Bus]:
    """A connection that is never cut, to read SUNDIAL_DEAD."""
    bus = await connect_bus(stack.nats_config(), name="reader")
    yield bus
    await bus.close()


@pytest.fixture
async def proxied_bus(stack: Stack) -> AsyncIterator[tuple[Bus, TcpProxy]]:
    target = urlsplit(stack.nats_url)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 4222)
    await proxy.start()
    cut = replace(stack.nats_config(), nats_url=f"nats://127.0.0.1:{proxy.port}")
    bus = await connect_bus(cut, name="cut")
    await ensure_streams(bus.jetstream)
    try:
        yield bus, proxy
    finally:
        await bus.close()
        await proxy.close()


async def test_dead_letters_survive_a_nats_outage_without_stalling_the_sweep(
    pool: asyncpg.Pool,
    bus: Bus,
    proxied_bus: tuple[Bus, TcpProxy],
    stack: Stack,
    migrated_database_url: str,
) -> None:
    cut_bus, proxy = proxied_bus
    jobs = await insert_jobs(
        pool,
        Schedule(IntervalSpec(timedelta(days=1))),
        first_due=T0 + timedelta(days=1),
        policies=JobPolicies(retry_max_attempts=1),
        count=DYING,
    )
    # Each on its last attempt, its executor gone: the lease expires at T0 + 30 s.
    await pool.execute(
        "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
        " attempt, lease_until, check_at, executor_id, dispatch_seq)"
        " SELECT j.job_id, $1, j.tenant_id, j.partition_id, 'running', 1, $2, $2, 'gone', 1"
        " FROM jobs j",
        T0,
        T0 + timedelta(seconds=30),
    )
    clock = ManualClock(T0 + timedelta(seconds=31))
    config = scheduler_config(migrated_database_url, stack)
    publisher = RunPublisher(cut_bus.jetstream, "cut", timeout_s=PUBLISH_TIMEOUT_S)
    sweeper = Sweeper(SchedulerStore(pool), publisher, lambda: range(256), config, clock)

    proxy.blackhole()  # NATS unreachable: nothing is forwarded either way
    began = time.monotonic()
    await sweeper.sweep_once()
    # The letters went out together: one timeout for the pass, not one per letter.
    assert time.monotonic() - began < PUBLISH_TIMEOUT_S * 4
    rows = await pool.fetch("SELECT status, check_at FROM job_runs")
    assert len(rows) == DYING and all(r["status"] == "dead" for r in rows)
    assert all(r["check_at"] is not None for r in rows), "an unsent letter left the outbox"

    proxy.restore()
    wanted = {str(job) for job in jobs}

    async def all_letters_out() -> None:
        # Once the outbox entries are due again, a pass publishes them.
        clock.advance(config.publish_confirm_s)
        await sweeper.sweep_once()
        pending = await pool.fetchval("SELECT count(*) FROM job_runs WHERE check_at IS NOT NULL")
        assert pending == 0, f"{pending} letters not acknowledged yet"

    await assert_eventually(all_letters_out, timeout_s=30, interval_s=0.5, what="letters")
    letters = [d for d in await dead_letters(bus.jetstream) if d.run.job_id in wanted]
    # JetStream deduplicated any letter published twice (<run key>#dead#<attempt>).
    assert sorted(d.run.job_id for d in letters) == sorted(wanted)
