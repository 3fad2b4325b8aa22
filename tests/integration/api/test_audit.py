"""The audit log: every write call made with a tenant's tokens, who, on what, how it
ended; reads are not recorded, and a tenant sees only its own."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import field_mask_pb2

from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, make_job


async def test_write_calls_are_recorded_with_who_what_and_how_they_ended(
    api: Api, tenant: Tenant
) -> None:
    md = (*tenant.md, ("x-request-id", "req-audit-1"))
    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("nightly")), metadata=md)).job
    await api.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=tenant.md)  # a read
    with pytest.raises(grpc.aio.AioRpcError):
        await api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(job_id=job.job_id, schedule=job_pb2.Schedule(cron="61 * * * *")),
                update_mask=field_mask_pb2.FieldMask(paths=["schedule"]),
            ),
            metadata=tenant.md,
        )
    await api.jobs.PauseJob(pb.PauseJobRequest(job_id=job.job_id), metadata=tenant.md)
    listed = (
        await api.jobs.ListAuditEvents(pb.ListAuditEventsRequest(), metadata=tenant.md)
    ).events
    # The admin's calls on this tenant (creating it, issuing its token) are its history
    # too, by the bootstrap admin token.
    admin = [e for e in listed if e.method.startswith("sundial.v1.AdminService/")]
    assert [(e.method.rsplit("/", 1)[1], e.actor) for e in admin] == [
        ("CreateApiToken", "admin"),
        ("CreateTenant", "admin"),
    ]
    events = [e for e in listed if e.method.startswith("sundial.v1.JobService/")]
    assert [(e.method.rsplit("/", 1)[1], e.code) for e in events] == [
        ("PauseJob", "OK"),
        ("UpdateJob", "INVALID_ARGUMENT"),
        ("CreateJob", "OK"),
    ]
    assert events[2].request_id == "req-audit-1" and events[2].resource == "nightly"
    assert events[0].resource == job.job_id
    assert len({e.actor for e in events}) == 1 and events[0].actor  # the tenant's token id
    # Pages, newest first; another tenant sees none of it.
    first = await api.jobs.ListAuditEvents(
        pb.ListAuditEventsRequest(page_size=2), metadata=tenant.md
    )
    rest = await api.jobs.ListAuditEvents(
        pb.ListAuditEventsRequest(page_size=2, page_token=first.next_page_token),
        metadata=tenant.md,
    )
    assert [e.method for e in [*first.events, *rest.events]][:3] == [e.method for e in listed[:3]]
    assert len(first.events) == 2 and first.next_page_token
    other = await api.tenant("globex")
    seen = await api.jobs.ListAuditEvents(pb.ListAuditEventsRequest(), metadata=other.md)
    assert {e.method.rsplit("/", 1)[1] for e in seen.events} == {"CreateTenant", "CreateApiToken"}
    assert not {e.resource for e in seen.events} & {job.job_id, "nightly"}
