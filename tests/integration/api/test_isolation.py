"""Tenant isolation: tenant B gets NOT_FOUND for every call on tenant A's job and run,
exactly as for an id that does not exist, and nothing of A's changes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
import pytest_asyncio
from google.protobuf import field_mask_pb2, timestamp_pb2

from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, expect_error, make_job, names

MISSING_JOB = "00000000-0000-4000-8000-000000000000"


def _ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


# Each entry: a call on (job_id, run_key, scheduled_at) through the given stub.
Call = Callable[[Any, str, str, timestamp_pb2.Timestamp, Any], Awaitable[Any]]

CALLS: dict[str, Call] = {
    "GetJob": lambda s, j, k, t, md: s.GetJob(pb.GetJobRequest(job_id=j), metadata=md),
    "DescribeJob": lambda s, j, k, t, md: s.DescribeJob(
        pb.DescribeJobRequest(job_id=j), metadata=md
    ),
    "UpdateJob": lambda s, j, k, t, md: s.UpdateJob(
        pb.UpdateJobRequest(
            job=job_pb2.Job(job_id=j, description="stolen"),
            update_mask=field_mask_pb2.FieldMask(paths=["description"]),
        ),
        metadata=md,
    ),
    "UpdateJob(version)": lambda s, j, k, t, md: s.UpdateJob(
        pb.UpdateJobRequest(
            job=job_pb2.Job(job_id=j, description="stolen"),
            update_mask=field_mask_pb2.FieldMask(paths=["description"]),
            expected_version=1,
        ),
        metadata=md,
    ),
    "DeleteJob": lambda s, j, k, t, md: s.DeleteJob(pb.DeleteJobRequest(job_id=j), metadata=md),
    "DeleteJob(version)": lambda s, j, k, t, md: s.DeleteJob(
        pb.DeleteJobRequest(job_id=j, expected_version=1), metadata=md
    ),
    "PauseJob": lambda s, j, k, t, md: s.PauseJob(pb.PauseJobRequest(job_id=j), metadata=md),
    "ResumeJob": lambda s, j, k, t, md: s.ResumeJob(pb.ResumeJobRequest(job_id=j), metadata=md),
    "TriggerJob": lambda s, j, k, t, md: s.TriggerJob(pb.TriggerJobRequest(job_id=j), metadata=md),
    "BackfillJob": lambda s, j, k, t, md: s.BackfillJob(
        pb.BackfillJobRequest(
            job_id=j,
            start_time=_ts(datetime.now(UTC) - timedelta(days=2)),
            end_time=_ts(datetime.now(UTC) - timedelta(days=1)),
        ),
        metadata=md,
    ),
    "PreviewSchedule(job_id)": lambda s, j, k, t, md: s.PreviewSchedule(
        pb.PreviewScheduleRequest(schedule=job_pb2.Schedule(cron="H * * * *"), job_id=j),
        metadata=md,
    ),
    "ListRuns": lambda s, j, k, t, md: s.ListRuns(pb.ListRunsRequest(job_id=j), metadata=md),
    "GetRun(ref)": lambda s, j, k, t, md: s.GetRun(
        pb.GetRunRequest(ref=run_pb2.RunRef(job_id=j, scheduled_at=t)), metadata=md
    ),
    "GetRun(key)": lambda s, j, k, t, md: s.GetRun(pb.GetRunRequest(run_key=k), metadata=md),
    "ReplayRun": lambda s, j, k, t, md: s.ReplayRun(pb.ReplayRunRequest(run_key=k), metadata=md),
    "CancelRun": lambda s, j, k, t, md: s.CancelRun(pb.CancelRunRequest(run_key=k), metadata=md),
}


Victim = tuple[Tenant, job_pb2.Job, run_pb2.Run]


@pytest.fixture
async def victim(api: Api) -> Victim:
    """Tenant A with a job and a (dead, so replayable) run."""
    return await make_victim(api)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_victim(shared_api: Api) -> Victim:
    """:func:`victim` once for the module: the calls that must change nothing share it."""
    return await make_victim(shared_api)


async def make_victim(api: Api) -> Victim:
    a = await api.tenant("tenant-a")
    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("secret")), metadata=a.md)).job
    run = (await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job.job_id), metadata=a.md)).run
    await api.sql(
        "UPDATE job_runs SET status = 'dead', finished_at = now() WHERE job_id = $1::uuid",
        job.job_id,
    )
    return a, job, run


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("name", sorted(CALLS))
async def test_foreign_ids_answer_like_missing_ones(
    shared_api: Api, shared_victim: Victim, shared_tenant: Tenant, name: str
) -> None:
    api, (a, job, run), b = shared_api, shared_victim, shared_tenant
    call = CALLS[name]
    before = await api.sql("SELECT * FROM jobs ORDER BY job_id")
    runs_before = await api.sql("SELECT * FROM job_runs ORDER BY scheduled_at")
    foreign = await expect_error(
        call(api.jobs, job.job_id, run.run_key, run.scheduled_at, b.md),
        grpc.StatusCode.NOT_FOUND,
    )
    missing_key = f"{MISSING_JOB}@{run.run_key.split('@', 1)[1]}"
    missing = await expect_error(
        call(api.jobs, MISSING_JOB, missing_key, run.scheduled_at, b.md),
        grpc.StatusCode.NOT_FOUND,
    )
    # The message differs only by the id it echoes: nothing says "exists elsewhere".
    assert foreign.details().replace(job.job_id, "ID") == missing.details().replace(
        MISSING_JOB, "ID"
    )
    assert await api.sql("SELECT * FROM jobs ORDER BY job_id") == before
    assert await api.sql("SELECT * FROM job_runs ORDER BY scheduled_at") == runs_before
    # A's own view is untouched.
    own = await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=a.md)
    assert own.job == job


async def test_lists_never_show_another_tenants_jobs(
    api: Api, victim: tuple[Tenant, job_pb2.Job, run_pb2.Run]
) -> None:
    a, _job, _run = victim
    b = await api.tenant("tenant-b")
    await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("mine")), metadata=b.md)
    for request in (
        pb.ListJobsRequest(),
        pb.ListJobsRequest(name_prefix="sec"),
        pb.ListJobsRequest(paused=False),
    ):
        listed = await api.jobs.ListJobs(request, metadata=b.md)
        assert "secret" not in names(listed.jobs)
    assert names((await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=b.md)).jobs) == ["mine"]
    assert names((await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=a.md)).jobs) == ["secret"]
    # Names are unique per tenant only: B may use A's name, and learns nothing from it.
    same = await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("secret")), metadata=b.md)
    assert same.job.tenant_id == "tenant-b"
    # A page token of A's used by B pages through B's own jobs only.
    page = await api.jobs.ListJobs(pb.ListJobsRequest(page_size=1), metadata=a.md)
    assert not page.next_page_token
    # request ids are per tenant: B reusing A's id creates B's own job.
    await api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job("r"), request_id="same"), metadata=a.md
    )
    other = await api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job("r"), request_id="same"), metadata=b.md
    )
    assert other.job.tenant_id == "tenant-b"
