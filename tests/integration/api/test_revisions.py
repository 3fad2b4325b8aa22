"""Job history: every change leaves a revision (who, when, what changed, the request id),
written in the change's own statement; GetJob at a revision; rollback through the CLI."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from google.protobuf import field_mask_pb2
from typer.testing import CliRunner

from sundial.cli.app import app
from sundial.v1 import calendar_pb2, job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, make_job


async def test_every_change_leaves_a_revision_and_a_rollback_restores_one(
    api: Api, tenant: Tenant
) -> None:
    md = (*tenant.md, ("x-request-id", "req-create"))
    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("nightly")), metadata=md)).job
    await api.jobs.UpdateJob(
        pb.UpdateJobRequest(
            job=job_pb2.Job(job_id=job.job_id, schedule=job_pb2.Schedule(cron="30 4 * * *")),
            update_mask=field_mask_pb2.FieldMask(paths=["schedule"]),
        ),
        metadata=(*tenant.md, ("x-request-id", "req-update")),
    )
    await api.jobs.PauseJob(pb.PauseJobRequest(job_id=job.job_id, note="holiday"), metadata=md)
    listed = await api.jobs.ListJobRevisions(
        pb.ListJobRevisionsRequest(job_id=job.job_id), metadata=tenant.md
    )
    revisions = listed.revisions
    assert [r.version for r in revisions] == [3, 2, 1]
    assert [list(r.changed_fields) for r in revisions] == [
        ["paused", "pause_note"],
        ["schedule"],
        ["created"],
    ]
    assert revisions[1].request_id == "req-update" and revisions[2].request_id == "req-create"
    token_ids = {r.changed_by for r in revisions}
    assert len(token_ids) == 1 and token_ids != {""}  # the tenant's token, by id
    assert revisions[2].job.schedule.cron == "0 3 * * *"
    assert revisions[1].job.schedule.cron == "30 4 * * *"
    assert revisions[0].job.paused and revisions[0].job.pause_note == "holiday"
    # Pages, newest first.
    first = await api.jobs.ListJobRevisions(
        pb.ListJobRevisionsRequest(job_id=job.job_id, page_size=2), metadata=tenant.md
    )
    rest = await api.jobs.ListJobRevisions(
        pb.ListJobRevisionsRequest(
            job_id=job.job_id, page_size=2, page_token=first.next_page_token
        ),
        metadata=tenant.md,
    )
    assert [r.version for r in [*first.revisions, *rest.revisions]] == [3, 2, 1]
    assert not rest.next_page_token
    # GetJob at a revision.
    then = (
        await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id, version=1), metadata=tenant.md)
    ).job
    assert (then.version, then.schedule.cron, then.uid) == (1, "0 3 * * *", job.uid)
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id, version=9), metadata=tenant.md)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    # Rollback to version 1 through the CLI: a new revision with the old schedule.
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token, "COLUMNS": "200"}
    rolled = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["jobs", "rollback", job.job_id, "--to-version", "1", "-o", "json"],
        env=env,
    )
    assert rolled.exit_code == 0, rolled.output
    after = json.loads(rolled.stdout)["job"]
    assert after["schedule"]["cron"] == "0 3 * * *" and after["version"] == "4"
    assert after["paused"] is True  # operational state is not rolled back
    shown = await asyncio.to_thread(
        CliRunner().invoke, app, ["jobs", "history", job.job_id], env=env
    )
    assert shown.exit_code == 0, shown.output
    assert "schedule" in shown.stdout and "created" in shown.stdout


async def test_another_tenant_sees_no_history(api: Api, tenant: Tenant) -> None:
    job = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("mine")), metadata=tenant.md)
    ).job
    other = await api.tenant("globex")
    for call in (
        api.jobs.ListJobRevisions(pb.ListJobRevisionsRequest(job_id=job.job_id), metadata=other.md),
        api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id, version=1), metadata=other.md),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await api.jobs.ListJobRevisions(
            pb.ListJobRevisionsRequest(job_id=job.job_id, page_token="forged"), metadata=tenant.md
        )
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_rollback_job_is_a_server_rule(api: Api, tenant: Tenant) -> None:
    """RollbackJob restores a revision's definition as a new revision: version checked,
    paused state kept, validated as an update, audited."""
    job = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("nightly", description="first", labels={"a": "1"})),
            metadata=tenant.md,
        )
    ).job
    changed = (
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(
                    job_id=job.job_id,
                    schedule=job_pb2.Schedule(cron="30 4 * * *", time_zone="UTC"),
                    payload=b"second",
                ),
                update_mask=field_mask_pb2.FieldMask(paths=["schedule", "payload", "labels"]),
            ),
            metadata=tenant.md,
        )
    ).job
    paused = (
        await api.jobs.PauseJob(
            pb.PauseJobRequest(job_id=job.job_id, note="hold"), metadata=tenant.md
        )
    ).job
    assert paused.version == 3 and changed.payload == b"second" and not changed.labels

    async def refused(code: grpc.StatusCode, **fields: object) -> grpc.aio.AioRpcError:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await api.jobs.RollbackJob(
                pb.RollbackJobRequest(job_id=job.job_id, **fields),  # type: ignore[arg-type]
                metadata=tenant.md,
            )
        assert failed.value.code() == code, failed.value.details()
        return failed.value

    stale = await refused(grpc.StatusCode.ABORTED, version=1, expected_version=2)
    assert "version 3, not 2" in (stale.details() or "")
    assert await refused(grpc.StatusCode.INVALID_ARGUMENT, version=1, expected_version=-1)
    bad = await refused(grpc.StatusCode.INVALID_ARGUMENT, version=0)
    assert (bad.details() or "").startswith("version: ")
    await refused(grpc.StatusCode.NOT_FOUND, version=9)

    rolled = (
        await api.jobs.RollbackJob(
            pb.RollbackJobRequest(job_id=job.job_id, version=1, expected_version=3),
            metadata=tenant.md,
        )
    ).job
    assert rolled.version == 4
    assert (rolled.schedule.cron, rolled.payload, dict(rolled.labels)) == (
        "0 3 * * *",
        b"",
        {"a": "1"},
    )
    assert rolled.description == "first"
    assert rolled.paused and rolled.pause_note == "hold"  # operational, not rolled back
    newest = (
        await api.jobs.ListJobRevisions(
            pb.ListJobRevisionsRequest(job_id=job.job_id, page_size=1), metadata=tenant.md
        )
    ).revisions[0]
    assert newest.version == 4 and set(newest.changed_fields) >= {"schedule", "payload", "labels"}
    events = (
        await api.jobs.ListAuditEvents(pb.ListAuditEventsRequest(), metadata=tenant.md)
    ).events
    rollbacks = [e for e in events if e.method.endswith("/RollbackJob")]
    assert (rollbacks[0].code, rollbacks[0].resource) == ("OK", job.job_id)
    # Another tenant cannot roll this job back: it does not exist for them.
    other = await api.tenant("globex")
    with pytest.raises(grpc.aio.AioRpcError) as foreign:
        await api.jobs.RollbackJob(
            pb.RollbackJobRequest(job_id=job.job_id, version=1), metadata=other.md
        )
    assert foreign.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_rollback_is_validated_against_todays_calendars(api: Api, tenant: Tenant) -> None:
    await api.jobs.CreateCalendar(
        pb.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(
                name="holidays", kind=calendar_pb2.CALENDAR_KIND_EXCLUDE, dates=["12-25"]
            )
        ),
        metadata=tenant.md,
    )
    job = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(
                job=make_job(
                    "cal", schedule=job_pb2.Schedule(cron="0 9 * * *", calendars=["holidays"])
                )
            ),
            metadata=tenant.md,
        )
    ).job
    await api.jobs.UpdateJob(
        pb.UpdateJobRequest(
            job=job_pb2.Job(job_id=job.job_id, schedule=job_pb2.Schedule(cron="0 9 * * *")),
            update_mask=field_mask_pb2.FieldMask(paths=["schedule"]),
        ),
        metadata=tenant.md,
    )
    await api.jobs.DeleteCalendar(pb.DeleteCalendarRequest(name="holidays"), metadata=tenant.md)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await api.jobs.RollbackJob(
            pb.RollbackJobRequest(job_id=job.job_id, version=1), metadata=tenant.md
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (refused.value.details() or "").startswith("schedule.calendars[0]: ")
