"""Dispatch transaction: one run per occurrence, misfire rules, max_runs, end_time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from sundial.core.bus import Bus
from sundial.core.clock import ManualClock
from sundial.core.definition import JobPolicies, OverlapPolicy
from sundial.devstack import Stack
from sundial.schedule import CronSpec, IntervalSpec, MisfirePolicy, Schedule
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import insert_jobs, runs_of

ALL = range(256)
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOURLY = Schedule(CronSpec("0 * * * *"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def dispatcher(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> Dispatcher:
    config = scheduler_config(migrated_database_url, stack)
    return Dispatcher(
        SchedulerStore(pool), RunPublisher(bus.jetstream, "test"), lambda: ALL, config, clock
    )


async def test_due_job_gets_one_run_and_advances(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    [job] = await insert_jobs(pool, HOURLY, first_due=T0)
    outcome = await dispatcher.dispatch_once()
    assert (outcome.claimed, outcome.inserted) == (1, 1)
    assert len(outcome.batches) == 1 and outcome.batches[0].dispatch_seq > 0
    again = await dispatcher.dispatch_once()
    assert again.claimed == 0
    [run] = await runs_of(pool, job)
    assert run["scheduled_at"] == T0 and run["status"] == "queued"
    # The acknowledged publish moved check_at to the lost-message recheck.
    assert run["check_at"] == T0 + timedelta(seconds=120)
    assert run["lateness_ms"] == 0
    job_row = await pool.fetchrow("SELECT next_run_at, fired_count FROM jobs WHERE job_id=$1", job)
    assert job_row["next_run_at"] == T0 + timedelta(hours=1)
    assert job_row["fired_count"] == 1


async def test_not_due_job_is_left_alone(pool: asyncpg.Pool, dispatcher: Dispatcher) -> None:
    await insert_jobs(pool, HOURLY, first_due=T0 + timedelta(seconds=1))
    assert (await dispatcher.dispatch_once()).claimed == 0


@pytest.mark.parametrize(
    ("policy", "expected"),
    [(MisfirePolicy.RUN_ONCE, 1), (MisfirePolicy.SKIP, 0), (MisfirePolicy.CATCH_UP, 3)],
)
async def test_outage_of_three_hourly_occurrences(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    clock: ManualClock,
    policy: MisfirePolicy,
    expected: int,
) -> None:
    # Due at 12:00, 13:00, 14:00; the scheduler comes back at 14:30.
    policies = JobPolicies(misfire=policy, overlap=OverlapPolicy.ALLOW_ALL)
    [job] = await insert_jobs(pool, HOURLY, first_due=T0, policies=policies)
    clock.advance(2.5 * 3600)
    await dispatcher.dispatch_once()
    runs = await runs_of(pool, job)
    assert len(runs) == expected
    if policy is MisfirePolicy.RUN_ONCE:
        assert runs[0]["scheduled_at"] == T0 + timedelta(hours=2)
    if policy is MisfirePolicy.CATCH_UP:
        assert [r["scheduled_at"] for r in runs] == [T0 + timedelta(hours=h) for h in range(3)]
    next_run_at = await pool.fetchval("SELECT next_run_at FROM jobs WHERE job_id = $1", job)
    assert next_run_at == T0 + timedelta(hours=3)
    missed = await pool.fetchval("SELECT missed_count FROM job_stats WHERE job_id = $1", job)
    assert missed == 3 - expected


async def test_max_runs_ends_the_schedule(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    schedule = Schedule(IntervalSpec(timedelta(minutes=1)), max_runs=2)
    policies = JobPolicies(overlap=OverlapPolicy.ALLOW_ALL)
    [job] = await insert_jobs(pool, schedule, first_due=T0, policies=policies)
    for _ in range(3):
        await dispatcher.dispatch_once()
        clock.advance(60)
    assert len(await runs_of(pool, job)) == 2
    row = await pool.fetchrow("SELECT next_run_at, fired_count FROM jobs WHERE job_id=$1", job)
    assert row["next_run_at"] is None and row["fired_count"] == 2


async def test_end_time_ends_the_schedule(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    schedule = Schedule(IntervalSpec(timedelta(minutes=1)), end_time=T0 + timedelta(seconds=30))
    [job] = await insert_jobs(pool, schedule, first_due=T0)
    await dispatcher.dispatch_once()
    assert len(await runs_of(pool, job)) == 1
    assert await pool.fetchval("SELECT next_run_at FROM jobs WHERE job_id=$1", job) is None


async def test_jittered_run_is_inserted_now_and_published_when_due(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    schedule = Schedule(CronSpec("0 * * * *"), jitter=timedelta(minutes=30))
    [job] = await insert_jobs(pool, schedule, first_due=T0)
    outcome = await dispatcher.dispatch_once()
    [run] = await runs_of(pool, job)
    assert run["scheduled_at"] == T0  # the run key keeps the nominal time
    if run["check_at"] > T0:  # jitter drew a delay: not published yet
        assert outcome.batches == [] and run["dispatch_seq"] == 0
    assert await pool.fetchval(
        "SELECT next_run_at FROM jobs WHERE job_id=$1", job
    ) == T0 + timedelta(hours=1)
