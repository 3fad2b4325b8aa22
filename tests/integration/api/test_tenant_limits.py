"""Two tenants on one API: tenant A's heaviest legal calls never stall tenant B's calls
(docs/design.md section 7, "Tenants and their limits")."""

from __future__ import annotations

import asyncio
import time
from datetime import date, timedelta

import grpc

from sundial.client import CHANNEL_OPTIONS, error_details
from sundial.core.tls import dial
from sundial.v1 import calendar_pb2, job_pb2, job_service_pb2_grpc
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, expect_error, make_job

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
    schedule = job_pb2.Schedule()
    for i in range(16):
        schedule.specs.add(cron=f"{i} * * * *")
    return schedule


async def test_a_tenants_schedule_computations_are_held_to_its_cpu_share(
    start_api: StartApi,
) -> None:
    api = await start_api(tenant_compute_share=0.01, tenant_compute_burst_s=0.01)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    heavy = pb.PreviewScheduleRequest(schedule=sixteen_specs(), count=1000)
    first = await api.jobs.PreviewSchedule(heavy, metadata=a.md)
    assert len([f for f in first.fire_times if not f.dropped]) == 1000
    # A's first preview used far more than its 0.01 s: the next is refused until its
    # share (1 % of a core) has paid it back, with that delay to wait.
    refused = await expect_error(
        api.jobs.PreviewSchedule(heavy, metadata=a.md),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        text="exceed their share of 0.01 of a core",
    )
    delay = error_details(refused)["RetryInfo"].retry_delay.ToTimedelta()  # type: ignore[attr-defined]
    assert delay > timedelta(seconds=1)
    # B's share is its own.
    answer = await api.jobs.PreviewSchedule(heavy, metadata=b.md)
    assert len([f for f in answer.fire_times if not f.dropped]) == 1000
