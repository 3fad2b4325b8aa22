"""Concurrency: optimistic updates, idempotency under races, quotas under concurrent
creates, and pagination without gaps or duplicates while jobs are being added."""

from __future__ import annotations

import asyncio
import random

import grpc
from google.protobuf import field_mask_pb2

from sundial.v1 import admin_pb2, job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.eventually import assert_eventually
from tests.integration.api.support import Api, Tenant, expect_error, make_job, names

EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


async def _outcome(call: object) -> str:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as exc:
        return exc.code().name
    return "OK"


async def test_concurrent_updates_one_wins_one_aborted(api: Api, tenant: Tenant) -> None:
    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job()), metadata=tenant.md)).job
    mask = field_mask_pb2.FieldMask(paths=["description"])
    version = job.version
    for round_ in range(5):
        calls = [
            api.jobs.UpdateJob(
                pb.UpdateJobRequest(
                    job=job_pb2.Job(job_id=job.job_id, description=f"{round_}-{who}"),
                    update_mask=mask,
                    expected_version=version,
                ),
                metadata=tenant.md,
            )
            for who in ("a", "b")
        ]
        outcomes = sorted(await asyncio.gather(*(_outcome(c) for c in calls)))
        assert outcomes == ["ABORTED", "OK"], outcomes
        current = (
            await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)
        ).job
        assert current.version == version + 1
        assert current.description in (f"{round_}-a", f"{round_}-b")
        version = current.version
    # Unconditional updates both apply (last writer wins), each bumping the version.
    unconditional = [
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=job.job_id, description=who), update_mask=mask
            ),
            metadata=tenant.md,
        )
        for who in ("x", "y", "z")
    ]
    assert await asyncio.gather(*(_outcome(c) for c in unconditional)) == ["OK"] * 3
    final = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)).job
    assert final.version == version + 3


async def test_concurrent_identical_requests_create_once(api: Api, tenant: Tenant) -> None:
    creates = await asyncio.gather(
        *(
            api.jobs.CreateJob(
                pb.CreateJobRequest(job=make_job("once-only"), request_id="dup"),
                metadata=tenant.md,
            )
            for _ in range(8)
        )
    )
    assert len({c.job.job_id for c in creates}) == 1
    job_id = creates[0].job.job_id
    triggers = await asyncio.gather(
        *(
            api.jobs.TriggerJob(
                pb.TriggerJobRequest(job_id=job_id, request_id="run-once"), metadata=tenant.md
            )
            for _ in range(8)
        )
    )
    assert len({t.run.run_key for t in triggers}) == 1
    counts = await api.counts()
    assert counts["jobs"] == 1 and counts["job_runs"] == 1 and counts["job_count"] == 1


async def test_max_jobs_quota_under_concurrent_creates(api: Api) -> None:
    tenant = await api.tenant("small", max_jobs=10)
    outcomes = await asyncio.gather(
        *(
            _outcome(
                api.jobs.CreateJob(pb.CreateJobRequest(job=make_job(f"j{i}")), metadata=tenant.md)
            )
            for i in range(30)
        )
    )
    assert outcomes.count("OK") == 10 and outcomes.count("RESOURCE_EXHAUSTED") == 20
    counts = await api.counts()
    assert counts["jobs"] == counts["job_count"] == 10

    # A batch that would cross the quota writes nothing.
    await expect_error(
        api.jobs.BatchCreateJobs(
            pb.BatchCreateJobsRequest(jobs=[make_job("b1")]), metadata=tenant.md
        ),
        EXHAUSTED,
        text="max_jobs",
    )
    # Deleting frees a slot; concurrent batches then compete for it.
    first = (await api.jobs.ListJobs(pb.ListJobsRequest(page_size=1), metadata=tenant.md)).jobs[0]
    await api.jobs.DeleteJob(pb.DeleteJobRequest(job_id=first.job_id), metadata=tenant.md)
    batches = await asyncio.gather(
        *(
            _outcome(
                api.jobs.BatchCreateJobs(
                    pb.BatchCreateJobsRequest(jobs=[make_job(f"batch-{i}")]), metadata=tenant.md
                )
            )
            for i in range(5)
        )
    )
    assert batches.count("OK") == 1
    assert (await api.counts())["jobs"] == 10

    # Lowering the quota below the count only blocks new jobs.
    await api.admin.UpdateTenant(
        admin_pb2.UpdateTenantRequest(
            tenant=admin_pb2.Tenant(tenant_id="small", quotas=admin_pb2.Quotas(max_jobs=3)),
            update_mask=field_mask_pb2.FieldMask(paths=["quotas.max_jobs"]),
        ),
        metadata=api.admin_md,
    )
    assert len((await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=tenant.md)).jobs) == 10
    await expect_error(
        api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("more")), metadata=tenant.md),
        EXHAUSTED,
    )
    # Another tenant is not affected by this one's quota.
    other = await api.tenant("big")
    await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("fine")), metadata=other.md)


async def test_pagination_over_1000_jobs_while_jobs_are_added(api: Api, tenant: Tenant) -> None:
    rng = random.Random(7)
    originals = [f"job-{rng.randrange(10**9):09d}-{i}" for i in range(1000)]
    for chunk in range(0, 1000, 500):
        await api.jobs.BatchCreateJobs(
            pb.BatchCreateJobsRequest(jobs=[make_job(n) for n in originals[chunk : chunk + 500]]),
            metadata=tenant.md,
        )
    added: list[str] = []
    stop = asyncio.Event()

    async def writer() -> None:
        i = 0
        while not stop.is_set():
            # Names spread over the whole key space: before, at and after the cursor.
            batch = [f"job-{rng.randrange(10**9):09d}-new{i + k}" for k in range(20)]
            i += 20
            await api.jobs.BatchCreateJobs(
                pb.BatchCreateJobsRequest(jobs=[make_job(n) for n in batch]), metadata=tenant.md
            )
            added.extend(batch)

    writing = asyncio.create_task(writer())
    seen: list[str] = []
    token = ""
    pages = 0
    try:
        while True:
            page = await api.jobs.ListJobs(
                pb.ListJobsRequest(page_size=37, page_token=token), metadata=tenant.md
            )
            seen += names(page.jobs)
            pages += 1
            token = page.next_page_token
            if not token:
                break
            if pages == 5:
                # Make sure jobs really are added while the walk is under way.
                def progressed(before: int = len(added)) -> None:
                    assert len(added) > before, "no batch added since page 5"

                await assert_eventually(progressed, timeout_s=20, what="writer progress")
    finally:
        stop.set()
        await writing
    assert added, "the writer never ran during the walk"
    assert len(seen) == len(set(seen)), "a job was returned twice"
    assert seen == sorted(seen), "pages are not in name order"
    missing = set(originals) - set(seen)
    assert not missing, f"{len(missing)} jobs that existed throughout were skipped"
    assert pages >= 1000 // 37
