"""Scoped tenant tokens (docs/design.md section 7, "Scopes"): a read-only token reads
everything the console shows and is refused PERMISSION_DENIED naming the scope on every
write and on the signing and secret calls, over gRPC and over the HTTP port; tokens
issued without scopes keep every right; the CLI issues scoped tokens and says which
scope a refused call needed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from typer.testing import CliRunner

from sundial.api.scopes import METHOD_SCOPES
from sundial.cli.app import app
from sundial.client import error_details
from sundial.core.auth import Scope
from sundial.v1 import admin_pb2, job_service_pb2_grpc
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import (
    ADMIN_TOKEN,
    Api,
    StartApi,
    Tenant,
    bearer,
    expect_error,
    make_job,
)
from tests.integration.api.test_connect import JOBS, Http

pytestmark = pytest.mark.timeout(90)

DENIED = grpc.StatusCode.PERMISSION_DENIED
SERVICE = pb.DESCRIPTOR.services_by_name["JobService"]


async def issue(api: Api, tenant: Tenant, *scopes: int) -> str:
    """A token of ``tenant`` with ``scopes`` (none: the default, every scope)."""
    answer = await api.admin.CreateApiToken(
        admin_pb2.CreateApiTokenRequest(
            tenant_id=tenant.tenant_id,
            role=admin_pb2.TOKEN_ROLE_TENANT,
            description="scoped",
            scopes=list(scopes),
        ),
        metadata=api.admin_md,
    )
    return answer.secret


def request_of(method: str) -> Any:
    """An empty request of a JobService method (the scope check runs before it is read)."""
    descriptor = SERVICE.methods_by_name[method].input_type
    return message_factory.GetMessageClass(descriptor)()


async def test_a_read_only_token_reads_and_is_refused_every_write(api: Api, tenant: Tenant) -> None:
    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job()), metadata=tenant.md)).job
    await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=job.job_id), metadata=tenant.md)
    reader = bearer(await issue(api, tenant, admin_pb2.TOKEN_SCOPE_READ))

    # Every read the console makes.
    listed = await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=reader)
    assert [j.uid for j in listed.jobs] == [job.uid]
    runs = await api.jobs.ListRuns(pb.ListRunsRequest(job_id=job.uid), metadata=reader)
    assert len(runs.runs) == 1
    revisions = await api.jobs.ListJobRevisions(
        pb.ListJobRevisionsRequest(job_id=job.uid), metadata=reader
    )
    assert [r.version for r in revisions.revisions] == [1]
    await api.jobs.DescribeJob(pb.DescribeJobRequest(job_id=job.uid), metadata=reader)
    await api.jobs.ListAuditEvents(pb.ListAuditEventsRequest(), metadata=reader)
    await api.jobs.ListCalendars(pb.ListCalendarsRequest(), metadata=reader)
    await api.jobs.ListNotificationChannels(pb.ListNotificationChannelsRequest(), metadata=reader)
    await api.jobs.GetEgressPolicy(pb.GetEgressPolicyRequest(), metadata=reader)

    # Every method that is not a read, refused before its request is looked at.
    refused = [m for m, scope in METHOD_SCOPES.items() if scope is not Scope.READ]
    assert "RotateOwnSigningSecret" in refused and "CreateSecret" in refused
    for method in refused:
        call = getattr(api.jobs, method)(request_of(method), metadata=reader)
        needed = METHOD_SCOPES[method].value
        exc = await expect_error(call, DENIED, text=f"'{needed}' scope")
        info = error_details(exc)["ErrorInfo"]
        assert info.reason == "SCOPE_REQUIRED"  # type: ignore[attr-defined]
        assert info.metadata["scope"] == needed  # type: ignore[attr-defined]
    # Nothing was written by the refused calls.
    after = await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=tenant.md)
    assert [(j.uid, j.version) for j in after.jobs] == [(job.uid, 1)]


async def test_write_and_manage_are_separate(api: Api, tenant: Tenant) -> None:
    writer = bearer(
        await issue(api, tenant, admin_pb2.TOKEN_SCOPE_READ, admin_pb2.TOKEN_SCOPE_WRITE)
    )
    manager = bearer(await issue(api, tenant, admin_pb2.TOKEN_SCOPE_MANAGE))
    await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job()), metadata=writer)
    await expect_error(
        api.jobs.RotateOwnSigningSecret(pb.RotateOwnSigningSecretRequest(), metadata=writer),
        DENIED,
        text="RotateOwnSigningSecret needs a token with the 'manage' scope",
    )
    await expect_error(
        api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("other")), metadata=manager),
        DENIED,
        text="'write' scope",
    )
    await expect_error(api.jobs.ListJobs(pb.ListJobsRequest(), metadata=manager), DENIED)
    rotated = await api.jobs.RotateOwnSigningSecret(
        pb.RotateOwnSigningSecretRequest(), metadata=manager
    )
    assert rotated.signing_secret
    # The fixture's token was issued without scopes: it keeps every right.
    await api.jobs.RotateOwnSigningSecret(pb.RotateOwnSigningSecretRequest(), metadata=tenant.md)
    await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("third")), metadata=tenant.md)


async def test_scopes_are_listed_and_checked_at_issue(api: Api, tenant: Tenant) -> None:
    await issue(api, tenant, admin_pb2.TOKEN_SCOPE_WRITE, admin_pb2.TOKEN_SCOPE_READ)
    listed = await api.admin.ListApiTokens(
        admin_pb2.ListApiTokensRequest(tenant_id=tenant.tenant_id), metadata=api.admin_md
    )
    scopes = sorted(tuple(t.scopes) for t in listed.tokens)
    every = (admin_pb2.TOKEN_SCOPE_READ, admin_pb2.TOKEN_SCOPE_WRITE, admin_pb2.TOKEN_SCOPE_MANAGE)
    assert scopes == [every[:2], every]  # sorted; the unscoped token holds all three
    for request, field in (
        (
            admin_pb2.CreateApiTokenRequest(
                role=admin_pb2.TOKEN_ROLE_ADMIN,
                description="ops",
                scopes=[admin_pb2.TOKEN_SCOPE_READ],
            ),
            "scopes",
        ),
        (
            admin_pb2.CreateApiTokenRequest(
                tenant_id=tenant.tenant_id,
                role=admin_pb2.TOKEN_ROLE_TENANT,
                description="x",
                scopes=[admin_pb2.TOKEN_SCOPE_READ, 99],
            ),
            "scopes[1]",
        ),
    ):
        await expect_error(
            api.admin.CreateApiToken(request, metadata=api.admin_md),
            grpc.StatusCode.INVALID_ARGUMENT,
            field=field,
        )
    # Neither refusal issued a token.
    again = await api.admin.ListApiTokens(
        admin_pb2.ListApiTokensRequest(include_revoked=True), metadata=api.admin_md
    )
    assert len(again.tokens) == 2


async def test_scopes_over_the_http_port(start_api: StartApi) -> None:
    api = await start_api(http_listen="127.0.0.1:0")
    tenant = await api.tenant("acme")
    reader = await issue(api, tenant, admin_pb2.TOKEN_SCOPE_READ)
    http = Http(api)
    try:
        status, listed, _ = await http.call(f"{JOBS}/ListJobs", {}, reader)
        assert status == 200, listed
        status, error, _ = await http.call(f"{JOBS}/CreateJob", {"job": {}}, reader)
        assert status == 403, error
        assert error["code"] == "permission_denied"
        assert "'write' scope" in error["message"]
    finally:
        await http.close()


async def test_the_cli_issues_a_scoped_token_and_names_a_refusal(api: Api, tenant: Tenant) -> None:
    admin_env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": ADMIN_TOKEN, "COLUMNS": "250"}
    runner = CliRunner()
    created = await asyncio.to_thread(
        runner.invoke,
        app,
        [
            *("admin", "tokens", "create", "--role", "tenant", "--tenant", tenant.tenant_id),
            *("--description", "console viewer", "--scope", "read", "-o", "json"),
        ],
        env=admin_env,
    )
    assert created.exit_code == 0, created.output
    answer = json.loads(created.stdout)
    assert answer["token"]["scopes"] == ["TOKEN_SCOPE_READ"]
    env = {**admin_env, "SUNDIAL_TOKEN": answer["secret"]}
    listed = await asyncio.to_thread(runner.invoke, app, ["jobs", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    rotated = await asyncio.to_thread(runner.invoke, app, ["signing-secret", "rotate"], env=env)
    assert rotated.exit_code == 1
    assert "PERMISSION_DENIED" in rotated.output and "'manage' scope" in rotated.output


async def test_two_tenants_scopes_are_their_own(api: Api, tenant: Tenant) -> None:
    other = await api.tenant("other")
    reader = bearer(await issue(api, tenant, admin_pb2.TOKEN_SCOPE_READ))
    # Tenant A's read-only token changes nothing about B's default token, and reads
    # only A's jobs.
    await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job()), metadata=other.md)
    assert not (await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=reader)).jobs
    stub = job_service_pb2_grpc.JobServiceStub(api.channel)
    await stub.RotateOwnSigningSecret(pb.RotateOwnSigningSecretRequest(), metadata=other.md)
