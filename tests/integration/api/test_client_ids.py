"""Client-chosen job ids and ApplyJob through a real server on PostgreSQL.

A job created with its own id is named by it in every request that names a job, within
its tenant only; its runs keep the uid. ApplyJob creates, updates or leaves a job alone
to match a definition, under version checks, also when many callers apply at once.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2, timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, expect_error, make_job

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
EXISTS = grpc.StatusCode.ALREADY_EXISTS
ABORTED = grpc.StatusCode.ABORTED
CREATED = pb.APPLY_OUTCOME_CREATED
UPDATED = pb.APPLY_OUTCOME_UPDATED
UNCHANGED = pb.APPLY_OUTCOME_UNCHANGED


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


def details(error: grpc.aio.AioRpcError) -> dict[str, Any]:
    """The error's google.rpc.Status details by type name, unpacked."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    kinds = {
        "google.rpc.ErrorInfo": error_details_pb2.ErrorInfo,
        "google.rpc.BadRequest": error_details_pb2.BadRequest,
        "google.rpc.PreconditionFailure": error_details_pb2.PreconditionFailure,
        "google.rpc.RequestInfo": error_details_pb2.RequestInfo,
        "google.rpc.RetryInfo": error_details_pb2.RetryInfo,
    }
    found = {}
    for packed in status.details:
        detail = kinds[packed.TypeName()]()
        packed.Unpack(detail)
        found[packed.TypeName().removeprefix("google.rpc.")] = detail
    return found


async def create(api: Api, tenant: Tenant, job: job_pb2.Job, job_id: str = "") -> job_pb2.Job:
    response = await api.jobs.CreateJob(
        pb.CreateJobRequest(job=job, job_id=job_id), metadata=tenant.md
    )
    return response.job


async def apply(api: Api, tenant: Tenant, job: job_pb2.Job, **fields: Any) -> pb.ApplyJobResponse:
    return await api.jobs.ApplyJob(pb.ApplyJobRequest(job=job, **fields), metadata=tenant.md)


def wanted(job_id: str, name: str = "report", **fields: Any) -> job_pb2.Job:
    """A job definition named by client id ``job_id``."""
    return make_job(name, job_id=job_id, **fields)


# --- client ids ---------------------------------------------------------------------------


async def test_a_client_id_names_the_job_in_every_request(api: Api, tenant: Tenant) -> None:
    md = tenant.md
    job = await create(api, tenant, make_job("billing"), job_id="billing-report")
    uid = job.uid
    assert job.job_id == "billing-report" and str(uuid.UUID(uid)) == uid
    by_alias = await api.jobs.GetJob(pb.GetJobRequest(job_id="billing-report"), metadata=md)
    by_uid = await api.jobs.GetJob(pb.GetJobRequest(job_id=uid), metadata=md)
    assert by_alias.job == by_uid.job == job
    described = await api.jobs.DescribeJob(
        pb.DescribeJobRequest(job_id="billing-report"), metadata=md
    )
    assert described.job.uid == uid and len(described.upcoming) == 10

    updated = await api.jobs.UpdateJob(
        pb.UpdateJobRequest(
            job=job_pb2.Job(job_id="billing-report", description="monthly"),
            update_mask=field_mask_pb2.FieldMask(paths=["description"]),
            expected_version=1,
        ),
        metadata=md,
    )
    assert (updated.job.description, updated.job.version, updated.job.job_id) == (
        "monthly",
        2,
        "billing-report",
    )
    paused = await api.jobs.PauseJob(
        pb.PauseJobRequest(job_id="billing-report", note="hold"), metadata=md
    )
    assert paused.job.paused and paused.job.pause_note == "hold"
    resumed = await api.jobs.ResumeJob(pb.ResumeJobRequest(job_id="billing-report"), metadata=md)
    assert not resumed.job.paused

    # Runs keep the uid: run keys, Idempotency-Key and the scheduler never see the alias.
    run = (
        await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id="billing-report"), metadata=md)
    ).run
    assert run.job_id == uid and run.run_key.startswith(f"{uid}@")
    listed = await api.jobs.ListRuns(pb.ListRunsRequest(job_id="billing-report"), metadata=md)
    assert [r.run_key for r in listed.runs] == [run.run_key]
    ref = run_pb2.RunRef(job_id="billing-report", scheduled_at=run.scheduled_at)
    got = await api.jobs.GetRun(pb.GetRunRequest(ref=ref), metadata=md)
    assert got.run.run_key == run.run_key
    cancelled = await api.jobs.CancelRun(pb.CancelRunRequest(ref=ref), metadata=md)
    assert cancelled.run.status == run_pb2.RUN_STATUS_CANCELLED
    replayed = await api.jobs.ReplayRun(pb.ReplayRunRequest(ref=ref), metadata=md)
    assert replayed.run.status == run_pb2.RUN_STATUS_QUEUED
    now = datetime.now(UTC)
    backfilled = await api.jobs.BackfillJob(
        pb.BackfillJobRequest(
            job_id="billing-report", start_time=ts(now - timedelta(days=2)), end_time=ts(now)
        ),
        metadata=md,
    )
    assert len(backfilled.runs) in (1, 2) and {r.job_id for r in backfilled.runs} == {uid}
    preview = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(
            schedule=job_pb2.Schedule(cron="H * * * *"), job_id="billing-report", count=1
        ),
        metadata=md,
    )
    by_uid_preview = await api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(schedule=job_pb2.Schedule(cron="H * * * *"), job_id=uid, count=1),
        metadata=md,
    )
    assert preview.fire_times == by_uid_preview.fire_times  # H hashed from the uid

    await api.jobs.DeleteJob(pb.DeleteJobRequest(job_id="billing-report"), metadata=md)
    await expect_error(
        api.jobs.GetJob(pb.GetJobRequest(job_id="billing-report"), metadata=md), NOT_FOUND
    )
    await expect_error(
        api.jobs.DeleteJob(pb.DeleteJobRequest(job_id="billing-report"), metadata=md), NOT_FOUND
    )
    await api.jobs.DeleteJob(
        pb.DeleteJobRequest(job_id="billing-report", allow_missing=True), metadata=md
    )
    # The id is free again; the new job is another job, with another uid.
    again = await create(api, tenant, make_job("billing"), job_id="billing-report")
    assert again.job_id == "billing-report" and again.uid != uid


async def test_jobs_without_a_client_id_are_named_by_their_uid(api: Api, tenant: Tenant) -> None:
    job = await create(api, tenant, make_job("plain"))
    assert job.job_id == job.uid and str(uuid.UUID(job.uid)) == job.uid
    rows = await api.sql("SELECT client_job_id FROM jobs WHERE job_id = $1", uuid.UUID(job.uid))
    assert rows[0]["client_job_id"] is None


async def test_the_client_id_may_be_given_in_the_job_too(api: Api, tenant: Tenant) -> None:
    job = await create(api, tenant, make_job("inline", job_id="inline-id"))
    assert job.job_id == "inline-id"
    same = await create(api, tenant, make_job("both", job_id="both-id"), job_id="both-id")
    assert same.job_id == "both-id"
    await expect_error(
        create(api, tenant, make_job("clash", job_id="one"), job_id="two"),
        INVALID,
        field="job.job_id",
    )


BAD_IDS = {
    "upper case": "Report",
    "leading digit": "1report",
    "leading hyphen": "-report",
    "trailing hyphen": "report-",
    "underscore": "daily_report",
    "dot": "daily.report",
    "space": "daily report",
    "too long": "r" + "e" * 63,
    "NUL": "rep\x00ort",
    "non-ASCII": "répört",
}
# Of the form of a uid: refused as a new job's id; elsewhere a uid, which no job has.
UID_FORMS = {
    "a uid": "0b0c0d0e-0000-4000-8000-000000000000",
    "a uid starting with a letter": "abcdef01-2345-4678-9abc-def012345678",
    "32 hex digits": "abcdef0123456789abcdef0123456789",
}


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    "text", [*BAD_IDS.values(), *UID_FORMS.values()], ids=[*BAD_IDS, *UID_FORMS]
)
async def test_bad_client_ids_are_refused_naming_the_field(
    shared_api: Api, shared_tenant: Tenant, text: str
) -> None:
    api, tenant = shared_api, shared_tenant
    before = await api.counts()
    create_one = api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job(), job_id=text), metadata=tenant.md
    )
    create_batch = api.jobs.BatchCreateJobs(
        pb.BatchCreateJobsRequest(jobs=[make_job("a"), make_job("b", job_id=text)]),
        metadata=tenant.md,
    )
    for call, field in ((create_one, "job_id"), (create_batch, "jobs[1].job_id")):
        error = await expect_error(call, INVALID, field=field)
        [violation] = details(error)["BadRequest"].field_violations
        assert violation.field == field
    applied = api.jobs.ApplyJob(pb.ApplyJobRequest(job=make_job(job_id=text)), metadata=tenant.md)
    if text in UID_FORMS.values():
        await expect_error(applied, NOT_FOUND)
    else:
        await expect_error(applied, INVALID, field="job.job_id")
        await expect_error(
            api.jobs.GetJob(pb.GetJobRequest(job_id=text), metadata=tenant.md),
            INVALID,
            field="job_id",
        )
    assert await api.counts() == before


async def test_a_taken_client_id_is_already_exists(api: Api, tenant: Tenant) -> None:
    await create(api, tenant, make_job("first"), job_id="taken")
    before = await api.counts()
    await expect_error(
        create(api, tenant, make_job("second"), job_id="taken"), EXISTS, field="job_id"
    )
    await expect_error(
        api.jobs.BatchCreateJobs(
            pb.BatchCreateJobsRequest(
                jobs=[make_job("b0", job_id="free"), make_job("b1", job_id="taken")]
            ),
            metadata=tenant.md,
        ),
        EXISTS,
        field="jobs[1].job_id",
    )
    await expect_error(
        api.jobs.BatchCreateJobs(
            pb.BatchCreateJobsRequest(
                jobs=[make_job("b0", job_id="twice"), make_job("b1", job_id="twice")]
            ),
            metadata=tenant.md,
        ),
        INVALID,
        field="jobs[1].job_id",
        text="same id as jobs[0]",
    )
    assert await api.counts() == before
    batch = await api.jobs.BatchCreateJobs(
        pb.BatchCreateJobsRequest(jobs=[make_job("b0", job_id="b-zero"), make_job("b1")]),
        metadata=tenant.md,
    )
    assert batch.jobs[0].job_id == "b-zero" and batch.jobs[1].job_id == batch.jobs[1].uid


async def test_another_tenants_client_id_is_not_found(api: Api, tenant: Tenant) -> None:
    other = await api.tenant("globex")
    mine = await create(api, tenant, make_job("ours"), job_id="shared-name")
    # Answered exactly like a job that does not exist: nothing tells it is ours.
    for named, call in (
        ("shared-name", api.jobs.GetJob(pb.GetJobRequest(job_id="shared-name"), metadata=other.md)),
        (
            "shared-name",
            api.jobs.TriggerJob(pb.TriggerJobRequest(job_id="shared-name"), metadata=other.md),
        ),
        (
            "shared-name",
            api.jobs.DeleteJob(pb.DeleteJobRequest(job_id="shared-name"), metadata=other.md),
        ),
        (
            mine.uid,
            api.jobs.ApplyJob(
                pb.ApplyJobRequest(job=make_job("x", job_id=mine.uid)), metadata=other.md
            ),
        ),
    ):
        error = await expect_error(call, NOT_FOUND)
        assert error.details() == f"job {named} not found"
    # The other tenant has its own job by the same id, which does not touch ours.
    theirs = await create(api, other, make_job("theirs"), job_id="shared-name")
    assert theirs.uid != mine.uid
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id="shared-name"), metadata=tenant.md)
    assert got.job.uid == mine.uid and got.job.name == "ours"


# --- ApplyJob -----------------------------------------------------------------------------


async def test_apply_creates_then_leaves_an_equal_job_alone(api: Api, tenant: Tenant) -> None:
    first = await apply(api, tenant, wanted("nightly", labels={"team": "billing"}))
    assert first.outcome == CREATED and first.job.version == 1
    assert first.job.job_id == "nightly" and first.job.labels == {"team": "billing"}
    rows_before = await api.sql("SELECT version, updated_at, xmin::text FROM jobs")
    second = await apply(api, tenant, wanted("nightly", labels={"team": "billing"}))
    assert second.outcome == UNCHANGED and second.job == first.job
    # No write at all: the row is the same tuple.
    assert await api.sql("SELECT version, updated_at, xmin::text FROM jobs") == rows_before
    # Defaults spelled out and a lower-case method are the same definition.
    explicit = wanted("nightly", labels={"team": "billing"})
    explicit.target.http.method = "post"
    explicit.schedule.time_zone = "UTC"
    explicit.policies.retry.max_attempts = 5
    assert (await apply(api, tenant, explicit)).outcome == UNCHANGED
    # The answer for an equal job is the job as read: what the server returns on reads.
    export = job_pb2.Job()
    export.CopyFrom(first.job)
    for name in (
        "uid",
        "tenant_id",
        "next_run_at",
        "version",
        "create_time",
        "update_time",
        "stats",
    ):
        export.ClearField(name)
    assert (await apply(api, tenant, export)).outcome == UNCHANGED


async def test_apply_replaces_a_different_definition(api: Api, tenant: Tenant) -> None:
    first = await apply(
        api, tenant, wanted("sync", cron="0 3 * * *", labels={"a": "1"}, payload=b"x")
    )
    changed = await apply(api, tenant, wanted("sync", cron="30 4 * * *"))
    assert changed.outcome == UPDATED and changed.job.version == 2
    assert changed.job.uid == first.job.uid
    # A full replace: what the request leaves out takes its default.
    assert changed.job.labels == {} and changed.job.payload == b""
    next_run = changed.job.next_run_at.ToDatetime(UTC)
    assert (next_run.hour, next_run.minute) == (4, 30)  # recomputed like UpdateJob
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id="sync"), metadata=tenant.md)
    assert got.job == changed.job
    renamed = await apply(api, tenant, wanted("sync", name="sync-v2", cron="30 4 * * *"))
    assert renamed.outcome == UPDATED and renamed.job.name == "sync-v2"
    # By uid too; an unknown uid is not created (uids are the server's).
    by_uid = await apply(api, tenant, wanted(first.job.uid, name="sync-v2", cron="30 4 * * *"))
    assert by_uid.outcome == UNCHANGED and by_uid.job.job_id == "sync"
    before = await api.counts()
    await expect_error(apply(api, tenant, wanted(str(uuid.uuid4()))), NOT_FOUND)
    assert await api.counts() == before


async def test_apply_keeps_pause_state_as_operational(api: Api, tenant: Tenant) -> None:
    created = await apply(api, tenant, wanted("held", paused=True, pause_note="not yet"))
    assert created.job.paused and created.job.pause_note == "not yet"
    again = await apply(api, tenant, wanted("held"))
    assert again.outcome == UNCHANGED and again.job.paused and again.job.version == 1
    changed = await apply(api, tenant, wanted("held", description="docs"))
    assert changed.outcome == UPDATED and changed.job.paused
    assert changed.job.pause_note == "not yet"


async def test_apply_with_a_stale_version_is_aborted(api: Api, tenant: Tenant) -> None:
    await apply(api, tenant, wanted("guarded"))
    await apply(api, tenant, wanted("guarded", description="v2"))
    for job in (wanted("guarded", description="v3"), wanted("guarded", description="v2")):
        error = await expect_error(apply(api, tenant, job, expected_version=1), ABORTED)
        found = details(error)
        assert found["ErrorInfo"].reason == "VERSION_MISMATCH"
        assert dict(found["ErrorInfo"].metadata) == {
            "current_version": "2",
            "expected_version": "1",
        }
        [violation] = found["PreconditionFailure"].violations
        assert (violation.type, violation.subject) == ("VERSION", "jobs/guarded")
        assert "RetryInfo" not in found
    current = await api.jobs.GetJob(pb.GetJobRequest(job_id="guarded"), metadata=tenant.md)
    assert current.job.version == 2 and current.job.description == "v2"
    ok = await apply(api, tenant, wanted("guarded", description="v3"), expected_version=2)
    assert ok.outcome == UPDATED and ok.job.version == 3
    # A condition on a job that does not exist cannot hold.
    await expect_error(apply(api, tenant, wanted("absent"), expected_version=1), NOT_FOUND)
    await expect_error(
        apply(api, tenant, wanted("guarded"), expected_version=-1),
        INVALID,
        field="expected_version",
    )


async def test_apply_validate_only_writes_nothing(api: Api, tenant: Tenant) -> None:
    before = await api.counts()
    dry = await apply(api, tenant, wanted("dry", labels={"x": "y"}), validate_only=True)
    assert dry.outcome == CREATED and dry.job.uid == "" and dry.job.version == 1
    assert dry.job.job_id == "dry" and dry.job.labels == {"x": "y"}
    assert dry.job.policies.retry.max_attempts == 5  # defaults filled, as a real create
    assert await api.counts() == before
    await expect_error(
        apply(api, tenant, wanted("dry", cron="61 * * * *"), validate_only=True),
        INVALID,
        field="schedule.cron",
    )
    real = await apply(api, tenant, wanted("dry"))
    rows = await api.sql("SELECT version, updated_at FROM jobs")
    would = await apply(api, tenant, wanted("dry", description="new"), validate_only=True)
    assert would.outcome == UPDATED and would.job.version == 2 and would.job.description == "new"
    assert would.job.uid == real.job.uid
    assert await api.sql("SELECT version, updated_at FROM jobs") == rows
    same = await apply(api, tenant, wanted("dry"), validate_only=True)
    assert same.outcome == UNCHANGED and same.job == real.job


async def test_apply_request_id_answers_a_retry_like_the_first_call(
    api: Api, tenant: Tenant
) -> None:
    first = await apply(api, tenant, wanted("once-only"), request_id="deploy-1")
    retried = await apply(api, tenant, wanted("once-only"), request_id="deploy-1")
    assert first.outcome == retried.outcome == CREATED and retried.job == first.job
    changed = await apply(
        api, tenant, wanted("once-only", description="b"), expected_version=1, request_id="deploy-2"
    )
    # The retry is not refused by the version its first call moved on.
    retried = await apply(
        api, tenant, wanted("once-only", description="b"), expected_version=1, request_id="deploy-2"
    )
    assert changed.outcome == retried.outcome == UPDATED and retried.job.version == 2
    equal = await apply(api, tenant, wanted("once-only", description="b"), request_id="deploy-3")
    assert equal.outcome == UNCHANGED
    assert (
        await apply(api, tenant, wanted("once-only", description="b"), request_id="deploy-3")
    ).outcome == UNCHANGED
    await expect_error(
        apply(api, tenant, wanted("once-only", description="c"), request_id="deploy-1"),
        INVALID,
        field="request_id",
    )
    rows = await api.sql("SELECT request_id, outcome FROM job_requests ORDER BY request_id")
    assert [tuple(r) for r in rows] == [
        ("deploy-1", "created"),
        ("deploy-2", "updated"),
        ("deploy-3", "unchanged"),
    ]


async def test_concurrent_applies_of_one_new_id_make_one_job(api: Api, tenant: Tenant) -> None:
    same = await asyncio.gather(*(apply(api, tenant, wanted("herd")) for _ in range(8)))
    outcomes = sorted(r.outcome for r in same)
    assert outcomes == [CREATED] + [UNCHANGED] * 7
    assert len({r.job.uid for r in same}) == 1
    # Different definitions at once: one job, one creation, each later one an update
    # or (when it repeats the state it found) nothing.
    different = await asyncio.gather(
        *(apply(api, tenant, wanted("mixed", "mixed", description=f"d{i % 3}")) for i in range(8))
    )
    assert [r.outcome for r in different].count(CREATED) == 1
    assert len({r.job.uid for r in different}) == 1
    rows = await api.sql("SELECT client_job_id, count(*) AS n FROM jobs GROUP BY 1 ORDER BY 1")
    assert [tuple(r) for r in rows] == [("herd", 1), ("mixed", 1)]
    final = await api.jobs.GetJob(pb.GetJobRequest(job_id="mixed"), metadata=tenant.md)
    updates = [r.outcome for r in different].count(UPDATED)
    assert final.job.version == 1 + updates
    counts = await api.counts()
    assert counts["jobs"] == counts["job_count"] == 2


async def test_apply_refuses_a_name_another_job_has(api: Api, tenant: Tenant) -> None:
    await create(api, tenant, make_job("taken-name"))
    before = await api.counts()
    await expect_error(
        apply(api, tenant, wanted("newcomer", name="taken-name")), EXISTS, field="name"
    )
    assert await api.counts() == before
    await apply(api, tenant, wanted("newcomer", name="free-name"))
    await expect_error(
        apply(api, tenant, wanted("newcomer", name="taken-name")), EXISTS, field="name"
    )
