"""End to end at the database: a job created through the API with two specs and a
holiday calendar is dispatched by the real dispatcher only on allowed local days, one
run per instant, and follows a calendar update at its next claim (the definition digest
changes, so the dispatcher's document cache reads the new contents)."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import asyncpg
import pytest
from google.protobuf import field_mask_pb2

from sundial.core.bus import Bus
from sundial.core.clock import ManualClock
from sundial.devstack import Stack
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from sundial.v1 import calendar_pb2, job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import launch, make_job
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import runs_of

pytestmark = pytest.mark.timeout(120)

SYDNEY = ZoneInfo("Australia/Sydney")
START = datetime(2026, 12, 22, 12, tzinfo=UTC)  # 23:00 on the 22nd in Sydney (UTC+11)


async def test_runs_only_on_allowed_local_days_and_follow_a_calendar_update(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str
) -> None:
    clock = ManualClock(START)
    api = await launch(migrated_database_url, clock=clock)
    try:
        tenant = await api.tenant("calendar-tenant")
        await api.jobs.CreateCalendar(
            pb.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(
                    name="holidays", kind=calendar_pb2.CALENDAR_KIND_EXCLUDE, dates=["12-25"]
                )
            ),
            metadata=tenant.md,
        )
        # 09:00 and 18:00 local, and every 24 h from 11:00 UTC (22:00 local in summer
        # time), which a fourth spec names again: three runs a local day.
        schedule = job_pb2.Schedule(
            specs=[
                job_pb2.ScheduleSpec(cron="0 9 * * *"),
                job_pb2.ScheduleSpec(cron="0 18 * * *"),
                job_pb2.ScheduleSpec(
                    interval=job_pb2.IntervalSchedule(
                        every={"seconds": 24 * 3600}, offset={"seconds": 11 * 3600}
                    )
                ),
                job_pb2.ScheduleSpec(cron="0 22 * * *"),  # names the interval's instants
            ],
            time_zone="Australia/Sydney",
            calendars=["holidays"],
        )
        created = await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("three-a-day", schedule=schedule)),
            metadata=tenant.md,
        )
        job_id = uuid.UUID(created.job.uid)
        config = scheduler_config(migrated_database_url, stack)
        dispatcher = Dispatcher(
            SchedulerStore(pool),
            RunPublisher(bus.jetstream, "test"),
            lambda: range(256),
            config,
            clock,
        )

        async def run_until(end: datetime) -> None:
            for _ in range(200):  # bounded: a few runs a day
                next_run_at = await pool.fetchval(
                    "SELECT next_run_at FROM jobs WHERE job_id = $1", job_id
                )
                if next_run_at is None or next_run_at > end:
                    return
                clock.advance((next_run_at - clock.now()).total_seconds())
                outcome = await dispatcher.dispatch_once()
                assert outcome.claimed == 1
            raise AssertionError("the job kept coming due")

        await run_until(datetime(2026, 12, 25, 13, tzinfo=UTC))  # the end of 25 Dec local
        # Then the 26th and the 28th become holidays too. The update moves next_run_at
        # past the 26th; the 28th is skipped only if the dispatcher plans with the new
        # contents (its cached document of the old digest would fire on the 28th).
        await api.jobs.UpdateCalendar(
            pb.UpdateCalendarRequest(
                calendar=calendar_pb2.Calendar(name="holidays", dates=["12-25", "12-26", "12-28"]),
                update_mask=field_mask_pb2.FieldMask(paths=["dates"]),
            ),
            metadata=tenant.md,
        )
        await run_until(datetime(2026, 12, 29, 13, tzinfo=UTC))
        runs = await runs_of(pool, job_id)
        instants = [r["scheduled_at"] for r in runs]
        assert len(instants) == len(set(instants))
        by_day: dict[date, list[int]] = {}
        for at in instants:
            local = at.astimezone(SYDNEY)
            by_day.setdefault(local.date(), []).append(local.hour)
        assert by_day == {
            date(2026, 12, 23): [9, 18, 22],
            date(2026, 12, 24): [9, 18, 22],
            date(2026, 12, 27): [9, 18, 22],
            date(2026, 12, 29): [9, 18, 22],
        }
        assert all(r["kind"] == "scheduled" for r in runs)
        next_run_at = await pool.fetchval("SELECT next_run_at FROM jobs WHERE job_id = $1", job_id)
        assert next_run_at == datetime(2026, 12, 29, 22, tzinfo=UTC)  # 09:00 on the 30th
        assert clock.now() - START < timedelta(days=7)
    finally:
        await api.shutdown()
