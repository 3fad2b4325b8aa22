"""Calendars and several specs per schedule through JobService (calendar.proto).

Each test runs against a real API server and PostgreSQL: calendar CRUD, validation
naming the field, a job's next_run_at following its calendars (also when a calendar is
updated), deletion refused while jobs name a calendar, and previews saying which spec
produced each time and which calendar removed an occurrence.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from datetime import UTC, date, datetime
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2, timestamp_pb2

from sundial.api.model import (
    NewJob,
)
from sundial.api.store import CalendarChanged, Store
from sundial.api.store._base import queries
from sundial.client import CHANNEL_OPTIONS
from sundial.core.clock import ManualClock
from sundial.core.config import DatabaseConfig
from sundial.core.db import close_pool, create_pool
from sundial.core.partition import partition_of
from sundial.core.tls import dial
from sundial.job import JobSpec
from sundial.run import HttpTarget
from sundial.schedule import Calendar, CalendarKind, CronSpec, Schedule
from sundial.v1 import calendar_pb2, job_pb2, job_service_pb2_grpc
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, Tenant, expect_error, make_job

INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXCLUDE = calendar_pb2.CALENDAR_KIND_EXCLUDE
INCLUDE = calendar_pb2.CALENDAR_KIND_INCLUDE
NOW = datetime(2026, 12, 20, tzinfo=UTC)


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


async def create_calendar(
    api: Api, tenant: Tenant, name: str, kind: int, *dates: str
) -> calendar_pb2.Calendar:
    answer = await api.jobs.CreateCalendar(
        pb.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(name=name, kind=kind, dates=list(dates))
        ),
        metadata=tenant.md,
    )
    return answer.calendar


async def test_calendar_crud_normalises_and_pages(api: Api, tenant: Tenant) -> None:
    made = await create_calendar(
        api, tenant, "holidays", EXCLUDE, "12-25", "2026-01-01", "12-25", "01-01"
    )
    assert list(made.dates) == ["2026-01-01", "01-01", "12-25"]
    assert (made.version, made.kind) == (1, EXCLUDE)
    await expect_error(
        api.jobs.CreateCalendar(
            pb.CreateCalendarRequest(calendar=calendar_pb2.Calendar(name="holidays", kind=EXCLUDE)),
            metadata=tenant.md,
        ),
        grpc.StatusCode.ALREADY_EXISTS,
        field="calendar.name",
    )
    for name in ("b-days", "a-days", "c-days"):
        await create_calendar(api, tenant, name, INCLUDE)
    first = await api.jobs.ListCalendars(pb.ListCalendarsRequest(page_size=2), metadata=tenant.md)
    rest = await api.jobs.ListCalendars(
        pb.ListCalendarsRequest(page_size=2, page_token=first.next_page_token), metadata=tenant.md
    )
    assert [c.name for c in [*first.calendars, *rest.calendars]] == [
        "a-days",
        "b-days",
        "c-days",
        "holidays",
    ]
    assert not rest.next_page_token
    got = await api.jobs.GetCalendar(pb.GetCalendarRequest(name="holidays"), metadata=tenant.md)
    assert got.calendar == made
    # Another tenant sees none of it.
    other = await api.tenant("globex")
    await expect_error(
        api.jobs.GetCalendar(pb.GetCalendarRequest(name="holidays"), metadata=other.md),
        grpc.StatusCode.NOT_FOUND,
    )
    listed = await api.jobs.ListCalendars(pb.ListCalendarsRequest(), metadata=other.md)
    assert list(listed.calendars) == []
    # A stale expected_version, then a delete.
    await expect_error(
        api.jobs.DeleteCalendar(
            pb.DeleteCalendarRequest(name="holidays", expected_version=7), metadata=tenant.md
        ),
        grpc.StatusCode.ABORTED,
    )
    await api.jobs.DeleteCalendar(pb.DeleteCalendarRequest(name="a-days"), metadata=tenant.md)
    await expect_error(
        api.jobs.GetCalendar(pb.GetCalendarRequest(name="a-days"), metadata=tenant.md),
        grpc.StatusCode.NOT_FOUND,
    )
    # Every write is in the audit log, naming the calendar.
    events = await api.jobs.ListAuditEvents(pb.ListAuditEventsRequest(), metadata=tenant.md)
    calendar_events = [
        (e.method.rsplit("/", 1)[1], e.resource, e.code)
        for e in events.events
        if "Calendar" in e.method
    ]
    assert calendar_events[0] == ("DeleteCalendar", "calendars/a-days", "OK")
    assert ("CreateCalendar", "calendars/holidays", "ALREADY_EXISTS") in calendar_events


async def test_bad_calendars_and_schedules_name_the_field(api: Api, tenant: Tenant) -> None:
    async def create(calendar: calendar_pb2.Calendar) -> object:
        return await api.jobs.CreateCalendar(
            pb.CreateCalendarRequest(calendar=calendar), metadata=tenant.md
        )

    await expect_error(
        create(calendar_pb2.Calendar(name="x", dates=["12-25"])), INVALID, field="calendar.kind"
    )
    await expect_error(
        create(calendar_pb2.Calendar(name="Bad_Name", kind=EXCLUDE)), INVALID, field="calendar.name"
    )
    await expect_error(
        create(calendar_pb2.Calendar(name="x", kind=EXCLUDE, dates=["2026-12-25", "2026-02-30"])),
        INVALID,
        field="calendar.dates[1]",
    )
    await create_calendar(api, tenant, "holidays", EXCLUDE, "12-25")

    async def job(schedule: job_pb2.Schedule) -> object:
        return await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("j", schedule=schedule)), metadata=tenant.md
        )

    two = [job_pb2.ScheduleSpec(cron="0 9 * * *"), job_pb2.ScheduleSpec(cron="0 25 * * *")]
    await expect_error(job(job_pb2.Schedule(specs=two)), INVALID, field="schedule.specs[1].cron")
    await expect_error(
        job(job_pb2.Schedule(cron="0 9 * * *", specs=two[:1])), INVALID, field="schedule.specs"
    )
    await expect_error(
        job(job_pb2.Schedule(specs=[job_pb2.ScheduleSpec(cron="0 9 * * *")] * 17)),
        INVALID,
        field="schedule.specs",
    )
    await expect_error(
        job(
            job_pb2.Schedule(specs=[job_pb2.ScheduleSpec(), job_pb2.ScheduleSpec(cron="0 9 * * *")])
        ),
        INVALID,
        field="schedule.specs[0]",
    )
    await expect_error(
        job(job_pb2.Schedule(cron="0 9 * * *", calendars=["holidays", "nope"])),
        INVALID,
        field="schedule.calendars[1]",
    )
    await expect_error(
        job(job_pb2.Schedule(cron="0 9 * * *", calendars=["Not A Name"])),
        INVALID,
        field="schedule.calendars[0]",
    )
    await expect_error(
        api.jobs.UpdateCalendar(
            pb.UpdateCalendarRequest(
                calendar=calendar_pb2.Calendar(name="holidays"),
                update_mask=field_mask_pb2.FieldMask(paths=["name"]),
            ),
            metadata=tenant.md,
        ),
        INVALID,
        field="update_mask.paths[0]",
    )
    assert (await api.counts())["jobs"] == 0


async def test_job_with_specs_and_a_calendar_round_trips_and_previews(
    start_api: StartApi,
) -> None:
    api = await start_api(clock=ManualClock(NOW))
    tenant = await api.tenant("acme")
    await create_calendar(api, tenant, "holidays", EXCLUDE, "12-25")
    schedule = job_pb2.Schedule(
        specs=[
            job_pb2.ScheduleSpec(cron="0 9 * * *"),
            job_pb2.ScheduleSpec(cron="0 18 * * *"),
            job_pb2.ScheduleSpec(interval=job_pb2.IntervalSchedule(every={"seconds": 6 * 3600})),
        ],
        calendars=["holidays"],
        time_zone="Australia/Sydney",
    )
    job = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("union", schedule=schedule)), metadata=tenant.md
        )
    ).job
    assert [s.WhichOneof("kind") for s in job.schedule.specs] == ["cron", "cron", "interval"]
    assert list(job.schedule.calendars) == ["holidays"]
    assert not job.schedule.HasField("cron")
    described = await api.jobs.DescribeJob(
        pb.DescribeJobRequest(job_id=job.job_id), metadata=tenant.md
    )
    assert described.job.next_run_at == job.next_run_at
    preview = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(
            schedule=schedule, after=ts(datetime(2026, 12, 24, 12, tzinfo=UTC)), count=4
        ),
        metadata=tenant.md,
    )
    # Sydney is at UTC+11: 25 December is 2026-12-24T13:00Z to 2026-12-25T13:00Z. 09:00
    # local is 22:00Z, 18:00 local 07:00Z; every 6 h is 00, 06, 12, 18 UTC.
    entries = [
        (e.at.ToDatetime(UTC), e.spec_index, e.dropped, e.calendar) for e in preview.fire_times
    ]
    at = lambda d, h: datetime(2026, 12, d, h, tzinfo=UTC)  # noqa: E731
    assert entries == [
        (at(24, 18), 2, True, "holidays"),
        (at(24, 22), 0, True, "holidays"),
        (at(25, 0), 2, True, "holidays"),
        (at(25, 6), 2, True, "holidays"),
        (at(25, 7), 1, True, "holidays"),
        (at(25, 12), 2, True, "holidays"),
        (at(25, 18), 2, False, ""),
        (at(25, 22), 0, False, ""),
        (at(26, 0), 2, False, ""),
        (at(26, 6), 2, False, ""),
    ]
    assert preview.fire_times[0].note == "2026-12-25 is excluded by calendar holidays"
    # ApplyJob of the same definition is UNCHANGED (stored as given: a list stays a list).
    applied = await api.jobs.ApplyJob(
        pb.ApplyJobRequest(job=make_job("union", schedule=schedule, job_id=job.job_id)),
        metadata=tenant.md,
    )
    assert applied.outcome == pb.APPLY_OUTCOME_UNCHANGED


async def test_updating_a_calendar_moves_next_run_at_and_delete_is_refused_while_named(
    start_api: StartApi,
) -> None:
    api = await start_api(clock=ManualClock(NOW))
    tenant = await api.tenant("acme")
    await create_calendar(api, tenant, "closed", EXCLUDE, "2026-12-20", "2026-12-21", "2026-12-22")
    job = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(
                job=make_job(
                    "daily",
                    schedule=job_pb2.Schedule(cron="0 9 * * *", calendars=["closed"]),
                )
            ),
            metadata=tenant.md,
        )
    ).job
    assert job.next_run_at.ToDatetime(UTC) == datetime(2026, 12, 23, 9, tzinfo=UTC)
    digest = (await api.sql("SELECT definition_digest FROM jobs"))[0][0]
    updated = await api.jobs.UpdateCalendar(
        pb.UpdateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="closed", dates=["2026-12-20", "2026-12-23"]),
            update_mask=field_mask_pb2.FieldMask(paths=["dates"]),
            expected_version=1,
        ),
        metadata=tenant.md,
    )
    assert (updated.calendar.version, updated.jobs_rescheduled) == (2, 1)
    assert list(updated.calendar.dates) == ["2026-12-20", "2026-12-23"]
    after = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)).job
    assert after.next_run_at.ToDatetime(UTC) == datetime(2026, 12, 21, 9, tzinfo=UTC)
    assert after.version == job.version  # the tenant's definition did not change
    rows = await api.sql("SELECT definition_digest FROM jobs")
    assert rows[0][0] != digest  # the scheduler reads the new document
    revisions = await api.jobs.ListJobRevisions(
        pb.ListJobRevisionsRequest(job_id=job.job_id), metadata=tenant.md
    )
    assert len(revisions.revisions) == 1
    # An INCLUDE calendar now: only the 24th.
    await api.jobs.UpdateCalendar(
        pb.UpdateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="closed", kind=INCLUDE, dates=["2026-12-24"]),
        ),
        metadata=tenant.md,
    )
    after = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)).job
    assert after.next_run_at.ToDatetime(UTC) == datetime(2026, 12, 24, 9, tzinfo=UTC)
    # Deleting a named calendar is refused and names the job; after the job stops naming
    # it, the delete goes through.
    await expect_error(
        api.jobs.DeleteCalendar(pb.DeleteCalendarRequest(name="closed"), metadata=tenant.md),
        grpc.StatusCode.FAILED_PRECONDITION,
        text=job.job_id,
    )
    await api.jobs.UpdateJob(
        pb.UpdateJobRequest(
            job=job_pb2.Job(job_id=job.job_id, schedule=job_pb2.Schedule(cron="0 9 * * *")),
            update_mask=field_mask_pb2.FieldMask(paths=["schedule"]),
        ),
        metadata=tenant.md,
    )
    after = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)).job
    assert after.next_run_at.ToDatetime(UTC) == datetime(2026, 12, 20, 9, tzinfo=UTC)
    assert (await api.sql("SELECT calendars FROM job_definitions"))[0][0] is None
    await api.jobs.DeleteCalendar(pb.DeleteCalendarRequest(name="closed"), metadata=tenant.md)


async def test_a_calendar_update_never_moves_next_run_at_before_the_last_fire(
    start_api: StartApi,
) -> None:
    clock = ManualClock(NOW)
    api = await start_api(clock=clock)
    tenant = await api.tenant("acme")
    await create_calendar(api, tenant, "closed", EXCLUDE, "2026-12-20")
    job = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(
                job=make_job("d", schedule=job_pb2.Schedule(cron="0 9 * * *", calendars=["closed"]))
            ),
            metadata=tenant.md,
        )
    ).job
    assert job.next_run_at.ToDatetime(UTC) == datetime(2026, 12, 21, 9, tzinfo=UTC)
    # As if the scheduler had dispatched the 21st and the clock had moved on a little.
    await api.sql(
        "UPDATE jobs SET last_fire_at = $1, next_run_at = $2, fired_count = 1",
        datetime(2026, 12, 21, 9, tzinfo=UTC),
        datetime(2026, 12, 22, 9, tzinfo=UTC),
    )
    clock.advance(3600)
    await api.jobs.UpdateCalendar(
        pb.UpdateCalendarRequest(calendar=calendar_pb2.Calendar(name="closed", kind=EXCLUDE)),
        metadata=tenant.md,
    )
    after = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)).job
    # The 20th is allowed again, but passed; the 21st fired: the 22nd stays next.
    assert after.next_run_at.ToDatetime(UTC) == datetime(2026, 12, 22, 9, tzinfo=UTC)


async def test_preview_resolves_the_tenants_calendars(api: Api, tenant: Tenant) -> None:
    await create_calendar(api, tenant, "fridays", INCLUDE, "2027-01-01", "2027-01-08")
    preview = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(
            schedule=job_pb2.Schedule(
                cron="0 12 * * *", time_zone="Pacific/Auckland", calendars=["fridays"]
            ),
            after=ts(datetime(2026, 12, 31, tzinfo=UTC)),
            count=3,
        ),
        metadata=tenant.md,
    )
    fired = [e.local_time for e in preview.fire_times if not e.dropped]
    assert fired == ["2027-01-01T12:00:00+13:00", "2027-01-08T12:00:00+13:00"]
    assert preview.exhausted
    # The days between, and the first after the last date (then nothing can fire).
    assert sum(e.dropped for e in preview.fire_times) == 7
    other = await api.tenant("globex")
    await expect_error(
        api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(
                schedule=job_pb2.Schedule(cron="0 12 * * *", calendars=["fridays"])
            ),
            metadata=other.md,
        ),
        INVALID,
        field="schedule.calendars[0]",
    )


async def test_update_switches_between_one_spec_and_a_list(api: Api, tenant: Tenant) -> None:
    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("j")), metadata=tenant.md)).job

    async def update(schedule: job_pb2.Schedule, path: str) -> job_pb2.Schedule:
        answer = await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=job.job_id, schedule=schedule),
                update_mask=field_mask_pb2.FieldMask(paths=[path]),
            ),
            metadata=tenant.md,
        )
        return answer.job.schedule

    two = [job_pb2.ScheduleSpec(cron="0 1 * * *"), job_pb2.ScheduleSpec(cron="0 2 * * *")]
    listed = await update(job_pb2.Schedule(specs=two), "schedule.specs")
    assert (listed.WhichOneof("spec"), [s.cron for s in listed.specs]) == (
        None,
        ["0 1 * * *", "0 2 * * *"],
    )
    single = await update(job_pb2.Schedule(cron="0 5 * * *"), "schedule.cron")
    assert (single.cron, list(single.specs)) == ("0 5 * * *", [])
    # An empty list is not a schedule: the single spec stays.
    kept = await update(job_pb2.Schedule(), "schedule.specs")
    assert kept.cron == "0 5 * * *"


async def test_a_job_write_with_a_changed_calendars_contents_writes_nothing(
    api: Api, tenant: Tenant
) -> None:
    # The guard behind the managers' retry: a job computed with calendar version 1 is
    # refused once the calendar is at version 2 (its row lock then orders the two).
    await create_calendar(api, tenant, "closed", EXCLUDE, "2026-12-25")
    await api.jobs.UpdateCalendar(
        pb.UpdateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="closed", dates=["2026-12-26"]),
            update_mask=field_mask_pb2.FieldMask(paths=["dates"]),
        ),
        metadata=tenant.md,
    )
    stale = Calendar("closed", CalendarKind.EXCLUDE, frozenset({date(2026, 12, 25)}), version=1)
    job_id = uuid.uuid4()
    new = NewJob(
        job_id=job_id,
        spec=JobSpec(
            name="stale",
            schedule=Schedule(CronSpec("0 9 * * *"), calendars=("closed",)),
            target=HttpTarget(url="http://127.0.0.1:9/x"),
        ),
        partition_id=partition_of(job_id),
        next_run_at=datetime(2026, 12, 26, 9, tzinfo=UTC),
        calendars=[stale],
    )
    pool = await create_pool(DatabaseConfig(database_url=api.database_url))
    try:
        with pytest.raises(CalendarChanged):
            await Store(pool).create_jobs(tenant.tenant_id, [new], NOW)
    finally:
        await close_pool(pool, 5.0)
    assert (await api.counts())["jobs"] == 0


async def test_a_resume_computed_with_a_changed_calendar_writes_nothing(
    api: Api, tenant: Tenant
) -> None:
    # ResumeJob recomputes next_run_at from the job's copy of its calendars; if that
    # calendar changed since (UpdateCalendar does not bump the job's version), the
    # store refuses the write, and the manager computes again with the new copy.
    await create_calendar(api, tenant, "shut", EXCLUDE, "2030-12-25")
    schedule = job_pb2.Schedule(cron="0 9 * * *", calendars=["shut"])
    created = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("resumable", schedule=schedule, paused=True)),
            metadata=tenant.md,
        )
    ).job
    job_id = uuid.UUID(created.uid)
    stale = Calendar("shut", CalendarKind.EXCLUDE, frozenset({date(2030, 12, 25)}), version=1)
    await api.jobs.UpdateCalendar(
        pb.UpdateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="shut", dates=["2030-12-26"]),
            update_mask=field_mask_pb2.FieldMask(paths=["dates"]),
        ),
        metadata=tenant.md,
    )
    pool = await create_pool(DatabaseConfig(database_url=api.database_url))
    try:
        with pytest.raises(CalendarChanged):
            await Store(pool).resume_job(
                tenant.tenant_id,
                job_id,
                read_version=created.version,
                note="",
                next_run_at=datetime(2030, 12, 26, 9, tzinfo=UTC),
                now=NOW,
                calendars=[stale],
            )
    finally:
        await close_pool(pool, 5.0)
    [paused] = await api.sql("SELECT paused FROM jobs WHERE job_id = $1", job_id)
    assert paused[0] is True
    # Through the API the resume reads the current copy and succeeds.
    resumed = await api.jobs.ResumeJob(
        pb.ResumeJobRequest(job_id=created.job_id), metadata=tenant.md
    )
    assert not resumed.job.paused


async def test_concurrent_job_writes_and_calendar_updates_end_consistent(
    start_api: StartApi,
) -> None:
    # Creates naming a calendar race updates of it: every job must end with the final
    # contents and the next_run_at they give (no deadlock, no stale copy).
    api = await start_api(clock=ManualClock(NOW))
    tenant = await api.tenant("acme")
    await create_calendar(api, tenant, "closed", EXCLUDE)
    # A create computes again up to 5 times when the calendar changed meanwhile, then
    # answers ABORTED CONCURRENT_CHANGE: with 5 updates, one create can lose all 5. The
    # shipped client's channel retries that answer after its pushback.
    client = dial(api.address, None, CHANNEL_OPTIONS)
    stub = job_service_pb2_grpc.JobServiceStub(client)

    async def make(i: int) -> None:
        schedule = job_pb2.Schedule(cron="0 9 * * *", calendars=["closed"])
        await stub.CreateJob(
            pb.CreateJobRequest(job=make_job(f"j{i}", schedule=schedule)),
            metadata=tenant.md,
            timeout=30,
        )

    async def close(days: int) -> None:
        dates = [f"2026-12-{20 + d}" for d in range(days)]
        await api.jobs.UpdateCalendar(
            pb.UpdateCalendarRequest(
                calendar=calendar_pb2.Calendar(name="closed", dates=dates),
                update_mask=field_mask_pb2.FieldMask(paths=["dates"]),
            ),
            metadata=tenant.md,
        )

    async with client:
        await asyncio.gather(*(make(i) for i in range(30)), *(close(d) for d in range(1, 6)))
    final = (
        await api.jobs.GetCalendar(pb.GetCalendarRequest(name="closed"), metadata=tenant.md)
    ).calendar
    expected_next = datetime(2026, 12, 20 + len(final.dates), 9, tzinfo=UTC)
    rows = await api.sql(
        "SELECT j.next_run_at, d.calendars FROM jobs j JOIN job_definitions d USING (job_id)"
    )
    assert len(rows) == 30
    for next_run_at, calendars in rows:
        assert next_run_at == expected_next
        assert json.loads(calendars) == [
            {"name": "closed", "kind": "EXCLUDE", "dates": list(final.dates)}
        ]


async def test_backfill_follows_the_calendars(start_api: StartApi) -> None:
    api = await start_api(clock=ManualClock(NOW))
    tenant = await api.tenant("acme")
    await create_calendar(api, tenant, "closed", EXCLUDE, "2026-12-15")
    schedule = job_pb2.Schedule(
        specs=[job_pb2.ScheduleSpec(cron="0 9 * * *"), job_pb2.ScheduleSpec(cron="0 9 * * *")],
        time_zone="Europe/Berlin",
        calendars=["closed"],
    )
    job = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("b", schedule=schedule)), metadata=tenant.md
        )
    ).job
    answer = await api.jobs.BackfillJob(
        pb.BackfillJobRequest(
            job_id=job.job_id,
            start_time=ts(datetime(2026, 12, 14, tzinfo=UTC)),
            end_time=ts(datetime(2026, 12, 17, tzinfo=UTC)),
        ),
        metadata=tenant.md,
    )
    # 08:00 UTC is 09:00 in Berlin; the 15th is closed, and the two identical specs make
    # one run a day.
    assert [r.scheduled_at.ToDatetime(UTC) for r in answer.runs] == [
        datetime(2026, 12, 14, 8, tzinfo=UTC),
        datetime(2026, 12, 16, 8, tzinfo=UTC),
    ]


async def copy_job(api: Api, job_id: str, copies: int) -> None:
    """Insert ``copies`` copies of a job's rows (named ``<name>-<i>``)."""
    await api.sql(
        """
        WITH src AS (SELECT gen_random_uuid() AS id, g FROM generate_series(1, $2) g),
        j AS (
            INSERT INTO jobs (job_id, tenant_id, name, partition_id, next_run_at, paused,
                              created_at, updated_at, definition_digest)
            SELECT src.id, j.tenant_id, j.name || '-' || g, j.partition_id, j.next_run_at,
                   j.paused, j.created_at, j.updated_at, j.definition_digest
              FROM src, jobs j WHERE j.job_id = $1
        ), d AS (
            INSERT INTO job_definitions (job_id, schedule, target, policies, payload, labels,
                                         description, calendars, calendar_keys)
            SELECT src.id, d.schedule, d.target, d.policies, d.payload, d.labels,
                   d.description, d.calendars, d.calendar_keys
              FROM src, job_definitions d WHERE d.job_id = $1
        )
        INSERT INTO job_stats (job_id, updated_at) SELECT id, now() FROM src
        """,
        uuid.UUID(job_id),
        copies,
    )


def _plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("Plans", ()) for n in _plan_nodes(child))]


async def test_a_calendar_write_reads_only_its_own_tenants_jobs(start_api: StartApi) -> None:
    # Tenants A and B both name a calendar `holidays`; B has 2,000 jobs naming its own.
    # A's UpdateCalendar and DeleteCalendar find A's 3 jobs through the index of
    # tenant-qualified names (migration 0017) and never read, lock or change B's.
    api = await start_api(clock=ManualClock(NOW))
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    for tenant in (a, b):
        await create_calendar(api, tenant, "holidays", EXCLUDE, "2026-12-20")
    schedule = job_pb2.Schedule(cron="0 9 * * *", calendars=["holidays"])
    a_jobs = [
        (
            await api.jobs.CreateJob(
                pb.CreateJobRequest(job=make_job(f"a{i}", schedule=schedule)), metadata=a.md
            )
        ).job
        for i in range(3)
    ]
    b_job = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("b", schedule=schedule)), metadata=b.md
        )
    ).job
    # B's other 1,999 jobs, and 500 of A's naming no calendar: copies of jobs written
    # through the API (with 3 jobs in all, A's would be found through its tenant).
    await copy_job(api, b_job.job_id, 1999)
    plain = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("p")), metadata=a.md)).job
    await copy_job(api, plain.job_id, 499)
    await api.sql("ANALYZE jobs, job_definitions")
    b_before = await api.sql(
        "SELECT j.job_id, j.next_run_at, j.definition_digest, d.calendars"
        " FROM jobs j JOIN job_definitions d USING (job_id) WHERE j.tenant_id = 'tenant-b'"
    )
    assert len(b_before) == 2000
    assert {r["next_run_at"] for r in b_before} == {datetime(2026, 12, 21, 9, tzinfo=UTC)}
    keys = await api.sql("SELECT DISTINCT calendar_keys FROM job_definitions")
    assert sorted(r[0] for r in keys if r[0]) == [["tenant-a/holidays"], ["tenant-b/holidays"]]

    # The plan, custom or generic (the API's statements are prepared): the index probe
    # returns A's 3 rows, and no node reads a row of B's.
    for mode, (query, args) in itertools.product(
        ("force_custom_plan", "force_generic_plan"),
        (
            (queries.calendar_jobs, ("tenant-a", "holidays", 10)),
            (queries.lock_calendar_jobs, ("tenant-a", "holidays")),
        ),
    ):
        await api.sql(f"SET plan_cache_mode = {mode}")
        explained = await api.sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}", *args)
        nodes = _plan_nodes(json.loads(explained[0][0])[0]["Plan"])
        probes = [n for n in nodes if n.get("Index Name") == "job_definitions_calendar_keys_idx"]
        assert [n["Actual Rows"] for n in probes] == [3], (mode, nodes)
        for node in nodes:
            assert node["Actual Rows"] <= 3, (mode, node)
            for removed in ("Filter", "Index Recheck", "Join Filter"):
                assert node.get(f"Rows Removed by {removed}", 0) == 0, (mode, node)
    await api.sql("RESET plan_cache_mode")

    updated = await api.jobs.UpdateCalendar(
        pb.UpdateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="holidays", dates=["2026-12-20", "2026-12-21"]),
            update_mask=field_mask_pb2.FieldMask(paths=["dates"]),
        ),
        metadata=a.md,
    )
    assert updated.jobs_rescheduled == 3
    for job in a_jobs:
        after = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=a.md)).job
        assert after.next_run_at.ToDatetime(UTC) == datetime(2026, 12, 22, 9, tzinfo=UTC)
    b_after = await api.sql(
        "SELECT j.job_id, j.next_run_at, j.definition_digest, d.calendars"
        " FROM jobs j JOIN job_definitions d USING (job_id) WHERE j.tenant_id = 'tenant-b'"
    )
    assert sorted(map(tuple, b_after)) == sorted(map(tuple, b_before))

    # A's delete is refused by A's own jobs only; once they name no calendar it goes
    # through, while B's jobs still name B's `holidays`.
    refused = await expect_error(
        api.jobs.DeleteCalendar(pb.DeleteCalendarRequest(name="holidays"), metadata=a.md),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    named = refused.details() or ""
    assert all(j.job_id in named for j in a_jobs) and b_job.job_id not in named, named
    for job in a_jobs:
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=job.job_id, schedule=job_pb2.Schedule(cron="0 9 * * *")),
                update_mask=field_mask_pb2.FieldMask(paths=["schedule"]),
            ),
            metadata=a.md,
        )
    rows = await api.sql(
        "SELECT d.calendar_keys FROM job_definitions d JOIN jobs j USING (job_id)"
        " WHERE j.tenant_id = 'tenant-a'"
    )
    assert len(rows) == 503 and {r[0] for r in rows} == {None}
    await api.jobs.DeleteCalendar(pb.DeleteCalendarRequest(name="holidays"), metadata=a.md)
    await expect_error(
        api.jobs.DeleteCalendar(pb.DeleteCalendarRequest(name="holidays"), metadata=b.md),
        grpc.StatusCode.FAILED_PRECONDITION,
        text="calendar holidays is named by",
    )
