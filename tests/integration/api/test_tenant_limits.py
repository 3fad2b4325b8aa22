"""Two tenants on one API: tenant A's heaviest legal calls never stall tenant B's calls
(docs/design.md section 7, "Tenants and their limits")."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, date, datetime, timedelta

import asyncpg
import grpc
import pytest
from google.protobuf import field_mask_pb2

from sundial.api.kit import paging
from sundial.api.kit.paging import PAGE_BYTES
from sundial.client import CHANNEL_OPTIONS, error_details
from sundial.core.clock import ManualClock
from sundial.core.tls import dial
from sundial.v1 import admin_pb2 as apb
from sundial.v1 import bulk_pb2, calendar_pb2, job_pb2, job_service_pb2_grpc
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, Tenant, expect_error, make_job

EXCLUDE = calendar_pb2.CALENDAR_KIND_EXCLUDE
EVERY_DAY = sorted(
    {f"{d.month:02d}-{d.day:02d}" for d in (date(2024, 1, 1) + timedelta(i) for i in range(366))}
)


def sixteen_specs_excluded_every_day() -> job_pb2.Schedule:
    schedule = job_pb2.Schedule(time_zone="Europe/Berlin", calendars=["never"])
    for i in range(16):
        schedule.specs.add(cron=f"{i} {i} * * *")
    return schedule


async def test_a_schedule_that_never_fires_is_refused_and_another_tenants_calls_stay_prompt(
    api: Api,
) -> None:
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    await api.jobs.CreateCalendar(
        pb.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="never", kind=EXCLUDE, dates=EVERY_DAY)
        ),
        metadata=a.md,
    )
    b_job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("b")), metadata=b.md)).job

    stop = asyncio.Event()
    b_latencies: list[float] = []

    async def b_reads() -> None:
        while not stop.is_set():
            started = time.monotonic()
            await api.jobs.GetJob(pb.GetJobRequest(job_id=b_job.job_id), metadata=b.md, timeout=1)
            b_latencies.append(time.monotonic() - started)
            # B reads 100 times a second, within its own API rate (200/s): unpaced, it
            # would be refused RATE_LIMITED once A's computations no longer slow the API.
            await asyncio.sleep(0.01)

    reader = asyncio.create_task(b_reads())
    try:
        for _ in range(3):
            # Refused at write time, naming the field and how far the search looked.
            await expect_error(
                api.jobs.CreateJob(
                    pb.CreateJobRequest(
                        job=make_job("a", schedule=sixteen_specs_excluded_every_day())
                    ),
                    metadata=a.md,
                ),
                grpc.StatusCode.INVALID_ARGUMENT,
                field="schedule",
                text="a search looks at most 5 years ahead",
            )
            # A preview of 1,000 answers what its bounded search found.
            await api.jobs.PreviewSchedule(
                pb.PreviewScheduleRequest(schedule=sixteen_specs_excluded_every_day(), count=1000),
                metadata=a.md,
                timeout=5,
            )
    finally:
        stop.set()
        await reader  # a GetJob of B that missed its 1 s deadline fails the test here
    assert b_latencies, "B's reads never ran"
    jobs = await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=a.md)
    assert list(jobs.jobs) == []


async def test_a_tenant_past_its_rate_is_refused_with_a_retry_delay_and_another_is_not(
    start_api: StartApi,
) -> None:
    api = await start_api(tenant_rate_per_s=5.0, tenant_rate_burst=5)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    for _ in range(5):  # the burst
        await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=a.md)
    refused = await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(), metadata=a.md),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="exceeds its API rate of 5 calls/s",
    )
    details = error_details(refused)
    assert details["ErrorInfo"].reason == "RATE_LIMITED"  # type: ignore[attr-defined]
    delay = details["RetryInfo"].retry_delay.ToTimedelta()  # type: ignore[attr-defined]
    assert timedelta(0) < delay <= timedelta(seconds=0.2)
    # B's bucket is its own: A's refusals cost B nothing.
    for _ in range(5):
        await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=b.md)
    # The Python client's channel waits the pushback and retries by itself: ten calls
    # past an empty bucket all succeed, paced at the rate.
    async with dial(api.address, None, CHANNEL_OPTIONS) as channel:
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        started = time.monotonic()
        for _ in range(10):
            await stub.ListJobs(pb.ListJobsRequest(), metadata=a.md, timeout=10)
        assert time.monotonic() - started >= 1.0  # ~2 s at 5/s: the rate held


def sixteen_specs() -> job_pb2.Schedule:
    # Each names days of the week, so croniter walks it (the costly path: times of day
    # alone are iterated from a list, fast enough that 1,000 fire times of sixteen such
    # specs could come within the test's 0.01 s burst plus 0.01 s).
    schedule = job_pb2.Schedule()
    for i in range(16):
        schedule.specs.add(cron=f"{i} * * * MON-FRI")
    return schedule


async def test_a_tenants_schedule_computations_are_held_to_its_cpu_share(
    start_api: StartApi,
) -> None:
    # A share of 0.1 % of a core: the bucket refills 1 ms a second, also while the first
    # preview's worker process starts (seconds on a loaded machine; with 1 % the refill
    # during that start could pay the preview back, and the next was not refused).
    api = await start_api(tenant_compute_share=0.001, tenant_compute_burst_s=0.001)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    heavy = pb.PreviewScheduleRequest(schedule=sixteen_specs(), count=1000)
    first = await api.jobs.PreviewSchedule(heavy, metadata=a.md)
    assert len([f for f in first.fire_times if not f.dropped]) == 1000
    # A's first preview used far more than its 1 ms: the next is refused until its
    # share has paid it back, with that delay to wait.
    refused = await expect_error(
        api.jobs.PreviewSchedule(heavy, metadata=a.md),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="exceed their share of 0.001 of a core",
    )
    delay = error_details(refused)["RetryInfo"].retry_delay.ToTimedelta()  # type: ignore[attr-defined]
    assert delay > timedelta(seconds=1)
    # B's share is its own.
    answer = await api.jobs.PreviewSchedule(heavy, metadata=b.md)
    assert len([f for f in answer.fire_times if not f.dropped]) == 1000


async def include_mondays(api: Api, tenants: list[Tenant], first: date) -> None:
    """Each of ``tenants`` gets the calendar ``mondays``: 300 Mondays from ``first``."""
    mondays = [(first + timedelta(weeks=w)).isoformat() for w in range(300)]
    for tenant in tenants:
        await api.jobs.CreateCalendar(
            pb.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(
                    name="mondays", kind=calendar_pb2.CALENDAR_KIND_INCLUDE, dates=mondays
                )
            ),
            metadata=tenant.md,
        )


async def test_a_write_time_search_through_calendars_runs_within_the_tenants_cpu_share(
    start_api: StartApi,
) -> None:
    """The longest search a write can make (16 Tuesday crons against a calendar of
    Mondays: every step lands on a refused day, 4,096 steps) runs in the API's worker
    pool, charged to the tenant: its refusal names the field from there, and once A's
    share is spent A's next write is refused RESOURCE_EXHAUSTED while B's are not."""
    api = await start_api(tenant_compute_share=0.01, tenant_compute_burst_s=0.01)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    first = date(2027, 1, 4)
    tuesdays = job_pb2.Schedule(calendars=["mondays"])
    for i in range(16):
        tuesdays.specs.add(cron=f"{i} {i} * * 2")
    await include_mondays(api, [a, b], first)
    await expect_error(
        api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("a", schedule=tuesdays)), metadata=a.md
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="schedule",
        text="(4096 steps; a search looks at most 5 years ahead)",
    )
    await expect_error(
        api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("a", schedule=tuesdays)), metadata=a.md
        ),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="exceed their share of 0.01 of a core",
    )
    # B's share is its own: B's search runs, and is refused for its schedule alone.
    await expect_error(
        api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("b", schedule=tuesdays)), metadata=b.md
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="schedule",
    )
    assert list((await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=a.md)).jobs) == []


async def test_a_jitter_check_through_calendars_runs_within_the_tenants_cpu_share(
    start_api: StartApi,
) -> None:
    """A schedule whose first fire time is found at once, but whose jitter check samples
    50 fire times through a calendar of Mondays (tens of milliseconds): the check runs in
    the pool, charged to A, so A's next write is refused for its share; B's is not."""
    api = await start_api(tenant_compute_share=0.01, tenant_compute_burst_s=0.01)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    first = date.today() + timedelta(days=7 - date.today().weekday())
    schedule = job_pb2.Schedule(calendars=["mondays"])
    schedule.specs.add(cron="0 9 * * 1")
    for i in range(15):
        schedule.specs.add(cron=f"{i} {i} * * 2")
    schedule.jitter.FromSeconds(60)
    await include_mondays(api, [a, b], first)
    created = await api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job("a-1", schedule=schedule)), metadata=a.md
    )
    assert created.job.next_run_at.ToDatetime().weekday() == 0
    await expect_error(
        api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("a-2", schedule=schedule)), metadata=a.md
        ),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="exceed their share of 0.01 of a core",
    )
    await api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job("b", schedule=schedule)), metadata=b.md
    )


async def test_a_revisions_page_stops_at_its_byte_budget_and_payloads_come_when_asked(
    api: Api,
) -> None:
    tenant = await api.tenant("tenant-a")
    job = make_job("big", payload=b"x" * (256 * 1024))
    job.target.http.headers["X-Downstream"] = "downstream"
    created = (await api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=tenant.md)).job
    for i in range(24):
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=created.job_id, description=f"change {i}"),
                update_mask=field_mask_pb2.FieldMask(paths=["description"]),
            ),
            metadata=tenant.md,
        )
    # The default view: no payload, header names without values; all 25 in one page.
    basic = await api.jobs.ListJobRevisions(
        pb.ListJobRevisionsRequest(job_id=created.job_id, page_size=1000), metadata=tenant.md
    )
    assert len(basic.revisions) == 25 and not basic.next_page_token
    assert all(r.job.payload == b"" for r in basic.revisions)
    assert all(dict(r.job.target.http.headers) == {"X-Downstream": ""} for r in basic.revisions)
    # The full view: 25 x 256 KiB would be 6.4 MB; each page stops at the budget.
    seen: list[int] = []
    token = ""
    while True:
        page = await api.jobs.ListJobRevisions(
            pb.ListJobRevisionsRequest(
                job_id=created.job_id, page_size=1000, page_token=token, view=pb.JOB_VIEW_FULL
            ),
            metadata=tenant.md,
        )
        assert page.ByteSize() <= PAGE_BYTES
        assert all(len(r.job.payload) == 256 * 1024 for r in page.revisions)
        seen += [r.version for r in page.revisions]
        token = page.next_page_token
        if not token:
            break
    assert seen == list(range(25, 0, -1))
    # An unknown view names the field.
    await expect_error(
        api.jobs.ListJobRevisions(
            pb.ListJobRevisionsRequest(job_id=created.job_id, view=7), metadata=tenant.md
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="view",
    )


async def test_every_list_page_stops_at_its_byte_budget(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paging, "PAGE_BYTES", 64 * 1024)
    tenant = await api.tenant("tenant-a")
    dates = [(date(2030, 1, 1) + timedelta(days=i)).isoformat() for i in range(1000)]
    for i in range(12):
        await api.jobs.CreateCalendar(
            pb.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(name=f"cal-{i:02d}", kind=EXCLUDE, dates=dates)
            ),
            metadata=tenant.md,
        )
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job(f"job-{i:02d}", payload=b"y" * 20_000)),
            metadata=tenant.md,
        )
    calendars = await api.jobs.ListCalendars(
        pb.ListCalendarsRequest(page_size=1000), metadata=tenant.md
    )
    assert 1 <= len(calendars.calendars) < 12 and calendars.next_page_token
    assert calendars.ByteSize() <= 64 * 1024
    jobs = await api.jobs.ListJobs(pb.ListJobsRequest(page_size=1000), metadata=tenant.md)
    assert 1 <= len(jobs.jobs) < 12 and jobs.next_page_token
    assert jobs.ByteSize() <= 64 * 1024


async def test_calendars_per_tenant_are_capped(start_api: StartApi) -> None:
    api = await start_api(max_calendars=2)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")

    def calendar(name: str) -> pb.CreateCalendarRequest:
        return pb.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(name=name, kind=EXCLUDE, dates=["12-25"])
        )

    for name in ("one", "two"):
        await api.jobs.CreateCalendar(calendar(name), metadata=a.md)
    refused = await expect_error(
        api.jobs.CreateCalendar(calendar("three"), metadata=a.md),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="limit of 2 calendars",
    )
    assert error_details(refused)["ErrorInfo"].metadata["quota"] == "max_calendars"  # type: ignore[attr-defined]
    listed = await api.jobs.ListCalendars(pb.ListCalendarsRequest(), metadata=a.md)
    assert [c.name for c in listed.calendars] == ["one", "two"]
    for name in ("one", "two"):  # B's count is its own
        await api.jobs.CreateCalendar(calendar(name), metadata=b.md)


async def test_triggered_and_backfilled_runs_waiting_per_tenant_are_capped(
    start_api: StartApi,
) -> None:
    api = await start_api(max_waiting_requested_runs=5)  # no scheduler: nothing starts
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    job_a = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("a")), metadata=a.md)).job
    job_b = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("b")), metadata=b.md)).job
    backfill = pb.BackfillJobRequest(job_id=job_a.job_id)
    backfill.start_time.FromDatetime(datetime(2026, 1, 1, tzinfo=UTC))
    backfill.end_time.FromDatetime(datetime(2026, 1, 5, tzinfo=UTC))  # 4 nightly runs
    assert len((await api.jobs.BackfillJob(backfill, metadata=a.md)).runs) == 4
    await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job_a.job_id), metadata=a.md)
    refused = await expect_error(
        api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job_a.job_id), metadata=a.md),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="limit of 5 triggered and backfilled runs",
    )
    assert error_details(refused)["ErrorInfo"].metadata["usage"] == "5"  # type: ignore[attr-defined]
    backfill.start_time.FromDatetime(datetime(2025, 1, 1, tzinfo=UTC))
    backfill.end_time.FromDatetime(datetime(2025, 1, 3, tzinfo=UTC))
    await expect_error(
        api.jobs.BackfillJob(backfill, metadata=a.md), grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    runs = await api.jobs.ListRuns(pb.ListRunsRequest(job_id=job_a.job_id), metadata=a.md)
    assert len(runs.runs) == 5  # the refused calls wrote nothing
    for _ in range(5):  # B's allowance is its own
        await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job_b.job_id), metadata=b.md)


async def test_revisions_and_audit_events_are_kept_for_their_retention(
    start_api: StartApi,
) -> None:
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    api = await start_api(
        clock=clock,
        revisions_per_job=3,
        revision_retention_days=90,
        deleted_job_revision_days=30,
        audit_retention_days=60,
    )
    tenant = await api.tenant("tenant-a")
    kept = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("kept")), metadata=tenant.md)
    ).job
    gone = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("gone")), metadata=tenant.md)
    ).job
    for i in range(5):
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=kept.job_id, description=f"v{i + 2}"),
                update_mask=field_mask_pb2.FieldMask(paths=["description"]),
            ),
            metadata=tenant.md,
        )
    await api.jobs.DeleteJob(pb.DeleteJobRequest(job_id=gone.job_id), metadata=tenant.md)
    retention = api.service.components[0]

    async def versions(job_id: str) -> list[int]:
        rows = await api.sql(
            "SELECT version FROM job_revisions WHERE job_id = $1 ORDER BY version DESC",
            uuid.UUID(job_id),
        )
        return [r["version"] for r in rows]

    audit_before = len(await api.sql("SELECT 1 FROM audit_events"))
    assert audit_before >= 7
    await retention.purge_once()  # type: ignore[attr-defined]
    assert await versions(kept.uid) == [6, 5, 4]  # the newest 3
    assert await versions(gone.uid) == [1]  # deleted today: still within its grace
    clock.advance(31 * 86400)
    await retention.purge_once()  # type: ignore[attr-defined]
    assert await versions(gone.uid) == []
    assert len(await api.sql("SELECT 1 FROM audit_events")) == audit_before
    clock.advance(60 * 86400)
    await retention.purge_once()  # type: ignore[attr-defined]
    assert await versions(kept.uid) == [6]  # older than 90 days, but the newest stays
    assert await api.sql("SELECT 1 FROM audit_events") == []


async def test_a_tenants_concurrent_heavy_calls_leave_another_tenants_calls_prompt(
    start_api: StartApi,
) -> None:
    # Twelve concurrent bulk calls of A's, each over 5,000 jobs and far within A's rate,
    # held every connection of the replica's pool (10) and the event loop 80 ms a
    # selection: B's GetJob waited up to 1.2 s. A's calls now execute four at a time
    # (SUNDIAL_TENANT_CONCURRENT_CALLS, the rest waiting for A's own) and a selection is
    # decoded in turns of the loop: B's calls are answered within their deadline
    # throughout (its slowest 0.18-0.24 s in four runs; 0.49-0.63 s with no gate).
    api = await start_api(tenant_concurrent_calls=4)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    for batch in range(5):
        await api.jobs.BatchCreateJobs(
            pb.BatchCreateJobsRequest(
                jobs=[make_job(f"a-{batch}-{i}", labels={"k": "v"}) for i in range(1000)]
            ),
            metadata=a.md,
            timeout=60,
        )
    b_job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("b")), metadata=b.md)).job
    stop = asyncio.Event()
    a_calls = 0

    async def a_bulk() -> None:
        nonlocal a_calls
        while not stop.is_set():
            await api.jobs.PauseJobs(
                bulk_pb2.PauseJobsRequest(selector="k=v", limit=5000), metadata=a.md, timeout=60
            )
            await api.jobs.ResumeJobs(
                bulk_pb2.ResumeJobsRequest(selector="k=v", limit=5000), metadata=a.md, timeout=60
            )
            a_calls += 2

    callers = [asyncio.create_task(a_bulk()) for _ in range(12)]
    b_answers = 0
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            # Within its deadline every time (DEADLINE_EXCEEDED fails the test).
            await api.jobs.GetJob(pb.GetJobRequest(job_id=b_job.job_id), metadata=b.md, timeout=1)
            b_answers += 1
            await asyncio.sleep(0.02)  # B's own pace: 50 calls a second, within its rate
    finally:
        stop.set()
        await asyncio.gather(*callers)
    assert a_calls >= 12, a_calls  # A's calls went on meanwhile
    assert b_answers >= 20, b_answers


async def _revision_versions(api: Api, job_id: str) -> list[int]:
    rows = await api.sql(
        "SELECT version FROM job_revisions WHERE job_id = $1 ORDER BY version DESC",
        uuid.UUID(job_id),
    )
    return [r["version"] for r in rows]


async def _describe(api: Api, tenant: Tenant, job_id: str, times: int) -> None:
    for i in range(times):
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=job_id, description=f"change {i}"),
                update_mask=field_mask_pb2.FieldMask(paths=["description"]),
            ),
            metadata=tenant.md,
        )


async def test_a_jobs_newest_revisions_are_kept_as_it_changes_by_its_tenants_limit(
    start_api: StartApi,
) -> None:
    # The newest-N rule holds where a history grows (migration 0028's trigger), with no
    # retention pass: A's own limit of 2, B the operator's default of 3.
    api = await start_api(revisions_per_job=3)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    await api.admin.UpdateTenant(
        apb.UpdateTenantRequest(
            tenant=apb.Tenant(tenant_id=a.tenant_id, quotas=apb.Quotas(revisions_per_job=2)),
            update_mask=field_mask_pb2.FieldMask(paths=["quotas.revisions_per_job"]),
        ),
        metadata=api.admin_md,
    )
    jobs = {}
    for tenant in (a, b):
        created = await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("changing")), metadata=tenant.md
        )
        await _describe(api, tenant, created.job.job_id, 5)
        jobs[tenant.tenant_id] = created.job.uid
    assert await _revision_versions(api, jobs[a.tenant_id]) == [6, 5]
    assert await _revision_versions(api, jobs[b.tenant_id]) == [6, 5, 4]
    listed = await api.jobs.ListJobRevisions(
        pb.ListJobRevisionsRequest(job_id=jobs[b.tenant_id]), metadata=b.md
    )
    assert [r.version for r in listed.revisions] == [6, 5, 4]


async def test_a_retention_pass_reads_only_what_it_deletes(start_api: StartApi) -> None:
    # B's old history (a job changed three times, a job deleted) is due to go; A's 2,000
    # jobs, each with its one revision, and this month's audit events stay. The pass's
    # statements read the rows they delete, not the tables (they read every revision
    # and scanned the audit events, once per batch of every pass).
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    api = await start_api(
        clock=clock,
        revision_retention_days=90,
        deleted_job_revision_days=30,
        audit_retention_days=60,
    )
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    changed = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("changed")), metadata=b.md)
    ).job
    await _describe(api, b, changed.job_id, 3)
    deleted_job = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("deleted")), metadata=b.md)
    ).job
    await api.jobs.DeleteJob(pb.DeleteJobRequest(job_id=deleted_job.job_id), metadata=b.md)
    clock.advance(91 * 86400)
    steady_ids = []
    for batch in range(2):
        created = await api.jobs.BatchCreateJobs(
            pb.BatchCreateJobsRequest(jobs=[make_job(f"steady-{batch}-{i}") for i in range(1000)]),
            metadata=a.md,
        )
        steady_ids += [job.job_id for job in created.jobs]
    await _describe(api, a, steady_ids[0], 2)  # superseded, but young
    await api.sql(  # A's calls of this month, as its audit events
        "INSERT INTO audit_events (tenant_id, at, actor, method, resource, code, request_id)"
        " SELECT $1, $2, 'token', 'sundial.v1.JobService/UpdateJob', '', 'OK', ''"
        "   FROM generate_series(1, 3000)",
        a.tenant_id,
        clock.now(),
    )
    await api.sql("ANALYZE audit_events, job_revisions")  # as autovacuum does
    assert (await api.sql("SELECT count(*) AS n FROM job_revisions"))[0]["n"] >= 2000
    young_events = (
        await api.sql(
            "SELECT count(*) AS n FROM audit_events WHERE at >= $1", clock.now() - timedelta(days=1)
        )
    )[0]["n"]
    assert young_events >= 3000

    now = clock.now()
    deleted, read = await _purge_reads(api, now)
    assert deleted["job_revisions"] == 4  # B's three superseded revisions and the deleted job's
    assert deleted["audit_events"] >= 5
    for table in ("job_revisions", "audit_events"):
        assert read[table] <= deleted[table] + 2, (table, read, deleted)

    # The pass itself: the same rows go, everything else stays.
    await api.service.components[0].purge_once()  # type: ignore[attr-defined]
    assert await _revision_versions(api, changed.uid) == [4]
    assert await _revision_versions(api, deleted_job.uid) == []
    steady = await api.sql(
        "SELECT count(*) AS n FROM job_revisions WHERE tenant_id = $1", a.tenant_id
    )
    assert steady[0]["n"] == 2002
    assert (await api.sql("SELECT count(*) AS n FROM audit_events"))[0]["n"] == young_events
    # The next pass finds nothing to delete, and reads next to nothing finding it out.
    deleted, read = await _purge_reads(api, now)
    assert deleted == {"job_revisions": 0, "audit_events": 0}
    assert read["job_revisions"] <= 2 and read["audit_events"] <= 2, read


async def _purge_reads(api: Api, now: datetime) -> tuple[dict[str, int], dict[str, int]]:
    """The retention pass's statements run once at ``now`` (90, 30 and 60 days) in a
    transaction rolled back: the rows each deleted, and the rows it read of its table."""
    from sundial.api.store._base import queries  # noqa: PLC0415 (the pass's own statements)

    conn = await asyncpg.connect(api.database_url)
    try:
        async with conn.transaction():
            statuses = {
                "job_revisions": await conn.execute(
                    queries.purge_old_revisions,
                    now - timedelta(days=90),
                    now - timedelta(days=30),
                    5000,
                ),
                "audit_events": await conn.execute(
                    queries.purge_old_audit_events, now - timedelta(days=60), 5000
                ),
            }
            read = {
                r["relname"]: r["seq_tup_read"] + r["idx_tup_fetch"]
                for r in await conn.fetch(
                    "SELECT relname, seq_tup_read, coalesce(idx_tup_fetch, 0) AS idx_tup_fetch"
                    " FROM pg_stat_xact_user_tables"
                    " WHERE relname IN ('job_revisions', 'audit_events')"
                )
            }
            raise _RollBack
    except _RollBack:
        pass
    finally:
        await conn.close()
    return {table: int(status.rsplit(" ", 1)[-1]) for table, status in statuses.items()}, read


class _RollBack(Exception):
    """Leaves a transaction without committing it."""


async def test_a_tenants_own_quotas_override_the_operators_defaults(start_api: StartApi) -> None:
    api = await start_api(max_calendars=2, max_waiting_requested_runs=2)
    created = await api.admin.CreateTenant(
        apb.CreateTenantRequest(
            tenant=apb.Tenant(
                tenant_id="big",
                display_name="big",
                quotas=apb.Quotas(max_calendars=3, max_waiting_requested_runs=3),
            )
        ),
        metadata=api.admin_md,
    )
    quotas = created.tenant.quotas
    assert (quotas.max_calendars, quotas.max_waiting_requested_runs) == (3, 3)
    assert quotas.revisions_per_job == 0  # the operator's default
    token = await api.admin.CreateApiToken(
        apb.CreateApiTokenRequest(tenant_id="big", role=apb.TOKEN_ROLE_TENANT, description="t"),
        metadata=api.admin_md,
    )
    md = (("authorization", f"Bearer {token.secret}"),)
    for name in ("one", "two", "three"):
        await api.jobs.CreateCalendar(
            pb.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(name=name, kind=EXCLUDE, dates=["12-25"])
            ),
            metadata=md,
        )
    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("j")), metadata=md)).job
    for _ in range(3):
        await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job.job_id), metadata=md)
    await expect_error(
        api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job.job_id), metadata=md),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="limit of 3 triggered",
    )
    # 0 sets a quota back to the operator's default; a value out of range names it.
    updated = await api.admin.UpdateTenant(
        apb.UpdateTenantRequest(
            tenant=apb.Tenant(tenant_id="big", quotas=apb.Quotas(max_calendars=0)),
            update_mask=field_mask_pb2.FieldMask(paths=["quotas.max_calendars"]),
        ),
        metadata=api.admin_md,
    )
    assert updated.tenant.quotas.max_calendars == 0
    assert updated.tenant.quotas.max_waiting_requested_runs == 3  # untouched
    await expect_error(
        api.jobs.CreateCalendar(
            pb.CreateCalendarRequest(
                calendar=calendar_pb2.Calendar(name="four", kind=EXCLUDE, dates=["12-25"])
            ),
            metadata=md,
        ),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="limit of 2 calendars",
    )
    await expect_error(
        api.admin.UpdateTenant(
            apb.UpdateTenantRequest(
                tenant=apb.Tenant(tenant_id="big", quotas=apb.Quotas(revisions_per_job=-1)),
                update_mask=field_mask_pb2.FieldMask(paths=["quotas.revisions_per_job"]),
            ),
            metadata=api.admin_md,
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="tenant.quotas.revisions_per_job",
    )
