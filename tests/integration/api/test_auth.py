"""Bearer tokens: who may call what (UNAUTHENTICATED, PERMISSION_DENIED), revocation,
expiry, and the tokens' stored form."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf import timestamp_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sundial.v1 import admin_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, Tenant, bearer, expect_error, make_job

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED


async def test_missing_or_malformed_credentials(api: Api, tenant: Tenant) -> None:
    request = pb.ListJobsRequest()
    await expect_error(api.jobs.ListJobs(request), UNAUTHENTICATED)
    for metadata in (
        (("authorization", "Basic abc"),),
        (("authorization", "Bearer "),),
        bearer("sndl_not-a-real-token"),
        bearer(tenant.token + "x"),
    ):
        await expect_error(api.jobs.ListJobs(request, metadata=metadata), UNAUTHENTICATED)
        await expect_error(
            api.admin.ListTenants(admin_pb2.ListTenantsRequest(), metadata=metadata),
            UNAUTHENTICATED,
        )
    # The scheme is case-insensitive.
    await api.jobs.ListJobs(request, metadata=(("authorization", f"bearer {tenant.token}"),))


async def test_roles(api: Api, tenant: Tenant) -> None:
    # A tenant token on AdminService, and an admin token on JobService.
    await expect_error(
        api.admin.ListTenants(admin_pb2.ListTenantsRequest(), metadata=tenant.md), DENIED
    )
    await expect_error(
        api.jobs.CreateJob(pb.CreateJobRequest(job=make_job()), metadata=api.admin_md), DENIED
    )
    # An issued admin token works like the bootstrap one.
    issued = await api.admin.CreateApiToken(
        admin_pb2.CreateApiTokenRequest(role=admin_pb2.TOKEN_ROLE_ADMIN, description="ops"),
        metadata=api.admin_md,
    )
    listed = await api.admin.ListTenants(
        admin_pb2.ListTenantsRequest(), metadata=bearer(issued.secret)
    )
    assert [t.tenant_id for t in listed.tenants] == ["acme"]
    await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(), metadata=bearer(issued.secret)), DENIED
    )
    # Health and reflection need no token.
    health = health_pb2_grpc.HealthStub(api.channel)
    assert (await health.Check(health_pb2.HealthCheckRequest())).status == 1


async def test_tokens_are_stored_hashed_and_revocable(api: Api, tenant: Tenant) -> None:
    issued = await api.admin.CreateApiToken(
        admin_pb2.CreateApiTokenRequest(
            tenant_id=tenant.tenant_id, role=admin_pb2.TOKEN_ROLE_TENANT, description="ci"
        ),
        metadata=api.admin_md,
    )
    assert issued.token.prefix == issued.secret[:12]
    assert issued.secret.startswith("sndl_") and len(issued.secret) >= 40
    rows = await api.sql(
        "SELECT token_hash, prefix FROM api_tokens WHERE token_id = $1::uuid",
        issued.token.token_id,
    )
    assert bytes(rows[0]["token_hash"]) == hashlib.sha256(issued.secret.encode()).digest()
    stored = await api.sql("SELECT * FROM api_tokens")
    assert all(issued.secret not in str(dict(row)) for row in stored)

    await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=bearer(issued.secret))
    used = await api.admin.ListApiTokens(
        admin_pb2.ListApiTokensRequest(tenant_id=tenant.tenant_id), metadata=api.admin_md
    )
    by_id = {t.token_id: t for t in used.tokens}
    assert by_id[issued.token.token_id].HasField("last_used_time")

    revoked = await api.admin.RevokeApiToken(
        admin_pb2.RevokeApiTokenRequest(token_id=issued.token.token_id), metadata=api.admin_md
    )
    assert revoked.token.HasField("revoke_time")
    await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(), metadata=bearer(issued.secret)), UNAUTHENTICATED
    )
    # Revoking again keeps the first revoke time.
    again = await api.admin.RevokeApiToken(
        admin_pb2.RevokeApiTokenRequest(token_id=issued.token.token_id), metadata=api.admin_md
    )
    assert again.token.revoke_time == revoked.token.revoke_time
    # The tenant's other token still works.
    await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=tenant.md)


async def test_expired_token_is_refused(api: Api, tenant: Tenant) -> None:
    expire = timestamp_pb2.Timestamp()
    expire.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    issued = await api.admin.CreateApiToken(
        admin_pb2.CreateApiTokenRequest(
            tenant_id=tenant.tenant_id,
            role=admin_pb2.TOKEN_ROLE_TENANT,
            description="short-lived",
            expire_time=expire,
        ),
        metadata=api.admin_md,
    )
    await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=bearer(issued.secret))
    await api.sql(
        "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE token_id = $1::uuid",
        issued.token.token_id,
    )
    await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(), metadata=bearer(issued.secret)), UNAUTHENTICATED
    )


async def test_bootstrap_admin_token_can_be_disabled(start_api: StartApi) -> None:
    api = await start_api(admin_token="")
    await expect_error(
        api.admin.ListTenants(admin_pb2.ListTenantsRequest(), metadata=api.admin_md),
        UNAUTHENTICATED,
    )
