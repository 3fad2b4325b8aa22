"""JobService job RPCs through a real server on PostgreSQL: happy paths and their errors."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2

from sundial.api.model import NewJob
from sundial.api.store import Store
from sundial.core.clock import ManualClock
from sundial.core.config import DatabaseConfig
from sundial.core.db import close_pool, create_pool
from sundial.core.partition import partition_of
from sundial.job import JobSpec
from sundial.run import HttpTarget
from sundial.schedule import CronSpec, Schedule
from sundial.v1 import job_pb2, job_service_pb2_grpc
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, Tenant, expect_error, make_job, names

NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID = grpc.StatusCode.INVALID_ARGUMENT
ABORTED = grpc.StatusCode.ABORTED


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


def seconds(n: float) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromTimedelta(timedelta(seconds=n))
    return message


async def create(api: Api, tenant: Tenant, job: job_pb2.Job, request_id: str = "") -> job_pb2.Job:
    response = await api.jobs.CreateJob(
        pb.CreateJobRequest(job=job, request_id=request_id), metadata=tenant.md
    )
    return response.job


async def test_create_job_fills_server_fields_and_defaults(api: Api, tenant: Tenant) -> None:
    before = datetime.now(UTC)
    job = await create(api, tenant, make_job("nightly", cron="0 3 * * *", payload=b"{}"))
    job_id = uuid.UUID(job.job_id)
    assert str(job_id) == job.job_id  # lowercase, hyphenated
    assert job.tenant_id == "acme"
    assert job.version == 1
    assert job.create_time.ToDatetime(UTC) >= before.replace(microsecond=0)
    # The first fire: the next 03:00 UTC after now.
    next_run = job.next_run_at.ToDatetime(UTC)
    assert next_run > before and next_run - before <= timedelta(days=1)
    assert (next_run.hour, next_run.minute, next_run.second) == (3, 0, 0)
    # Documented defaults are filled and returned.
    assert job.schedule.time_zone == "UTC"
    assert job.schedule.dst.gap == job_pb2.GAP_POLICY_AUTO
    assert job.schedule.dst.fold == job_pb2.FOLD_POLICY_AUTO
    assert job.schedule.HasField("jitter")
    assert job.policies.misfire == job_pb2.MISFIRE_POLICY_RUN_ONCE
    assert job.policies.misfire_threshold.ToTimedelta() == timedelta(seconds=60)
    assert job.policies.overlap == job_pb2.OVERLAP_POLICY_SKIP
    assert job.policies.retry.max_attempts == 5
    assert job.policies.retry.base_delay.ToTimedelta() == timedelta(seconds=10)
    assert job.policies.retry.max_delay.ToTimedelta() == timedelta(hours=1)
    assert job.policies.run_timeout.ToTimedelta() == timedelta(minutes=30)
    assert job.policies.catchup_window.ToTimedelta() == timedelta(hours=24)
    assert job.policies.max_catchup == 100
    assert job.target.http.method == "POST"
    # The stored row carries the hash partition the scheduler will poll.
    rows = await api.sql("SELECT partition_id, next_run_at FROM jobs WHERE job_id = $1", job_id)
    assert rows[0]["partition_id"] == partition_of(job_id)
    assert rows[0]["next_run_at"] == next_run
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)
    assert got.job == job


async def test_create_job_with_interval_once_and_grpc_target(api: Api, tenant: Tenant) -> None:
    interval = make_job(
        "every-5s",
        schedule=job_pb2.Schedule(
            interval=job_pb2.IntervalSchedule(every=seconds(5), offset=seconds(1))
        ),
        target=job_pb2.Target(
            grpc=job_pb2.GrpcTarget(
                address="127.0.0.1:50051", plaintext=True, metadata={"x-team": "billing"}
            )
        ),
    )
    created = await create(api, tenant, interval)
    assert created.target.grpc.metadata["x-team"] == "billing"
    next_run = created.next_run_at.ToDatetime(UTC)
    assert (next_run.timestamp() - 1) % 5 == 0  # epoch + offset + k * every

    at = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    once = await create(api, tenant, make_job("once", schedule=job_pb2.Schedule(once=ts(at))))
    assert once.next_run_at.ToDatetime(UTC) == at
    # A `once` slightly in the past (within misfire_threshold) fires at once.
    recent = datetime.now(UTC) - timedelta(seconds=30)
    late = await create(api, tenant, make_job("late", schedule=job_pb2.Schedule(once=ts(recent))))
    assert late.next_run_at.ToDatetime(UTC) == recent.replace(microsecond=recent.microsecond)


async def test_create_paused_job_keeps_note(api: Api, tenant: Tenant) -> None:
    job = await create(api, tenant, make_job(paused=True, pause_note="not yet"))
    assert job.paused and job.pause_note == "not yet"
    assert job.HasField("next_run_at")


async def test_duplicate_name_is_already_exists_and_changes_nothing(
    api: Api, tenant: Tenant
) -> None:
    await create(api, tenant, make_job("dup"))
    before = await api.counts()
    await expect_error(
        create(api, tenant, make_job("dup")), grpc.StatusCode.ALREADY_EXISTS, field="name"
    )
    assert await api.counts() == before


async def test_create_is_idempotent_by_request_id(api: Api, tenant: Tenant) -> None:
    first = await create(api, tenant, make_job("idem"), request_id="req-1")
    again = await create(api, tenant, make_job("idem"), request_id="req-1")
    assert again.job_id == first.job_id
    assert (await api.counts())["jobs"] == 1
    # The same request_id with a different body is refused and writes nothing.
    await expect_error(
        create(api, tenant, make_job("idem-2"), request_id="req-1"), INVALID, field="request_id"
    )
    # Request ids are per method: BatchCreateJobs may reuse it.
    batch = await api.jobs.BatchCreateJobs(
        pb.BatchCreateJobsRequest(jobs=[make_job("other")], request_id="req-1"),
        metadata=tenant.md,
    )
    assert names(batch.jobs) == ["other"]
    # Once the job is deleted, a retry does not silently create a second one.
    await api.jobs.DeleteJob(pb.DeleteJobRequest(job_id=first.job_id), metadata=tenant.md)
    await expect_error(create(api, tenant, make_job("idem"), request_id="req-1"), NOT_FOUND)
    assert (await api.counts())["jobs"] == 1


async def test_batch_create_all_or_nothing(api: Api, tenant: Tenant) -> None:
    jobs = [make_job(f"import-{i:04d}", cron=f"{i % 60} * * * *") for i in range(300)]
    response = await api.jobs.BatchCreateJobs(
        pb.BatchCreateJobsRequest(jobs=jobs, request_id="import-1"), metadata=tenant.md
    )
    assert names(response.jobs) == [f"import-{i:04d}" for i in range(300)]
    assert len({job.job_id for job in response.jobs}) == 300
    again = await api.jobs.BatchCreateJobs(
        pb.BatchCreateJobsRequest(jobs=jobs, request_id="import-1"), metadata=tenant.md
    )
    assert [j.job_id for j in again.jobs] == [j.job_id for j in response.jobs]
    before = await api.counts()
    assert before["jobs"] == before["job_count"] == 300

    # One bad job fails the whole batch, naming its index.
    bad = [make_job("fresh-0"), make_job("fresh-1", cron="61 * * * *"), make_job("fresh-2")]
    await expect_error(
        api.jobs.BatchCreateJobs(pb.BatchCreateJobsRequest(jobs=bad), metadata=tenant.md),
        INVALID,
        field="jobs[1].schedule.cron",
    )
    # A name taken by an existing job, or twice in the batch.
    clash = [make_job("fresh-0"), make_job("import-0007")]
    await expect_error(
        api.jobs.BatchCreateJobs(pb.BatchCreateJobsRequest(jobs=clash), metadata=tenant.md),
        grpc.StatusCode.ALREADY_EXISTS,
        field="jobs[1].name",
    )
    twice = [make_job("fresh-0"), make_job("fresh-1"), make_job("fresh-0")]
    await expect_error(
        api.jobs.BatchCreateJobs(pb.BatchCreateJobsRequest(jobs=twice), metadata=tenant.md),
        INVALID,
        field="jobs[2].name",
    )
    for size in (0, 1001):
        await expect_error(
            api.jobs.BatchCreateJobs(
                pb.BatchCreateJobsRequest(jobs=[make_job(f"x{i}") for i in range(size)]),
                metadata=tenant.md,
            ),
            INVALID,
            field="jobs",
        )
    assert await api.counts() == before


async def test_a_batch_names_its_taken_name_or_id_whatever_else_fails_and_keeps_no_claim(
    api: Api,
) -> None:
    """The unique constraints find a taken name or client id (no read before the
    insert); the answer still names the first clashing entry, a name before an id, also
    when the quota would refuse the batch too, and the failed call keeps no request id."""
    tenant = await api.tenant(max_jobs=3)
    taken = make_job("taken")
    taken.job_id = "taken-id"
    await create(api, tenant, taken)
    named = make_job("other")
    named.job_id = "taken-id"

    async def batch(jobs: list[job_pb2.Job], request_id: str = "") -> pb.BatchCreateJobsResponse:
        request = pb.BatchCreateJobsRequest(jobs=jobs, request_id=request_id)
        return await api.jobs.BatchCreateJobs(request, metadata=tenant.md)

    cases = [
        ([make_job("a"), make_job("taken")], "jobs[1].name"),
        ([make_job("a"), named], "jobs[1].job_id"),
        ([named, make_job("b"), make_job("taken")], "jobs[2].name"),
        # Three more would exceed max_jobs (3, one used) as well.
        ([make_job("a"), make_job("b"), make_job("taken")], "jobs[2].name"),
        ([make_job("a"), make_job("b"), named], "jobs[2].job_id"),
    ]
    for jobs, field in cases:
        await expect_error(batch(jobs, "import"), grpc.StatusCode.ALREADY_EXISTS, field=field)
    # Nothing was written, the request id included: it serves another batch.
    created = await batch([make_job("a"), make_job("b")], "import")
    assert names(created.jobs) == ["a", "b"]
    await expect_error(batch([make_job("c"), make_job("d")]), grpc.StatusCode.RESOURCE_EXHAUSTED)


async def test_work_done_while_the_insert_runs_leaves_it_all_or_nothing(
    api: Api, tenant: Tenant
) -> None:
    """JobStore.create_jobs' ``meanwhile`` (where BatchCreateJobs builds its answer,
    while PostgreSQL runs the insert) is called once; when it raises, its error is
    raised, nothing is written (a single job's insert too, though alone it would run in
    autocommit), and the connection serves the next write (a pool of one)."""

    def new(name: str) -> NewJob:
        job_id = uuid.uuid4()
        return NewJob(
            job_id=job_id,
            spec=JobSpec(
                name=name,
                schedule=Schedule(CronSpec("0 9 * * *")),
                target=HttpTarget(url="http://127.0.0.1:9/x"),
            ),
            partition_id=partition_of(job_id),
            next_run_at=datetime(2030, 1, 1, 9, tzinfo=UTC),
        )

    class Broken(Exception):
        pass

    def broken() -> None:
        raise Broken

    before = await api.counts()
    now = datetime.now(UTC)
    pool = await create_pool(
        DatabaseConfig(database_url=api.database_url, pool_min_size=1, pool_max_size=1)
    )
    try:
        store = Store(pool)
        for jobs, single in (([new("a"), new("b")], False), ([new("a")], True)):
            with pytest.raises(Broken):
                await store.create_jobs(
                    tenant.tenant_id, jobs, now, single=single, meanwhile=broken
                )
            assert await api.counts() == before
        calls: list[int] = []
        await store.create_jobs(
            tenant.tenant_id,
            [new("a"), new("b")],
            now,
            single=False,
            meanwhile=lambda: calls.append(len(calls)),
        )
    finally:
        await close_pool(pool, 5.0)
    assert calls == [0]
    after = await api.counts()
    assert after["jobs"] == after["job_definitions"] == before["jobs"] + 2


async def test_get_job_errors(api: Api, tenant: Tenant) -> None:
    await expect_error(
        api.jobs.GetJob(pb.GetJobRequest(), metadata=tenant.md), INVALID, field="job_id"
    )
    # A well-formed client id the tenant does not use is unknown, like an unknown uid;
    # text that can be neither is malformed.
    await expect_error(
        api.jobs.GetJob(pb.GetJobRequest(job_id="nope"), metadata=tenant.md), NOT_FOUND
    )
    await expect_error(
        api.jobs.GetJob(pb.GetJobRequest(job_id="No Such Id!"), metadata=tenant.md),
        INVALID,
        field="job_id",
    )
    await expect_error(
        api.jobs.GetJob(
            pb.GetJobRequest(job_id="00000000-0000-4000-8000-000000000000"), metadata=tenant.md
        ),
        NOT_FOUND,
    )


async def test_describe_job(api: Api, tenant: Tenant) -> None:
    job = await create(
        api,
        tenant,
        make_job(
            "ny",
            schedule=job_pb2.Schedule(cron="30 2 * * *", time_zone="America/New_York"),
        ),
    )
    # Runs of every kind show newest first; active ones are counted.
    for _ in range(12):
        await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job.job_id), metadata=tenant.md)
    described = await api.jobs.DescribeJob(
        pb.DescribeJobRequest(job_id=job.job_id), metadata=tenant.md
    )
    assert described.job.job_id == job.job_id
    assert len(described.recent_runs) == 10
    times = [r.scheduled_at.ToDatetime() for r in described.recent_runs]
    assert times == sorted(times, reverse=True)
    assert described.active_runs == 12
    upcoming = [f for f in described.upcoming if not f.dropped]
    assert len(upcoming) == 10
    assert all(f.local_time.startswith(("20",)) for f in upcoming)
    assert all(f.due_at == f.at for f in upcoming)  # no jitter


async def test_list_jobs_filters_and_pages(api: Api, tenant: Tenant) -> None:
    specs = [
        make_job("billing-a", labels={"team": "billing", "tier": "1"}),
        make_job("billing-b", labels={"team": "billing"}, paused=True),
        make_job("crm-sync", labels={"team": "crm"}),
        make_job("crm-\u00e9t\u00e9", labels={"team": "crm"}),
        make_job("zeta"),
    ]
    await api.jobs.BatchCreateJobs(pb.BatchCreateJobsRequest(jobs=specs), metadata=tenant.md)

    async def listing(**fields: object) -> list[str]:
        found: list[str] = []
        token = ""
        while True:
            page = await api.jobs.ListJobs(
                pb.ListJobsRequest(page_size=2, page_token=token, **fields), metadata=tenant.md
            )
            assert len(page.jobs) <= 2
            found += names(page.jobs)
            token = page.next_page_token
            if not token:
                return found

    assert await listing() == ["billing-a", "billing-b", "crm-sync", "crm-\u00e9t\u00e9", "zeta"]
    assert await listing(labels={"team": "billing"}) == ["billing-a", "billing-b"]
    assert await listing(labels={"team": "billing", "tier": "1"}) == ["billing-a"]
    assert await listing(name_prefix="crm-") == ["crm-sync", "crm-\u00e9t\u00e9"]
    assert await listing(name_prefix="crm-\u00e9") == ["crm-\u00e9t\u00e9"]
    assert await listing(paused=True) == ["billing-b"]
    assert await listing(paused=False, labels={"team": "billing"}) == ["billing-a"]
    assert await listing(name_prefix="nothing") == []

    first = await api.jobs.ListJobs(pb.ListJobsRequest(page_size=1), metadata=tenant.md)
    # A token is only valid with the filters it came from.
    await expect_error(
        api.jobs.ListJobs(
            pb.ListJobsRequest(page_token=first.next_page_token, name_prefix="crm"),
            metadata=tenant.md,
        ),
        INVALID,
        field="page_token",
    )
    await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(page_token="garbage!"), metadata=tenant.md),
        INVALID,
        field="page_token",
    )
    await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(page_size=-1), metadata=tenant.md),
        INVALID,
        field="page_size",
    )
    # Default 50; above 1,000 is lowered, not refused.
    assert (
        len((await api.jobs.ListJobs(pb.ListJobsRequest(page_size=5000), metadata=tenant.md)).jobs)
        == 5
    )


async def test_update_job_with_mask_and_version(api: Api, tenant: Tenant) -> None:
    job = await create(api, tenant, make_job("upd", labels={"a": "1"}, description="first"))
    change = job_pb2.Job(job_id=job.job_id, description="second", labels={"b": "2"})
    updated = (
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=change,
                update_mask=field_mask_pb2.FieldMask(paths=["description", "labels"]),
                expected_version=1,
            ),
            metadata=tenant.md,
        )
    ).job
    assert updated.version == 2
    assert updated.description == "second"
    assert dict(updated.labels) == {"b": "2"}  # a map is replaced whole
    assert updated.next_run_at == job.next_run_at  # schedule untouched
    assert updated.schedule == job.schedule

    # A stale version is ABORTED and changes nothing.
    await expect_error(
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=job.job_id, description="third"),
                update_mask=field_mask_pb2.FieldMask(paths=["description"]),
                expected_version=1,
            ),
            metadata=tenant.md,
        ),
        ABORTED,
    )

    # A schedule sub-path: switching to an interval recomputes next_run_at from now.
    spec = job_pb2.Job(
        job_id=job.job_id,
        schedule=job_pb2.Schedule(interval=job_pb2.IntervalSchedule(every=seconds(60))),
    )
    before = datetime.now(UTC)
    rescheduled = (
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=spec, update_mask=field_mask_pb2.FieldMask(paths=["schedule.interval"])
            ),
            metadata=tenant.md,
        )
    ).job
    assert rescheduled.version == 3
    assert rescheduled.schedule.WhichOneof("spec") == "interval"
    assert rescheduled.schedule.time_zone == "UTC"  # other schedule fields kept
    next_run = rescheduled.next_run_at.ToDatetime(UTC)
    assert before < next_run <= before + timedelta(seconds=61)
    assert next_run.second == 0

    # A nested policy field; unset fields named by the mask return to their default.
    retried = (
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(
                    job_id=job.job_id,
                    policies=job_pb2.Policies(retry=job_pb2.RetryPolicy(max_attempts=9)),
                ),
                update_mask=field_mask_pb2.FieldMask(
                    paths=["policies.retry.max_attempts", "description"]
                ),
            ),
            metadata=tenant.md,
        )
    ).job
    assert retried.policies.retry.max_attempts == 9
    assert retried.policies.retry.base_delay.ToTimedelta() == timedelta(seconds=10)
    assert retried.description == ""

    # Target headers replaced as a whole.
    headers = (
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(
                    job_id=job.job_id,
                    target=job_pb2.Target(http=job_pb2.HttpTarget(headers={"X-A": "1"})),
                ),
                update_mask=field_mask_pb2.FieldMask(paths=["target.http.headers"]),
            ),
            metadata=tenant.md,
        )
    ).job
    assert dict(headers.target.http.headers) == {"X-A": "1"}
    assert headers.target.http.url == job.target.http.url


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("paths", "problem"),
    [
        (["paused"], "PauseJob"),
        (["pause_note"], "PauseJob"),
        (["version"], "cannot be changed"),
        (["next_run_at"], "cannot be changed"),
        (["stats"], "cannot be changed"),
        (["job_id"], "cannot be changed"),
        (["bogus"], "unknown field"),
        (["schedule.bogus"], "unknown field"),
        (["labels.team"], "cannot update inside"),
        (["target.http.headers.x"], "cannot update inside"),
        (["schedule.jitter.seconds"], "cannot update inside"),
        (["name.x"], "cannot update inside"),
    ],
)
async def test_update_job_mask_errors(
    shared_api: Api, shared_tenant: Tenant, paths: list[str], problem: str
) -> None:
    api, tenant = shared_api, shared_tenant
    job = await create(api, tenant, make_job("masked"))
    await expect_error(
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=job.job_id, paused=True),
                update_mask=field_mask_pb2.FieldMask(paths=paths),
            ),
            metadata=tenant.md,
        ),
        INVALID,
        field="update_mask.paths[0]",
        text=problem,
    )


async def test_an_empty_mask_updates_every_updatable_field(api: Api, tenant: Tenant) -> None:
    made = make_job("whole", labels={"team": "a"}, description="before")
    job = await create(api, tenant, made)
    # A partial job with an empty mask resets what it leaves unset: here the schedule,
    # which a job cannot be without.
    await expect_error(
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(job=job_pb2.Job(job_id=job.job_id, name="renamed")),
            metadata=tenant.md,
        ),
        INVALID,
        field="schedule",
    )
    wanted = make_job("renamed", payload=b"new")
    wanted.job_id = job.job_id
    updated = (await api.jobs.UpdateJob(pb.UpdateJobRequest(job=wanted), metadata=tenant.md)).job
    assert updated.name == "renamed"
    assert updated.payload == b"new"
    assert not updated.labels and not updated.description
    assert updated.version == job.version + 1


async def test_update_job_errors(api: Api, tenant: Tenant) -> None:
    job = await create(api, tenant, make_job("one"))
    await create(api, tenant, make_job("two"))
    mask = field_mask_pb2.FieldMask(paths=["name"])
    await expect_error(
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(job=job_pb2.Job(job_id=job.job_id, name="two"), update_mask=mask),
            metadata=tenant.md,
        ),
        grpc.StatusCode.ALREADY_EXISTS,
        field="name",
    )
    await expect_error(
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(job=job_pb2.Job(job_id=job.job_id, name=""), update_mask=mask),
            metadata=tenant.md,
        ),
        INVALID,
        field="name",
    )
    await expect_error(
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id="00000000-0000-4000-8000-000000000000", name="x"),
                update_mask=mask,
            ),
            metadata=tenant.md,
        ),
        NOT_FOUND,
    )
    await expect_error(
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(job=job_pb2.Job(name="x"), update_mask=mask), metadata=tenant.md
        ),
        INVALID,
        field="job.job_id",
    )
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)
    assert got.job.name == "one" and got.job.version == 1


async def test_delete_job(api: Api, tenant: Tenant) -> None:
    job = await create(api, tenant, make_job("gone"))
    run = (
        await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job.job_id), metadata=tenant.md)
    ).run
    await expect_error(
        api.jobs.DeleteJob(
            pb.DeleteJobRequest(job_id=job.job_id, expected_version=7), metadata=tenant.md
        ),
        ABORTED,
    )
    await api.jobs.DeleteJob(
        pb.DeleteJobRequest(job_id=job.job_id, expected_version=1), metadata=tenant.md
    )
    await expect_error(
        api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md), NOT_FOUND
    )
    await expect_error(
        api.jobs.DeleteJob(pb.DeleteJobRequest(job_id=job.job_id), metadata=tenant.md), NOT_FOUND
    )
    await api.jobs.DeleteJob(
        pb.DeleteJobRequest(job_id=job.job_id, allow_missing=True), metadata=tenant.md
    )
    # Its unfinished run was cancelled, and runs of a deleted job are not visible.
    rows = await api.sql("SELECT status, last_error FROM job_runs")
    assert [(r["status"], r["last_error"]) for r in rows] == [("cancelled", "job deleted")]
    await expect_error(
        api.jobs.GetRun(pb.GetRunRequest(run_key=run.run_key), metadata=tenant.md), NOT_FOUND
    )
    counts = await api.counts()
    assert counts["jobs"] == counts["job_definitions"] == counts["job_stats"] == 0
    assert counts["job_count"] == 0  # the quota slot is free again


async def test_pause_and_resume(api: Api, tenant: Tenant) -> None:
    job = await create(api, tenant, make_job("pausable", cron="*/5 * * * *"))
    paused = (
        await api.jobs.PauseJob(
            pb.PauseJobRequest(job_id=job.job_id, note="maintenance", expected_version=1),
            metadata=tenant.md,
        )
    ).job
    assert paused.paused and paused.pause_note == "maintenance" and paused.version == 2
    again = (
        await api.jobs.PauseJob(
            pb.PauseJobRequest(job_id=job.job_id, note="still"), metadata=tenant.md
        )
    ).job
    assert again.paused and again.pause_note == "still" and again.version == 3
    await expect_error(
        api.jobs.ResumeJob(
            pb.ResumeJobRequest(job_id=job.job_id, expected_version=2), metadata=tenant.md
        ),
        ABORTED,
    )
    # Pretend the paused job's next_run_at lies in the past: resume recomputes from now.
    await api.sql(
        "UPDATE jobs SET next_run_at = now() - interval '1 hour' WHERE job_id = $1::uuid",
        job.job_id,
    )
    before = datetime.now(UTC)
    resumed = (
        await api.jobs.ResumeJob(
            pb.ResumeJobRequest(job_id=job.job_id, note="back", expected_version=3),
            metadata=tenant.md,
        )
    ).job
    assert not resumed.paused and resumed.pause_note == "back" and resumed.version == 4
    next_run = resumed.next_run_at.ToDatetime(UTC)
    assert before < next_run <= before + timedelta(minutes=5)
    assert next_run.minute % 5 == 0
    # Resuming an unpaused job changes only the note.
    noted = (
        await api.jobs.ResumeJob(
            pb.ResumeJobRequest(job_id=job.job_id, note="again"), metadata=tenant.md
        )
    ).job
    assert noted.next_run_at == resumed.next_run_at and noted.pause_note == "again"
    await expect_error(
        api.jobs.PauseJob(
            pb.PauseJobRequest(job_id=job.job_id, note="x" * 1025), metadata=tenant.md
        ),
        INVALID,
        field="note",
    )
    for call in (api.jobs.PauseJob, api.jobs.ResumeJob):
        request_type = pb.PauseJobRequest if call is api.jobs.PauseJob else pb.ResumeJobRequest
        await expect_error(
            call(request_type(job_id="00000000-0000-4000-8000-000000000000"), metadata=tenant.md),
            NOT_FOUND,
        )


async def test_preview_schedule_annotates_dst(api: Api, tenant: Tenant) -> None:
    after = ts(datetime(2026, 3, 7, 12, 0, tzinfo=UTC))
    fixed = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(
            schedule=job_pb2.Schedule(cron="30 2 * * *", time_zone="America/New_York"),
            count=3,
            after=after,
        ),
        metadata=tenant.md,
    )
    assert [f.local_time for f in fixed.fire_times] == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
        "2026-03-10T02:30:00-04:00",
    ]
    assert fixed.fire_times[0].annotation == pb.DST_ANNOTATION_GAP_SHIFTED
    assert "does not exist" in fixed.fire_times[0].note
    assert fixed.fire_times[1].annotation == pb.DST_ANNOTATION_NONE
    assert not fixed.exhausted

    wildcard = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(
            schedule=job_pb2.Schedule(cron="30 * * * *", time_zone="America/New_York"),
            count=3,
            after=ts(datetime(2026, 3, 8, 5, 0, tzinfo=UTC)),
        ),
        metadata=tenant.md,
    )
    skipped = [f for f in wildcard.fire_times if f.dropped]
    assert len(skipped) == 1
    assert skipped[0].annotation == pb.DST_ANNOTATION_GAP_SKIPPED
    assert skipped[0].local_time == "2026-03-08T02:30:00"
    assert not skipped[0].HasField("at")
    assert len([f for f in wildcard.fire_times if not f.dropped]) == 3

    once = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(
            schedule=job_pb2.Schedule(once=ts(datetime(2030, 1, 1, tzinfo=UTC))), count=5
        ),
        metadata=tenant.md,
    )
    assert len(once.fire_times) == 1 and once.exhausted

    # Jenkins H is hashed from the job when job_id is given.
    job = await create(api, tenant, make_job("hashed", cron="H * * * *"))
    for_job = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(schedule=job.schedule, job_id=job.job_id),
        metadata=tenant.md,
    )
    assert len(for_job.fire_times) == 10
    assert for_job.fire_times[0].at == job.next_run_at

    await expect_error(
        api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(schedule=job_pb2.Schedule(cron="0 * * * *"), count=1001),
            metadata=tenant.md,
        ),
        INVALID,
        field="count",
    )
    await expect_error(
        api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(schedule=job_pb2.Schedule(cron="0 25 * * *")),
            metadata=tenant.md,
        ),
        INVALID,
        field="schedule.cron",
    )
    await expect_error(
        api.jobs.PreviewSchedule(pb.PreviewScheduleRequest(), metadata=tenant.md),
        INVALID,
        field="schedule",
    )
    await expect_error(
        api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(
                schedule=job_pb2.Schedule(cron="0 * * * *"),
                job_id="00000000-0000-4000-8000-000000000000",
            ),
            metadata=tenant.md,
        ),
        NOT_FOUND,
    )


async def test_request_ids_expire_after_retention(start_api: StartApi) -> None:
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    api = await start_api(clock=clock)
    tenant = await api.tenant("acme")
    first = await create(api, tenant, make_job("a"), request_id="nightly-import")
    clock.advance(23 * 3600)
    await expect_error(
        create(api, tenant, make_job("b"), request_id="nightly-import"), INVALID, field="request_id"
    )
    clock.advance(2 * 3600)  # 25 h after the first use: the key is forgotten
    second = await create(api, tenant, make_job("b"), request_id="nightly-import")
    assert second.job_id != first.job_id
    assert len(await api.sql("SELECT * FROM job_requests")) == 1  # taken over, not added
    await create(api, tenant, make_job("c"), request_id="other")
    clock.advance(25 * 3600)
    purger = api.service.components[0]
    assert (await purger.purge_once())["requests"] == 2  # type: ignore[attr-defined]
    assert await api.sql("SELECT * FROM job_requests") == []


async def test_schedule_bounds_are_inclusive(api: Api, tenant: Tenant) -> None:
    start = datetime(2031, 1, 1, tzinfo=UTC)
    bounded = job_pb2.Schedule(
        cron="0 * * * *", start_time=ts(start), end_time=ts(start + timedelta(hours=2))
    )
    preview = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(schedule=bounded, count=10), metadata=tenant.md
    )
    assert [f.at.ToDatetime(UTC) for f in preview.fire_times] == [
        start + timedelta(hours=h) for h in range(3)
    ]
    assert preview.exhausted
    # Equal bounds: at most one fire time, and a valid job.
    single = job_pb2.Schedule(cron="0 * * * *", start_time=ts(start), end_time=ts(start))
    job = await create(api, tenant, make_job("single", schedule=single))
    assert job.next_run_at.ToDatetime(UTC) == start


async def test_batch_create_larger_than_grpc_default_message_size(api: Api, tenant: Tenant) -> None:
    # 24 jobs with 200 KiB payloads: about 4.8 MiB each way, over gRPC's 4 MiB default.
    jobs = [make_job(f"big-{i:02d}", payload=bytes([i]) * 200 * 1024) for i in range(24)]
    limit = 16 * 1024 * 1024
    options = [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]
    async with grpc.aio.insecure_channel(api.address, options=options) as channel:
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        response = await stub.BatchCreateJobs(
            pb.BatchCreateJobsRequest(jobs=jobs), metadata=tenant.md, timeout=30
        )
    assert [job.payload[:1] for job in response.jobs] == [bytes([i]) for i in range(24)]
    assert (await api.counts())["jobs"] == 24


async def test_update_and_resume_lift_a_dispatch_quarantine(api: Api, tenant: Tenant) -> None:
    # The scheduler quarantines a job it cannot plan; a changed definition or a resume is
    # the operator's fix, so both make the job eligible for dispatch again at once.
    job = await create(api, tenant, make_job("quarantined"))
    job_id = uuid.UUID(job.job_id)

    async def quarantine() -> None:
        await api.sql(
            "UPDATE jobs SET dispatch_not_before = now() + interval '5 min' WHERE job_id = $1",
            job_id,
        )

    async def quarantined() -> bool:
        [row] = await api.sql("SELECT dispatch_not_before FROM jobs WHERE job_id = $1", job_id)
        return row["dispatch_not_before"] is not None

    await quarantine()
    assert await quarantined()
    await api.jobs.UpdateJob(
        pb.UpdateJobRequest(
            job=job_pb2.Job(job_id=job.job_id, description="fixed"),
            update_mask=field_mask_pb2.FieldMask(paths=["description"]),
        ),
        metadata=tenant.md,
    )
    assert not await quarantined()

    await api.jobs.PauseJob(pb.PauseJobRequest(job_id=job.job_id), metadata=tenant.md)
    await quarantine()
    await api.jobs.ResumeJob(pb.ResumeJobRequest(job_id=job.job_id), metadata=tenant.md)
    assert not await quarantined()


async def test_every_definition_write_records_its_digest(api: Api, tenant: Tenant) -> None:
    """The scheduler plans a job from the document its digest names (migration 0008):
    creates, batch creates and updates of the schedule or the policies keep it exact."""
    digests = """
        SELECT j.definition_digest AS stored,
               md5(d.schedule::text || ' ' || d.policies::text)::uuid AS actual
          FROM jobs j JOIN job_definitions d USING (job_id) WHERE j.job_id = $1
    """
    job = await create(api, tenant, make_job("digest"))
    await api.jobs.BatchCreateJobs(
        pb.BatchCreateJobsRequest(jobs=[make_job("digest-a"), make_job("digest-b")]),
        metadata=tenant.md,
    )
    [created] = await api.sql(digests, uuid.UUID(job.job_id))
    assert created["stored"] == created["actual"] is not None
    for paths, change in (
        (["schedule"], job_pb2.Job(schedule=job_pb2.Schedule(cron="5 4 * * *"))),
        (["policies.overlap"], job_pb2.Job(policies=job_pb2.Policies(overlap=4))),
    ):
        change.job_id = job.job_id
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(job=change, update_mask=field_mask_pb2.FieldMask(paths=paths)),
            metadata=tenant.md,
        )
        [row] = await api.sql(digests, uuid.UUID(job.job_id))
        assert row["stored"] == row["actual"] != created["stored"]
    batch = await api.sql(
        "SELECT count(*) AS n FROM jobs j JOIN job_definitions d USING (job_id)"
        " WHERE j.name LIKE 'digest-%'"
        " AND j.definition_digest = md5(d.schedule::text || ' ' || d.policies::text)::uuid"
    )
    assert batch[0]["n"] == 2


async def test_a_batch_checks_each_shared_schedule_once_and_hashed_ones_per_job(
    api: Api, tenant: Tenant
) -> None:
    jobs = [make_job(f"shared-{i}", cron="0 3 * * *") for i in range(10)]
    jobs += [make_job(f"hashed-{i}", cron="H H * * *") for i in range(20)]
    created = (
        await api.jobs.BatchCreateJobs(pb.BatchCreateJobsRequest(jobs=jobs), metadata=tenant.md)
    ).jobs
    shared = {j.next_run_at.ToDatetime() for j in created if j.name.startswith("shared-")}
    hashed = [j.next_run_at.ToDatetime() for j in created if j.name.startswith("hashed-")]
    assert len(shared) == 1
    # H spreads jobs by their own id: twenty jobs never all land on one minute of the day.
    assert len(set(hashed)) > 1
    # Each is stored as answered, and is what the schedule gives that job alone (its
    # own H: the batch derives each hashed job's schedule from the first one's).
    for job in created:
        stored = (
            await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)
        ).job
        assert stored.next_run_at == job.next_run_at
        alone = await api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(
                schedule=job.schedule, count=1, after=job.create_time, job_id=job.job_id
            ),
            metadata=tenant.md,
        )
        assert alone.fire_times[0].at == job.next_run_at


async def test_a_bad_schedule_shared_in_a_batch_names_the_first_job_that_has_it(
    api: Api, tenant: Tenant
) -> None:
    jobs = [
        make_job("good-0"),
        make_job("bad-1", cron="61 * * * *"),
        make_job("bad-2", cron="61 * * * *"),
    ]
    await expect_error(
        api.jobs.BatchCreateJobs(pb.BatchCreateJobsRequest(jobs=jobs), metadata=tenant.md),
        INVALID,
        field="jobs[1].schedule.cron",
    )


async def test_a_negative_expected_version_is_refused_by_every_write(
    api: Api, tenant: Tenant
) -> None:
    """One expected_version rule (job_service.proto VERSIONS): DeleteJob, PauseJob and
    ResumeJob refuse a negative one as UpdateJob, ApplyJob and the calendar and channel
    writes do, naming the field, and change nothing."""
    job = await create(api, tenant, make_job("guarded"))
    calls = [
        api.jobs.DeleteJob(
            pb.DeleteJobRequest(job_id=job.job_id, expected_version=-1), metadata=tenant.md
        ),
        api.jobs.PauseJob(
            pb.PauseJobRequest(job_id=job.job_id, expected_version=-1), metadata=tenant.md
        ),
        api.jobs.ResumeJob(
            pb.ResumeJobRequest(job_id=job.job_id, expected_version=-1), metadata=tenant.md
        ),
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=job.job_id, description="x"),
                update_mask=field_mask_pb2.FieldMask(paths=["description"]),
                expected_version=-1,
            ),
            metadata=tenant.md,
        ),
        api.jobs.DeleteCalendar(
            pb.DeleteCalendarRequest(name="holidays", expected_version=-1), metadata=tenant.md
        ),
    ]
    for call in calls:
        await expect_error(call, INVALID, field="expected_version", text="must not be negative")
    after = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)).job
    assert after.version == job.version and not after.paused
