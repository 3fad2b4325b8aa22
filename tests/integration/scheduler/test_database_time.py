"""One time source: a scheduler whose host clock is 60 s off decides on the database's.

Each test gives the scheduler's components an :class:`OffsetClock` over a host clock
skewed by an hour-scale amount and lets :class:`DatabaseTime` measure PostgreSQL's
``clock_timestamp()``; due-ness and lease deadlines then follow the database, so no run
is dispatched early and no lease is born expired (issue 11).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from sundial.core.bus import Bus
from sundial.core.clock import OffsetClock, SystemClock
from sundial.core.dbclock import DatabaseTime
from sundial.devstack import Stack
from sundial.schedule import CronSpec, IntervalSpec, Schedule
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.ledger import RunLedgerServiceServicer
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import insert_jobs, insert_queued_runs
from tests.integration.scheduler.test_ledger import lease, ref, serve

ALL = list(range(256))
HOURLY = Schedule(CronSpec("0 * * * *"))
# Its next fire is a day after the one due: a clock a minute off never sees two due (an
# hourly schedule would when the test runs in the minute before a full hour).
DAILY = Schedule(IntervalSpec(timedelta(days=1)))
SKEWS = [timedelta(seconds=-60), timedelta(seconds=60)]


class SkewedClock(SystemClock):
    """The machine's clocks, its wall clock off by ``skew``."""

    def __init__(self, skew: timedelta) -> None:
        self.skew = skew

    def now(self) -> datetime:
        return super().now() + self.skew


async def corrected(pool: asyncpg.Pool, skew: timedelta) -> OffsetClock:
    clock = OffsetClock(SkewedClock(skew))
    offset = await DatabaseTime(pool, clock).measure()
    assert offset is not None
    return clock


async def db_now(pool: asyncpg.Pool) -> datetime:
    value: datetime = await pool.fetchval("SELECT clock_timestamp()")
    return value


@pytest.mark.parametrize("skew", SKEWS, ids=["behind", "ahead"])
async def test_the_offset_brings_a_skewed_clock_to_the_databases(
    pool: asyncpg.Pool, skew: timedelta
) -> None:
    clock = await corrected(pool, skew)
    assert abs(clock.offset + skew) < timedelta(seconds=1)
    before = await db_now(pool)
    now = clock.now()
    after = await db_now(pool)
    assert before - timedelta(milliseconds=200) <= now <= after + timedelta(milliseconds=200)


@pytest.mark.parametrize("skew", SKEWS, ids=["behind", "ahead"])
async def test_a_job_is_not_dispatched_before_it_is_due_by_the_database(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, skew: timedelta
) -> None:
    config = scheduler_config(migrated_database_url, stack)
    store = SchedulerStore(pool)
    due = (await db_now(pool)) + timedelta(seconds=30)
    [job] = await insert_jobs(pool, DAILY, first_due=due)
    clock = await corrected(pool, skew)
    dispatcher = Dispatcher(store, RunPublisher(bus.jetstream, "t"), lambda: ALL, config, clock)
    outcome = await dispatcher.dispatch_once()
    assert outcome.claimed == 0, "dispatched before its time by the database's clock"
    # The host's own clock, 60 s ahead, would have claimed it: the test can fail.
    if skew > timedelta(0):
        naive = Dispatcher(
            store, RunPublisher(bus.jetstream, "t"), lambda: ALL, config, SkewedClock(skew)
        )
        assert (await naive.dispatch_once()).claimed == 1
    rows = await pool.fetchval("SELECT count(*) FROM job_runs WHERE job_id = $1", job)
    assert rows == (1 if skew > timedelta(0) else 0)


@pytest.mark.parametrize("skew", SKEWS, ids=["behind", "ahead"])
async def test_a_lease_is_never_born_expired(
    pool: asyncpg.Pool, stack: Stack, migrated_database_url: str, skew: timedelta
) -> None:
    config = scheduler_config(migrated_database_url, stack)
    start = datetime(2030, 1, 1, tzinfo=UTC)
    [job] = await insert_jobs(pool, HOURLY, first_due=start)
    await insert_queued_runs(pool, job, [start])
    clock = await corrected(pool, skew)
    servicer = RunLedgerServiceServicer(SchedulerStore(pool), None, config, clock, random.Random(1))
    async with serve(servicer, pool) as stub:
        [result] = await lease(stub, [ref(job, start)])
    assert result.grant.attempt == 1
    granted_until = result.grant.lease_until.ToDatetime(UTC)
    stored = await pool.fetchval(
        "SELECT lease_until FROM job_runs WHERE job_id = $1 AND scheduled_at = $2", job, start
    )
    assert stored == granted_until
    # Measured against the database's clock, the lease has (nearly) all its time left.
    remaining = granted_until - await db_now(pool)
    ttl = timedelta(seconds=config.run_lease_s)
    assert ttl - timedelta(seconds=2) < remaining <= ttl
