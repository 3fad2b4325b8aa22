"""Run RPCs: TriggerJob, BackfillJob, ListRuns, GetRun, ReplayRun, CancelRun."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from sundial.core.clock import ManualClock
from sundial.core.partition import partition_of
from sundial.run import run_key
from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, Tenant, expect_error, make_job

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


async def new_job(api: Api, tenant: Tenant, **fields: object) -> job_pb2.Job:
    job = make_job(str(fields.pop("name", "hourly")), **fields)  # type: ignore[arg-type]
    return (await api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=tenant.md)).job


async def trigger(api: Api, tenant: Tenant, job_id: str, request_id: str = "") -> run_pb2.Run:
    response = await api.jobs.TriggerJob(
        pb.TriggerJobRequest(job_id=job_id, request_id=request_id), metadata=tenant.md
    )
    return response.run


async def test_trigger_creates_a_queued_manual_run(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant, paused=True)  # paused jobs can be triggered
    before = datetime.now(UTC)
    run = await trigger(api, tenant, job.job_id)
    at = run.scheduled_at.ToDatetime(UTC)
    assert before - timedelta(seconds=1) < at <= datetime.now(UTC)
    assert run.kind == run_pb2.RUN_KIND_MANUAL
    assert run.status == run_pb2.RUN_STATUS_QUEUED
    assert run.attempt == 0 and run.due_at == run.scheduled_at
    assert (
        run.run_key == run_key(job.job_id, at) == f"{job.job_id}@{run.scheduled_at.ToJsonString()}"
    )
    rows = await api.sql(
        "SELECT tenant_id, partition_id, kind, status, check_at, created_at FROM job_runs"
    )
    assert rows[0]["tenant_id"] == "acme"
    assert rows[0]["partition_id"] == partition_of(uuid.UUID(job.job_id))
    assert (rows[0]["kind"], rows[0]["status"]) == ("manual", "queued")
    assert rows[0]["check_at"] is not None  # the scheduler will publish it


async def test_trigger_is_idempotent_and_never_collides(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant)
    first = await trigger(api, tenant, job.job_id, request_id="t-1")
    again = await trigger(api, tenant, job.job_id, request_id="t-1")
    assert again.run_key == first.run_key
    other = await new_job(api, tenant, name="other")
    await expect_error(
        trigger(api, tenant, other.job_id, request_id="t-1"), INVALID, field="request_id"
    )
    # Without request ids, each trigger is its own run.
    second = await trigger(api, tenant, job.job_id)
    assert second.run_key != first.run_key
    await expect_error(trigger(api, tenant, "00000000-0000-4000-8000-000000000000"), NOT_FOUND)


async def test_trigger_at_an_occupied_instant_moves_by_a_microsecond(start_api: StartApi) -> None:
    clock = ManualClock(datetime(2030, 5, 17, 12, 0, 0, 250000, tzinfo=UTC))
    api = await start_api(clock=clock)
    tenant = await api.tenant("acme")
    job = await new_job(api, tenant)
    keys = [(await trigger(api, tenant, job.job_id)).run_key for _ in range(3)]
    assert keys == [
        f"{job.job_id}@2030-05-17T12:00:00.250Z",
        f"{job.job_id}@2030-05-17T12:00:00.250001Z",
        f"{job.job_id}@2030-05-17T12:00:00.250002Z",
    ]


async def test_backfill_creates_runs_for_past_occurrences(api: Api, tenant: Tenant) -> None:
    job = await new_job(
        api,
        tenant,
        cron="0 * * * *",
        schedule=job_pb2.Schedule(cron="0 * * * *", jitter=duration_pb2.Duration(seconds=30)),
    )
    start = datetime(2026, 1, 1, tzinfo=UTC)
    response = await api.jobs.BackfillJob(
        pb.BackfillJobRequest(
            job_id=job.job_id, start_time=ts(start), end_time=ts(start + timedelta(hours=5))
        ),
        metadata=tenant.md,
    )
    times = [r.scheduled_at.ToDatetime(UTC) for r in response.runs]
    assert times == [start + timedelta(hours=h) for h in range(5)]  # end is exclusive
    assert all(r.kind == run_pb2.RUN_KIND_BACKFILL for r in response.runs)
    assert all(r.status == run_pb2.RUN_STATUS_QUEUED for r in response.runs)
    assert all(
        timedelta(0)
        <= r.due_at.ToDatetime(UTC) - r.scheduled_at.ToDatetime(UTC)
        < timedelta(seconds=30)
        for r in response.runs
    )
    assert response.existing_count == 0 and not response.truncated
    # Repeating (and overlapping) the range leaves existing runs alone.
    again = await api.jobs.BackfillJob(
        pb.BackfillJobRequest(
            job_id=job.job_id, start_time=ts(start), end_time=ts(start + timedelta(hours=7))
        ),
        metadata=tenant.md,
    )
    assert len(again.runs) == 2 and again.existing_count == 5


async def test_backfill_of_a_fixed_delay_runs_every_delay_from_the_start(
    api: Api, tenant: Tenant
) -> None:
    """A fixed delay has no past fire times of its own (they followed the runs' ends):
    a backfill is one run every delay from the range's start, and moves nothing else."""
    schedule = job_pb2.Schedule(
        interval=job_pb2.IntervalSchedule(every=duration_pb2.Duration(seconds=900), from_end=True)
    )
    job = await new_job(api, tenant, name="fixed", schedule=schedule)
    start = datetime(2026, 1, 1, 9, 0, 7, tzinfo=UTC)
    response = await api.jobs.BackfillJob(
        pb.BackfillJobRequest(
            job_id=job.job_id, start_time=ts(start), end_time=ts(start + timedelta(hours=1))
        ),
        metadata=tenant.md,
    )
    times = [r.scheduled_at.ToDatetime(UTC) for r in response.runs]
    assert times == [start + timedelta(minutes=15 * k) for k in range(4)]
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)
    assert got.job.next_run_at == job.next_run_at


async def test_backfill_is_bounded_per_call(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant, cron="* * * * *", schedule=job_pb2.Schedule(cron="* * * * *"))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(minutes=1500)
    first = await api.jobs.BackfillJob(
        pb.BackfillJobRequest(job_id=job.job_id, start_time=ts(start), end_time=ts(end)),
        metadata=tenant.md,
    )
    assert len(first.runs) == 1000 and first.truncated
    assert first.next_start_time.ToDatetime(UTC) == start + timedelta(minutes=1000)
    rest = await api.jobs.BackfillJob(
        pb.BackfillJobRequest(
            job_id=job.job_id, start_time=first.next_start_time, end_time=ts(end)
        ),
        metadata=tenant.md,
    )
    assert len(rest.runs) == 500 and not rest.truncated
    assert (await api.counts())["job_runs"] == 1500


async def test_backfill_errors(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant)
    now = datetime.now(UTC)
    cases = [
        (pb.BackfillJobRequest(job_id=job.job_id, end_time=ts(now)), "start_time"),
        (pb.BackfillJobRequest(job_id=job.job_id, start_time=ts(now)), "end_time"),
        (
            pb.BackfillJobRequest(
                job_id=job.job_id,
                start_time=ts(now - timedelta(hours=1)),
                end_time=ts(now - timedelta(hours=2)),
            ),
            "end_time",
        ),
        (
            pb.BackfillJobRequest(
                job_id=job.job_id, start_time=ts(now), end_time=ts(now + timedelta(hours=1))
            ),
            "end_time",
        ),
    ]
    for request, field in cases:
        await expect_error(api.jobs.BackfillJob(request, metadata=tenant.md), INVALID, field=field)
    assert (await api.counts())["job_runs"] == 0


async def test_list_runs_filters_and_pages(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant, cron="0 * * * *", schedule=job_pb2.Schedule(cron="0 * * * *"))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    await api.jobs.BackfillJob(
        pb.BackfillJobRequest(
            job_id=job.job_id, start_time=ts(start), end_time=ts(start + timedelta(hours=10))
        ),
        metadata=tenant.md,
    )
    manual = await trigger(api, tenant, job.job_id)
    await api.sql(
        "UPDATE job_runs SET status = 'succeeded' WHERE scheduled_at < $1",
        start + timedelta(hours=3),
    )

    async def listing(**fields: object) -> list[datetime]:
        found: list[datetime] = []
        token = ""
        while True:
            page = await api.jobs.ListRuns(
                pb.ListRunsRequest(job_id=job.job_id, page_size=3, page_token=token, **fields),
                metadata=tenant.md,
            )
            found += [r.scheduled_at.ToDatetime(UTC) for r in page.runs]
            token = page.next_page_token
            if not token:
                return found

    every = await listing()
    assert len(every) == 11 and every == sorted(every, reverse=True)
    assert every[0] == manual.scheduled_at.ToDatetime(UTC)
    assert await listing(kinds=[run_pb2.RUN_KIND_MANUAL]) == [every[0]]
    assert await listing(statuses=[run_pb2.RUN_STATUS_SUCCEEDED]) == [
        start + timedelta(hours=h) for h in (2, 1, 0)
    ]
    assert await listing(
        scheduled_after=ts(start + timedelta(hours=4)),
        scheduled_before=ts(start + timedelta(hours=6)),
    ) == [start + timedelta(hours=5), start + timedelta(hours=4)]
    await expect_error(
        api.jobs.ListRuns(
            pb.ListRunsRequest(job_id=job.job_id, statuses=[run_pb2.RUN_STATUS_UNSPECIFIED]),
            metadata=tenant.md,
        ),
        INVALID,
        field="statuses",
    )
    first = await api.jobs.ListRuns(
        pb.ListRunsRequest(job_id=job.job_id, page_size=1), metadata=tenant.md
    )
    await expect_error(
        api.jobs.ListRuns(
            pb.ListRunsRequest(
                job_id=job.job_id, page_token=first.next_page_token, kinds=[run_pb2.RUN_KIND_MANUAL]
            ),
            metadata=tenant.md,
        ),
        INVALID,
        field="page_token",
    )


async def test_get_run_by_ref_and_key(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant)
    run = await trigger(api, tenant, job.job_id)
    by_ref = await api.jobs.GetRun(
        pb.GetRunRequest(ref=run_pb2.RunRef(job_id=job.job_id, scheduled_at=run.scheduled_at)),
        metadata=tenant.md,
    )
    by_key = await api.jobs.GetRun(pb.GetRunRequest(run_key=run.run_key), metadata=tenant.md)
    assert by_ref.run == by_key.run == run
    sub_micro = timestamp_pb2.Timestamp(seconds=run.scheduled_at.seconds, nanos=1)
    for request, field in [
        (pb.GetRunRequest(), "run"),
        (pb.GetRunRequest(run_key="garbage"), "run_key"),
        (pb.GetRunRequest(run_key=f"{job.job_id}@yesterday"), "run_key"),
        (pb.GetRunRequest(ref=run_pb2.RunRef(job_id=job.job_id)), "ref.scheduled_at"),
        (pb.GetRunRequest(ref=run_pb2.RunRef(scheduled_at=run.scheduled_at)), "ref.job_id"),
        (
            pb.GetRunRequest(ref=run_pb2.RunRef(job_id=job.job_id, scheduled_at=sub_micro)),
            "ref.scheduled_at",
        ),
    ]:
        await expect_error(api.jobs.GetRun(request, metadata=tenant.md), INVALID, field=field)
    await expect_error(
        api.jobs.GetRun(
            pb.GetRunRequest(run_key=f"{job.job_id}@2020-01-01T00:00:00Z"), metadata=tenant.md
        ),
        NOT_FOUND,
    )


async def test_replay_only_dead_or_cancelled_runs(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant)
    run = await trigger(api, tenant, job.job_id)
    await expect_error(
        api.jobs.ReplayRun(pb.ReplayRunRequest(run_key=run.run_key), metadata=tenant.md),
        PRECONDITION,
    )
    await api.sql(
        "UPDATE job_runs SET status = 'dead', attempt = 5, finished_at = now(),"
        " last_error = 'HTTP 500', error_class = 'retryable', check_at = NULL"
    )
    replayed = (
        await api.jobs.ReplayRun(pb.ReplayRunRequest(run_key=run.run_key), metadata=tenant.md)
    ).run
    assert replayed.run_key == run.run_key
    assert replayed.status == run_pb2.RUN_STATUS_QUEUED
    assert replayed.replay_count == 1 and replayed.attempt == 5
    assert not replayed.HasField("finished_at")
    assert replayed.last_error == "HTTP 500"  # kept
    rows = await api.sql("SELECT attempt_base, check_at FROM job_runs")
    assert rows[0]["attempt_base"] == 5 and rows[0]["check_at"] is not None
    # A cancelled run can be replayed too; a succeeded one cannot.
    await api.sql("UPDATE job_runs SET status = 'cancelled'")
    again = (
        await api.jobs.ReplayRun(
            pb.ReplayRunRequest(
                ref=run_pb2.RunRef(job_id=job.job_id, scheduled_at=run.scheduled_at)
            ),
            metadata=tenant.md,
        )
    ).run
    assert again.replay_count == 2
    await api.sql("UPDATE job_runs SET status = 'succeeded'")
    await expect_error(
        api.jobs.ReplayRun(pb.ReplayRunRequest(run_key=run.run_key), metadata=tenant.md),
        PRECONDITION,
        text="SUCCEEDED",
    )


async def test_cancel_run(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant)
    queued = await trigger(api, tenant, job.job_id)
    cancelled = (
        await api.jobs.CancelRun(
            pb.CancelRunRequest(run_key=queued.run_key, reason="not needed"), metadata=tenant.md
        )
    ).run
    assert cancelled.status == run_pb2.RUN_STATUS_CANCELLED
    assert cancelled.last_error == "not needed" and cancelled.HasField("finished_at")
    # Cancelling a cancelled run returns it unchanged.
    same = (
        await api.jobs.CancelRun(pb.CancelRunRequest(run_key=queued.run_key), metadata=tenant.md)
    ).run
    assert same == cancelled
    stats = (
        await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)
    ).job.stats
    assert stats.cancelled == 1 and stats.total_runs == 1

    running = await trigger(api, tenant, job.job_id)
    await api.sql(
        "UPDATE job_runs SET status = 'running', attempt = 1, lease_until = now() + interval '30 s'"
        " WHERE scheduled_at = $1",
        running.scheduled_at.ToDatetime(UTC),
    )
    asked = (
        await api.jobs.CancelRun(pb.CancelRunRequest(run_key=running.run_key), metadata=tenant.md)
    ).run
    assert asked.status == run_pb2.RUN_STATUS_RUNNING and asked.cancel_requested

    done = await trigger(api, tenant, job.job_id)
    await api.sql(
        "UPDATE job_runs SET status = 'succeeded' WHERE scheduled_at = $1",
        done.scheduled_at.ToDatetime(UTC),
    )
    await expect_error(
        api.jobs.CancelRun(pb.CancelRunRequest(run_key=done.run_key), metadata=tenant.md),
        PRECONDITION,
    )
    await expect_error(
        api.jobs.CancelRun(
            pb.CancelRunRequest(run_key=done.run_key, reason="r" * 1025), metadata=tenant.md
        ),
        INVALID,
        field="reason",
    )


async def test_trigger_at_a_fire_time_never_takes_that_occurrences_run_key(
    start_api: StartApi,
) -> None:
    # Triggered exactly at 13:00: the 13:00 occurrence keeps its own run key.
    clock = ManualClock(datetime(2030, 5, 17, 13, 0, tzinfo=UTC))
    api = await start_api(clock=clock)
    tenant = await api.tenant("acme")
    job = await new_job(api, tenant, cron="0 * * * *")
    run = await trigger(api, tenant, job.job_id)
    assert run.run_key == f"{job.job_id}@2030-05-17T13:00:00.000001Z"


async def test_replay_waits_for_an_unpublished_dead_letter(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant)
    run = await trigger(api, tenant, job.job_id)
    # Dead, with its DeadLetter still in the outbox (check_at set).
    await api.sql("UPDATE job_runs SET status = 'dead', attempt = 5, check_at = now()")
    await expect_error(
        api.jobs.ReplayRun(pb.ReplayRunRequest(run_key=run.run_key), metadata=tenant.md),
        grpc.StatusCode.UNAVAILABLE,
        text="dead letter",
    )
    [row] = await api.sql("SELECT status, check_at FROM job_runs")
    assert row["status"] == "dead" and row["check_at"] is not None  # untouched
    await api.sql("UPDATE job_runs SET check_at = NULL")  # the sweeper published it
    replayed = (
        await api.jobs.ReplayRun(pb.ReplayRunRequest(run_key=run.run_key), metadata=tenant.md)
    ).run
    assert replayed.status == run_pb2.RUN_STATUS_QUEUED


async def test_free_text_with_nul_is_refused_naming_the_field(api: Api, tenant: Tenant) -> None:
    job = await new_job(api, tenant)
    run = await trigger(api, tenant, job.job_id)
    await expect_error(
        api.jobs.CancelRun(
            pb.CancelRunRequest(run_key=run.run_key, reason="\x00"), metadata=tenant.md
        ),
        INVALID,
        field="reason",
    )
    await expect_error(
        api.jobs.PauseJob(pb.PauseJobRequest(job_id=job.job_id, note="a\x00"), metadata=tenant.md),
        INVALID,
        field="note",
    )
    await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(name_prefix="\x00"), metadata=tenant.md),
        INVALID,
        field="name_prefix",
    )
