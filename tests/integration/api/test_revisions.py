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
from sundial.v1 import job_pb2
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
