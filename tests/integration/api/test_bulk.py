"""Selectors, CountJobs and the bulk actions (PauseJobs, ResumeJobs, DeleteJobs,
TriggerJobs) through a real server on PostgreSQL, always beside a second tenant whose
jobs carry the same labels: what one tenant's selector does never reaches the other's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import timestamp_pb2

from sundial.v1 import bulk_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, expect_error, make_job

INVALID = grpc.StatusCode.INVALID_ARGUMENT

LABELS = [
    {"customer": "42", "tier": "gold", "env": "prod"},
    {"customer": "42", "tier": "silver", "env": "prod"},
    {"customer": "42", "env": "staging"},
    {"customer": "7", "tier": "gold", "env": "prod"},
    {"customer": "7"},
    {},
]


async def seed(api: Api, tenant: Tenant, prefix: str = "job") -> list[str]:
    """Six jobs with the labels of :data:`LABELS`, named ``<prefix>-<i>``; their ids."""
    response = await api.jobs.BatchCreateJobs(
        pb.BatchCreateJobsRequest(
            jobs=[
                make_job(f"{prefix}-{i}", labels=labels, description=f"Report number {i}")
                for i, labels in enumerate(LABELS)
            ]
        ),
        metadata=tenant.md,
    )
    return [job.job_id for job in response.jobs]


async def count(api: Api, tenant: Tenant, selector: str = "", **fields: object) -> int:
    response = await api.jobs.CountJobs(
        bulk_pb2.CountJobsRequest(selector=selector, **fields),  # type: ignore[arg-type]
        metadata=tenant.md,
    )
    return response.count


@pytest.fixture
async def other(api: Api) -> Tenant:
    """A second tenant with jobs carrying the same labels and names."""
    tenant = await api.tenant("other")
    await seed(api, tenant)
    return tenant


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", 6),
        ("customer=42", 3),
        ("customer==42", 3),
        ("customer!=42", 3),  # 7, 7 and the job without the label
        ("customer=42,tier=gold", 1),
        ("customer in (42,7), env=prod", 3),
        ("customer notin (42)", 3),
        ("tier", 3),
        ("!tier", 3),
        ("customer=42, !tier", 1),
        ("customer=42,customer=7", 0),
        ("env in (prod), tier notin (gold)", 1),
        ("nosuch", 0),
        ("tier=", 0),
    ],
)
async def test_selectors_count_like_kubernetes(
    api: Api, tenant: Tenant, other: Tenant, selector: str, expected: int
) -> None:
    await seed(api, tenant)
    assert await count(api, tenant, selector) == expected
    # The other tenant's identical jobs are counted for it alone.
    assert await count(api, other, selector) == expected


async def test_search_and_list_with_selector(api: Api, tenant: Tenant, other: Tenant) -> None:
    await seed(api, tenant)
    assert await count(api, tenant, search="NUMBER 3") == 1
    assert await count(api, tenant, search="job-") == 6
    assert await count(api, tenant, "customer=42", search="number 1") == 1
    listed = await api.jobs.ListJobs(
        pb.ListJobsRequest(selector="customer=42,tier", page_size=1), metadata=tenant.md
    )
    assert [job.name for job in listed.jobs] == ["job-0"]
    more = await api.jobs.ListJobs(
        pb.ListJobsRequest(selector="customer=42,tier", page_token=listed.next_page_token),
        metadata=tenant.md,
    )
    assert [job.name for job in more.jobs] == ["job-1"]
    assert not more.next_page_token
    # The map filter and the selector combine.
    both = await api.jobs.ListJobs(
        pb.ListJobsRequest(selector="tier", labels={"env": "prod"}, search="REPORT"),
        metadata=tenant.md,
    )
    assert [job.name for job in both.jobs] == ["job-0", "job-1", "job-3"]


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        ("customer in (42", "ends in the middle"),
        ("Customer=1", "not a label key"),
        ("a b", "expected"),
        ("a in ()", "empty"),
        ("x" * 1025, "longer than 1024"),
        (",".join(f"k{i}" for i in range(33)), "at most 32"),
        ("k in (" + ",".join(str(i) for i in range(65)) + ")", "at most 64"),
        ("k=" + "v" * 257, "longer than 256"),
    ],
)
async def test_bad_selectors_name_the_field(
    api: Api, tenant: Tenant, selector: str, text: str
) -> None:
    await seed(api, tenant)
    before = await api.counts()
    await expect_error(
        api.jobs.CountJobs(bulk_pb2.CountJobsRequest(selector=selector), metadata=tenant.md),
        INVALID,
        field="selector",
        text=text,
    )
    await expect_error(
        api.jobs.PauseJobs(bulk_pb2.PauseJobsRequest(selector=selector), metadata=tenant.md),
        INVALID,
        field="selector",
    )
    await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(selector=selector), metadata=tenant.md),
        INVALID,
        field="selector",
    )
    await expect_error(
        api.jobs.ListRuns(pb.ListRunsRequest(selector=selector), metadata=tenant.md),
        INVALID,
        field="selector",
    )
    assert await api.counts() == before


async def test_bulk_actions_refuse_bad_input_and_write_nothing(api: Api, tenant: Tenant) -> None:
    await seed(api, tenant)
    before = await api.counts()
    paused_before = await api.sql("SELECT count(*) FROM jobs WHERE paused")
    calls = [
        (bulk_pb2.PauseJobsRequest(), api.jobs.PauseJobs, "selector"),
        (bulk_pb2.DeleteJobsRequest(), api.jobs.DeleteJobs, "selector"),
        (bulk_pb2.TriggerJobsRequest(), api.jobs.TriggerJobs, "selector"),
        (bulk_pb2.ResumeJobsRequest(), api.jobs.ResumeJobs, "selector"),
        (
            bulk_pb2.PauseJobsRequest(selector="customer=42", limit=10_001),
            api.jobs.PauseJobs,
            "limit",
        ),
        (bulk_pb2.PauseJobsRequest(selector="customer=42", limit=-1), api.jobs.PauseJobs, "limit"),
        (bulk_pb2.PauseJobsRequest(search="x" * 201), api.jobs.PauseJobs, "search"),
        (
            bulk_pb2.PauseJobsRequest(selector="customer=42", note="n" * 1025),
            api.jobs.PauseJobs,
            "note",
        ),
        (
            bulk_pb2.PauseJobsRequest(
                selector="customer=42", pause_until=timestamp_pb2.Timestamp(seconds=1)
            ),
            api.jobs.PauseJobs,
            "pause_until",
        ),
    ]
    for request, method, field in calls:
        await expect_error(method(request, metadata=tenant.md), INVALID, field=field)
    assert await api.counts() == before
    assert await api.sql("SELECT count(*) FROM jobs WHERE paused") == paused_before


async def test_pause_jobs_dry_run_limit_revisions_audit_and_isolation(
    api: Api, tenant: Tenant, other: Tenant
) -> None:
    ids = await seed(api, tenant)
    dry = await api.jobs.PauseJobs(
        bulk_pb2.PauseJobsRequest(selector="customer=42", dry_run=True), metadata=tenant.md
    )
    assert (dry.matched, dry.affected, dry.remaining) == (3, 3, 3)
    assert list(dry.job_ids) == ids[:3]
    assert await count(api, tenant, paused=True) == 0  # a dry run writes nothing

    first = await api.jobs.PauseJobs(
        bulk_pb2.PauseJobsRequest(selector="customer=42", note="incident 12", limit=2),
        metadata=tenant.md,
    )
    assert (first.matched, first.affected, first.remaining) == (3, 2, 1)
    assert list(first.job_ids) == ids[:2]
    second = await api.jobs.PauseJobs(
        bulk_pb2.PauseJobsRequest(selector="customer=42", note="incident 12", limit=2),
        metadata=tenant.md,
    )
    assert (second.matched, second.affected, second.remaining) == (3, 1, 0)
    assert list(second.job_ids) == [ids[2]]
    done = await api.jobs.PauseJobs(
        bulk_pb2.PauseJobsRequest(selector="customer=42"), metadata=tenant.md
    )
    assert (done.matched, done.affected, done.remaining) == (3, 0, 0)

    for job_id in ids[:3]:
        job = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job_id), metadata=tenant.md)).job
        assert job.paused and job.pause_note == "incident 12" and job.version == 2
        revisions = await api.jobs.ListJobRevisions(
            pb.ListJobRevisionsRequest(job_id=job_id), metadata=tenant.md
        )
        assert revisions.revisions[0].version == 2
        assert set(revisions.revisions[0].changed_fields) == {"paused", "pause_note"}
    for job_id in ids[3:]:
        job = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job_id), metadata=tenant.md)).job
        assert not job.paused and job.version == 1
    # One audit event per job paused, beside each call's own.
    rows = await api.sql(
        "SELECT resource FROM audit_events WHERE tenant_id = $1"
        " AND method = 'sundial.v1.JobService/PauseJobs' AND resource <> 'customer=42'"
        " ORDER BY event_id",
        tenant.tenant_id,
    )
    assert [row["resource"] for row in rows] == ids[:3]
    # The other tenant's identically labelled jobs are untouched.
    assert await count(api, other, paused=True) == 0
    assert await api.sql(
        "SELECT count(*) FROM job_revisions WHERE tenant_id = 'other' AND version > 1"
    ) == [(0,)]


async def test_resume_jobs_recomputes_next_run(api: Api, tenant: Tenant, other: Tenant) -> None:
    ids = await seed(api, tenant)
    await api.jobs.PauseJobs(bulk_pb2.PauseJobsRequest(selector="tier"), metadata=tenant.md)
    await api.jobs.PauseJobs(bulk_pb2.PauseJobsRequest(selector="tier"), metadata=other.md)
    dry = await api.jobs.ResumeJobs(
        bulk_pb2.ResumeJobsRequest(selector="tier=gold", dry_run=True), metadata=tenant.md
    )
    assert (dry.matched, dry.affected, dry.remaining) == (2, 2, 2)
    await api.sql("UPDATE jobs SET next_run_at = NULL WHERE job_id = ANY($1::uuid[])", ids)
    before = datetime.now(UTC)
    resumed = await api.jobs.ResumeJobs(
        bulk_pb2.ResumeJobsRequest(selector="tier=gold", note="over"), metadata=tenant.md
    )
    assert (resumed.matched, resumed.affected, resumed.remaining) == (2, 2, 0)
    assert list(resumed.job_ids) == [ids[0], ids[3]]
    for job_id in (ids[0], ids[3]):
        job = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job_id), metadata=tenant.md)).job
        assert not job.paused and job.pause_note == "over" and job.version == 3
        next_run = job.next_run_at.ToDatetime(UTC)
        assert before < next_run <= before + timedelta(days=1)
    silver = (await api.jobs.GetJob(pb.GetJobRequest(job_id=ids[1]), metadata=tenant.md)).job
    assert silver.paused
    assert await count(api, other, paused=True) == 3


async def test_delete_jobs_cancels_runs_and_frees_quota(
    api: Api, tenant: Tenant, other: Tenant
) -> None:
    ids = await seed(api, tenant)
    run = await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=ids[4]), metadata=tenant.md)
    dry = await api.jobs.DeleteJobs(
        bulk_pb2.DeleteJobsRequest(selector="customer=7", dry_run=True), metadata=tenant.md
    )
    assert (dry.matched, dry.affected, dry.remaining) == (2, 2, 2)
    assert await count(api, tenant) == 6
    deleted = await api.jobs.DeleteJobs(
        bulk_pb2.DeleteJobsRequest(selector="customer=7"), metadata=tenant.md
    )
    assert (deleted.matched, deleted.affected, deleted.remaining) == (2, 2, 0)
    assert list(deleted.job_ids) == [ids[3], ids[4]]
    assert await count(api, tenant) == 4
    assert await count(api, other) == 6
    rows = await api.sql("SELECT job_count FROM tenants WHERE tenant_id = $1", tenant.tenant_id)
    assert rows[0]["job_count"] == 4
    status = await api.sql("SELECT status FROM job_runs WHERE job_id = $1::uuid", run.run.job_id)
    assert status[0]["status"] == "cancelled"


async def test_trigger_jobs_runs_each_once_within_limit(
    api: Api, tenant: Tenant, other: Tenant
) -> None:
    ids = await seed(api, tenant)
    await expect_error(
        api.jobs.TriggerJobs(
            bulk_pb2.TriggerJobsRequest(selector="customer=42", limit=2), metadata=tenant.md
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        text="match 3 jobs",
    )
    dry = await api.jobs.TriggerJobs(
        bulk_pb2.TriggerJobsRequest(selector="customer=42", dry_run=True), metadata=tenant.md
    )
    assert (dry.matched, dry.affected, list(dry.run_keys)) == (3, 3, [])
    assert await api.sql("SELECT count(*) FROM job_runs") == [(0,)]
    triggered = await api.jobs.TriggerJobs(
        bulk_pb2.TriggerJobsRequest(selector="customer=42"), metadata=tenant.md
    )
    assert (triggered.matched, triggered.affected) == (3, 3)
    assert [key.split("@")[0] for key in triggered.run_keys] == ids[:3]
    rows = await api.sql("SELECT tenant_id, kind, status FROM job_runs ORDER BY job_id")
    assert [tuple(row) for row in rows] == [(tenant.tenant_id, "manual", "queued")] * 3
    audited = await api.sql(
        "SELECT count(*) FROM audit_events WHERE method = 'sundial.v1.JobService/TriggerJobs'"
        " AND resource = ANY($1::text[])",
        ids[:3],
    )
    assert audited == [(3,)]
    assert other.tenant_id not in {row["tenant_id"] for row in rows}


async def test_a_definition_written_without_its_tenant_is_still_found(
    api: Api, tenant: Tenant
) -> None:
    """Migration 0024's trigger: a writer that leaves job_definitions.tenant_id out (as
    every writer before it did) still has its job found by label."""
    await api.sql(
        "INSERT INTO jobs (job_id, tenant_id, name, partition_id)"
        " VALUES ('00000000-0000-4000-8000-000000000001', $1, 'raw', 1)",
        tenant.tenant_id,
    )
    await api.sql(
        "INSERT INTO job_definitions (job_id, schedule, target, labels)"
        " VALUES ('00000000-0000-4000-8000-000000000001', '{\"cron\": \"0 3 * * *\"}',"
        ' \'{"http": {"url": "http://127.0.0.1:9/"}}\', \'{"source": "sql"}\')'
    )
    assert await count(api, tenant, "source=sql") == 1
