"""BatchApplyJobs and timed pauses through a real server on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf import timestamp_pb2

from sundial.v1 import bulk_pb2, job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.eventually import assert_eventually
from tests.integration.api.support import Api, StartApi, Tenant, expect_error, make_job

INVALID = grpc.StatusCode.INVALID_ARGUMENT
CREATED, UPDATED, UNCHANGED = (
    pb.APPLY_OUTCOME_CREATED,
    pb.APPLY_OUTCOME_UPDATED,
    pb.APPLY_OUTCOME_UNCHANGED,
)


def job(client_id: str, cron: str = "0 3 * * *", **fields: object) -> job_pb2.Job:
    return make_job(f"name-{client_id}", cron=cron, job_id=client_id, **fields)


async def apply(
    api: Api, tenant: Tenant, jobs: list[job_pb2.Job], validate_only: bool = False
) -> pb.BatchApplyJobsResponse:
    return await api.jobs.BatchApplyJobs(
        pb.BatchApplyJobsRequest(jobs=jobs, validate_only=validate_only), metadata=tenant.md
    )


async def test_each_item_has_its_own_result_and_a_repeat_is_unchanged(
    api: Api, tenant: Tenant
) -> None:
    other = await api.tenant("other")
    await apply(api, other, [job("a"), job("b")])
    await apply(api, tenant, [job("a"), job("b")])
    wanted = [
        job("a"),  # unchanged
        job("b", cron="0 4 * * *"),  # updated
        job("c"),  # created
        job("d", cron="not a cron"),  # its own error
        job("e", labels={"Bad Key": "x"}),  # its own error
    ]
    first = await apply(api, tenant, wanted)
    outcomes = [(r.job_id, r.outcome) for r in first.results]
    assert outcomes == [
        ("a", UNCHANGED),
        ("b", UPDATED),
        ("c", CREATED),
        ("d", pb.APPLY_OUTCOME_UNSPECIFIED),
        ("e", pb.APPLY_OUTCOME_UNSPECIFIED),
    ]
    assert first.results[1].job.version == 2 and first.results[1].job.schedule.cron == "0 4 * * *"
    assert first.results[2].job.uid and first.results[2].job.version == 1
    d, e = first.results[3].error, first.results[4].error
    assert d.code == "INVALID_ARGUMENT" and d.field == "jobs[3].schedule.cron"
    assert d.message.startswith("jobs[3].schedule.cron: ")
    assert e.code == "INVALID_ARGUMENT" and e.field.startswith("jobs[4].labels")
    assert not first.results[0].HasField("error") and not first.results[3].HasField("job")
    # Idempotent: the same call again changes nothing.
    again = await apply(api, tenant, wanted[:3])
    assert [r.outcome for r in again.results] == [UNCHANGED] * 3
    assert [r.job.version for r in again.results] == [1, 2, 1]
    # The other tenant's jobs of the same ids are its own.
    theirs = await api.jobs.GetJob(pb.GetJobRequest(job_id="b"), metadata=other.md)
    assert theirs.job.version == 1 and theirs.job.schedule.cron == "0 3 * * *"


async def test_validate_only_writes_nothing_and_conflicts_are_per_item(
    api: Api, tenant: Tenant
) -> None:
    before = await api.counts()
    checked = await apply(api, tenant, [job("a"), job("b")], validate_only=True)
    assert [r.outcome for r in checked.results] == [CREATED, CREATED]
    assert [r.job.uid for r in checked.results] == ["", ""]
    assert await api.counts() == before
    # Two ids, one name: items are applied side by side, and whichever create comes
    # second meets the first's name, as two ApplyJob calls would.
    clash = await apply(api, tenant, [job("a"), make_job("name-a", job_id="z")])
    results = sorted((r.outcome, r.error.code) for r in clash.results)
    assert results == [(pb.APPLY_OUTCOME_UNSPECIFIED, "ALREADY_EXISTS"), (CREATED, "")]


async def test_whole_call_refusals_name_the_field(api: Api, tenant: Tenant) -> None:
    await expect_error(apply(api, tenant, []), INVALID, field="jobs")
    await expect_error(apply(api, tenant, [job("a"), job("a")]), INVALID, field="jobs[1].job_id")
    many = [job(f"j{i}") for i in range(1001)]
    await expect_error(apply(api, tenant, many), INVALID, field="jobs")
    missing = await apply(api, tenant, [make_job("no-id")])
    assert missing.results[0].error.field == "jobs[0].job_id"
    assert (await api.counts())["jobs"] == 0


async def test_a_timed_pause_resumes_by_itself(start_api: StartApi) -> None:
    api = await start_api(pause_until_check_s=0.1)
    tenant = await api.tenant("acme")
    other = await api.tenant("other")
    created = await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("a")), metadata=tenant.md)
    theirs = await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("a")), metadata=other.md)
    await api.jobs.PauseJob(pb.PauseJobRequest(job_id=theirs.job.job_id), metadata=other.md)
    until = datetime.now(UTC) + timedelta(seconds=1.5)
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(until)
    paused = await api.jobs.PauseJob(
        pb.PauseJobRequest(job_id=created.job.job_id, note="window", pause_until=stamp),
        metadata=tenant.md,
    )
    assert paused.job.paused and paused.job.pause_until == stamp

    async def resumed() -> job_pb2.Job:
        got = await api.jobs.GetJob(pb.GetJobRequest(job_id=created.job.job_id), metadata=tenant.md)
        assert not got.job.paused, "still paused"
        return got.job

    job_now = await assert_eventually(resumed, timeout_s=15, what="the timed pause ended")
    assert datetime.now(UTC) >= until
    assert not job_now.HasField("pause_until") and job_now.version == 3
    assert job_now.next_run_at.ToDatetime(UTC) > until
    revisions = await api.jobs.ListJobRevisions(
        pb.ListJobRevisionsRequest(job_id=created.job.job_id), metadata=tenant.md
    )
    assert revisions.revisions[0].changed_by == "pause-until"
    # The other tenant's job, paused without an end, stays paused.
    still = await api.jobs.GetJob(pb.GetJobRequest(job_id=theirs.job.job_id), metadata=other.md)
    assert still.job.paused


async def test_pause_jobs_until_and_a_manual_resume_clears_it(api: Api, tenant: Tenant) -> None:
    created = await api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job("a", labels={"team": "x"})), metadata=tenant.md
    )
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(datetime.now(UTC) + timedelta(hours=2))
    await api.jobs.PauseJobs(
        bulk_pb2.PauseJobsRequest(selector="team=x", pause_until=stamp), metadata=tenant.md
    )
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id=created.job.job_id), metadata=tenant.md)
    assert got.job.paused and got.job.pause_until == stamp
    await api.jobs.ResumeJob(pb.ResumeJobRequest(job_id=created.job.job_id), metadata=tenant.md)
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id=created.job.job_id), metadata=tenant.md)
    assert not got.job.paused and not got.job.HasField("pause_until")
    rows = await api.sql("SELECT pause_until FROM jobs")
    assert rows[0]["pause_until"] is None
    far = timestamp_pb2.Timestamp()
    far.FromDatetime(datetime.now(UTC) + timedelta(days=400))
    await expect_error(
        api.jobs.PauseJob(
            pb.PauseJobRequest(job_id=created.job.job_id, pause_until=far), metadata=tenant.md
        ),
        INVALID,
        field="pause_until",
    )
