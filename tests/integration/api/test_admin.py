"""AdminService: tenants and quotas, tokens, signing-secret rotation, cluster status."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2

from sundial.api.model import ClusterMember, Membership
from sundial.core.coord import connect_etcd
from sundial.devstack import Stack
from sundial.v1 import admin_pb2 as apb
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, expect_error, make_job

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND


def tenant(tenant_id: str, name: str = "Acme", **quotas: int) -> apb.Tenant:
    return apb.Tenant(tenant_id=tenant_id, display_name=name, quotas=apb.Quotas(**quotas))


async def test_create_get_update_tenant(api: Api) -> None:
    created = await api.admin.CreateTenant(
        apb.CreateTenantRequest(tenant=tenant("acme", max_jobs=5)), metadata=api.admin_md
    )
    # Quotas: explicit values kept, 0 takes the cluster default.
    assert created.tenant.quotas.max_jobs == 5
    assert created.tenant.quotas.max_concurrent_runs == 100
    assert created.signing_secret.startswith("whsec_") and len(created.signing_secret) >= 40
    assert len(created.tenant.signing_secrets) == 1
    assert not created.tenant.signing_secrets[0].HasField("expire_time")
    rows = await api.sql("SELECT signing_secret FROM tenants WHERE tenant_id = 'acme'")
    assert bytes(rows[0]["signing_secret"]) == created.signing_secret.encode()

    got = await api.admin.GetTenant(apb.GetTenantRequest(tenant_id="acme"), metadata=api.admin_md)
    assert got.tenant == created.tenant

    updated = await api.admin.UpdateTenant(
        apb.UpdateTenantRequest(
            tenant=tenant("acme", "Acme Corp", max_jobs=7, max_concurrent_runs=3),
            update_mask=field_mask_pb2.FieldMask(paths=["display_name", "quotas.max_jobs"]),
        ),
        metadata=api.admin_md,
    )
    assert updated.tenant.display_name == "Acme Corp"
    assert updated.tenant.quotas.max_jobs == 7
    assert updated.tenant.quotas.max_concurrent_runs == 100  # not in the mask

    await expect_error(
        api.admin.CreateTenant(
            apb.CreateTenantRequest(tenant=tenant("acme")), metadata=api.admin_md
        ),
        grpc.StatusCode.ALREADY_EXISTS,
        field="tenant.tenant_id",
    )
    await expect_error(
        api.admin.GetTenant(apb.GetTenantRequest(tenant_id="nobody"), metadata=api.admin_md),
        NOT_FOUND,
    )
    await expect_error(
        api.admin.UpdateTenant(
            apb.UpdateTenantRequest(
                tenant=tenant("nobody"),
                update_mask=field_mask_pb2.FieldMask(paths=["display_name"]),
            ),
            metadata=api.admin_md,
        ),
        NOT_FOUND,
    )


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("message", "field"),
    [
        (tenant(""), "tenant.tenant_id"),
        (tenant("Acme"), "tenant.tenant_id"),
        (tenant("1acme"), "tenant.tenant_id"),
        (tenant("a" * 64), "tenant.tenant_id"),
        (tenant("acme_corp"), "tenant.tenant_id"),
        (tenant("acme", ""), "tenant.display_name"),
        (tenant("acme", "x" * 201), "tenant.display_name"),
        (tenant("acme", max_jobs=100_000_001), "tenant.quotas.max_jobs"),
        (tenant("acme", max_jobs=-1), "tenant.quotas.max_jobs"),
        (tenant("acme", max_concurrent_runs=1_000_001), "tenant.quotas.max_concurrent_runs"),
    ],
)
async def test_create_tenant_validation(shared_api: Api, message: apb.Tenant, field: str) -> None:
    api = shared_api
    before = await api.sql("SELECT * FROM tenants ORDER BY tenant_id")
    await expect_error(
        api.admin.CreateTenant(apb.CreateTenantRequest(tenant=message), metadata=api.admin_md),
        INVALID,
        field=field,
    )
    assert await api.sql("SELECT * FROM tenants ORDER BY tenant_id") == before


async def test_update_tenant_mask_errors(api: Api) -> None:
    await api.tenant("acme")
    for paths in (["tenant_id"], ["signing_secrets"], ["quotas.bogus"]):
        await expect_error(
            api.admin.UpdateTenant(
                apb.UpdateTenantRequest(
                    tenant=tenant("acme"), update_mask=field_mask_pb2.FieldMask(paths=paths)
                ),
                metadata=api.admin_md,
            ),
            INVALID,
            field="update_mask.paths[0]",
        )


async def test_an_empty_mask_updates_every_field_of_the_tenant(api: Api) -> None:
    await api.admin.CreateTenant(
        apb.CreateTenantRequest(tenant=tenant("acme", max_jobs=5, max_concurrent_runs=4)),
        metadata=api.admin_md,
    )
    updated = await api.admin.UpdateTenant(
        apb.UpdateTenantRequest(tenant=tenant("acme", "Acme Corp", max_jobs=9)),
        metadata=api.admin_md,
    )
    assert updated.tenant.display_name == "Acme Corp"
    assert updated.tenant.quotas.max_jobs == 9
    assert updated.tenant.quotas.max_concurrent_runs == 100  # unset: the cluster default


async def test_list_tenants_pages(api: Api) -> None:
    for i in range(5):
        await api.admin.CreateTenant(
            apb.CreateTenantRequest(tenant=tenant(f"t{i}")), metadata=api.admin_md
        )
    seen: list[str] = []
    token = ""
    while True:
        page = await api.admin.ListTenants(
            apb.ListTenantsRequest(page_size=2, page_token=token), metadata=api.admin_md
        )
        seen += [t.tenant_id for t in page.tenants]
        token = page.next_page_token
        if not token:
            break
    assert seen == ["t0", "t1", "t2", "t3", "t4"]


async def test_tokens_list_filter_and_errors(api: Api) -> None:
    await api.tenant("acme")
    await api.tenant("beta")
    admin = await api.admin.CreateApiToken(
        apb.CreateApiTokenRequest(role=apb.TOKEN_ROLE_ADMIN, description="ops"),
        metadata=api.admin_md,
    )
    assert admin.token.tenant_id == "" and admin.token.role == apb.TOKEN_ROLE_ADMIN
    everything = await api.admin.ListApiTokens(apb.ListApiTokensRequest(), metadata=api.admin_md)
    assert len(everything.tokens) == 3
    times = [t.create_time.ToDatetime() for t in everything.tokens]
    assert times == sorted(times, reverse=True)  # newest first
    acme = await api.admin.ListApiTokens(
        apb.ListApiTokensRequest(tenant_id="acme"), metadata=api.admin_md
    )
    assert [t.tenant_id for t in acme.tokens] == ["acme"]
    await api.admin.RevokeApiToken(
        apb.RevokeApiTokenRequest(token_id=acme.tokens[0].token_id), metadata=api.admin_md
    )
    assert not (
        await api.admin.ListApiTokens(
            apb.ListApiTokensRequest(tenant_id="acme"), metadata=api.admin_md
        )
    ).tokens
    with_revoked = await api.admin.ListApiTokens(
        apb.ListApiTokensRequest(tenant_id="acme", include_revoked=True), metadata=api.admin_md
    )
    assert len(with_revoked.tokens) == 1
    paged = await api.admin.ListApiTokens(
        apb.ListApiTokensRequest(page_size=1, include_revoked=True), metadata=api.admin_md
    )
    second = await api.admin.ListApiTokens(
        apb.ListApiTokensRequest(
            page_size=1, include_revoked=True, page_token=paged.next_page_token
        ),
        metadata=api.admin_md,
    )
    assert paged.tokens[0].token_id != second.tokens[0].token_id

    past = timestamp_pb2.Timestamp()
    past.FromDatetime(datetime.now(UTC) - timedelta(minutes=1))
    bad: list[tuple[apb.CreateApiTokenRequest, grpc.StatusCode, str | None]] = [
        (apb.CreateApiTokenRequest(tenant_id="acme", description="x"), INVALID, "role"),
        (
            apb.CreateApiTokenRequest(role=apb.TOKEN_ROLE_TENANT, description="x"),
            INVALID,
            "tenant_id",
        ),
        (
            apb.CreateApiTokenRequest(tenant_id="acme", role=apb.TOKEN_ROLE_ADMIN, description="x"),
            INVALID,
            "tenant_id",
        ),
        (
            apb.CreateApiTokenRequest(tenant_id="acme", role=apb.TOKEN_ROLE_TENANT),
            INVALID,
            "description",
        ),
        (
            apb.CreateApiTokenRequest(
                tenant_id="acme", role=apb.TOKEN_ROLE_TENANT, description="x", expire_time=past
            ),
            INVALID,
            "expire_time",
        ),
        (
            apb.CreateApiTokenRequest(
                tenant_id="nobody", role=apb.TOKEN_ROLE_TENANT, description="x"
            ),
            NOT_FOUND,
            None,
        ),
    ]
    for request, code, field in bad:
        await expect_error(
            api.admin.CreateApiToken(request, metadata=api.admin_md), code, field=field
        )
    await expect_error(
        api.admin.RevokeApiToken(
            apb.RevokeApiTokenRequest(token_id="00000000-0000-4000-8000-000000000000"),
            metadata=api.admin_md,
        ),
        NOT_FOUND,
    )
    await expect_error(
        api.admin.RevokeApiToken(apb.RevokeApiTokenRequest(token_id="x"), metadata=api.admin_md),
        INVALID,
        field="token_id",
    )


async def test_rotate_signing_secret(api: Api) -> None:
    created = await api.admin.CreateTenant(
        apb.CreateTenantRequest(tenant=tenant("acme")), metadata=api.admin_md
    )
    before = datetime.now(UTC)
    rotated = await api.admin.RotateSigningSecret(
        apb.RotateSigningSecretRequest(tenant_id="acme"), metadata=api.admin_md
    )
    assert rotated.signing_secret != created.signing_secret
    secrets = rotated.tenant.signing_secrets
    assert len(secrets) == 2
    newest, older = secrets
    assert not newest.HasField("expire_time")
    expire = older.expire_time.ToDatetime(UTC)
    assert timedelta(hours=23) < expire - before <= timedelta(hours=24, seconds=5)
    rows = await api.sql("SELECT signing_secret FROM tenants WHERE tenant_id = 'acme'")
    assert bytes(rows[0]["signing_secret"]) == rotated.signing_secret.encode()

    # A rotation with zero overlap ends the others at once, and they are deleted.
    immediate = await api.admin.RotateSigningSecret(
        apb.RotateSigningSecretRequest(tenant_id="acme", overlap=duration_pb2.Duration()),
        metadata=api.admin_md,
    )
    assert len(immediate.tenant.signing_secrets) == 1
    assert not immediate.tenant.signing_secrets[0].HasField("expire_time")
    count = await api.sql("SELECT count(*) FROM tenant_signing_secrets WHERE tenant_id = 'acme'")
    assert count[0]["count"] == 1
    await expect_error(
        api.admin.RotateSigningSecret(
            apb.RotateSigningSecretRequest(
                tenant_id="acme", overlap=duration_pb2.Duration(seconds=8 * 86400)
            ),
            metadata=api.admin_md,
        ),
        INVALID,
        field="overlap",
    )
    await expect_error(
        api.admin.RotateSigningSecret(
            apb.RotateSigningSecretRequest(tenant_id="nobody"), metadata=api.admin_md
        ),
        NOT_FOUND,
    )


async def test_a_tenant_holds_at_most_two_valid_signing_secrets(api: Api) -> None:
    await api.admin.CreateTenant(
        apb.CreateTenantRequest(tenant=tenant("acme")), metadata=api.admin_md
    )
    week = duration_pb2.Duration(seconds=7 * 86400)
    answers = [
        await api.admin.RotateSigningSecret(
            apb.RotateSigningSecretRequest(tenant_id="acme", overlap=week), metadata=api.admin_md
        )
        for _ in range(30)
    ]
    # Each rotation during an overlap ends the older overlap: the newest and the one
    # before it are valid, nothing else is kept.
    for answer in answers:
        assert len(answer.tenant.signing_secrets) == 2
    newest, previous = answers[-1].tenant.signing_secrets
    assert not newest.HasField("expire_time") and previous.HasField("expire_time")
    rows = await api.sql(
        "SELECT secret FROM tenant_signing_secrets WHERE tenant_id = 'acme'"
        " ORDER BY created_at DESC"
    )
    assert [bytes(r["secret"]) for r in rows] == [
        answers[-1].signing_secret.encode(),
        answers[-2].signing_secret.encode(),
    ]


async def test_cluster_status_without_membership_reader(api: Api) -> None:
    await expect_error(
        api.admin.ClusterStatus(apb.ClusterStatusRequest(), metadata=api.admin_md),
        grpc.StatusCode.FAILED_PRECONDITION,
        text="etcd",
    )


class FakeMembership:
    async def membership(self) -> Membership:
        since = datetime(2026, 1, 1, tzinfo=UTC)
        members = [
            ClusterMember("sched-b", "10.0.0.2:7000", 128, 22, since, "0.1.0"),
            ClusterMember("sched-a", "10.0.0.1:7000", 127, 11, since, "0.1.0"),
        ]
        owners = {p: ("sched-a" if p % 2 else "sched-b") for p in range(255)}
        return Membership(members, owners)


async def test_cluster_status_reports_members_and_lag(start_api: StartApi) -> None:
    api = await start_api(membership=FakeMembership(), cluster="prod")
    acme = await api.tenant("acme")
    idle = await api.admin.ClusterStatus(apb.ClusterStatusRequest(), metadata=api.admin_md)
    assert idle.cluster == "prod" and idle.partition_count == 256
    assert [m.node_id for m in idle.members] == ["sched-a", "sched-b"]
    assert len(idle.partitions) == 256
    assert idle.partitions[1].node_id == "sched-a" and idle.partitions[255].node_id == ""
    assert not idle.HasField("oldest_due_time") and idle.dispatch_lag.ToTimedelta() == timedelta(0)

    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job()), metadata=acme.md)).job
    await api.sql(
        "UPDATE jobs SET next_run_at = now() - interval '90 seconds' WHERE job_id = $1::uuid",
        job.job_id,
    )
    late = await api.admin.ClusterStatus(apb.ClusterStatusRequest(), metadata=api.admin_md)
    assert late.HasField("oldest_due_time")
    assert timedelta(seconds=89) <= late.dispatch_lag.ToTimedelta() < timedelta(seconds=120)


async def test_cluster_status_reads_membership_from_etcd(start_api: StartApi, stack: Stack) -> None:
    cluster = f"apitest-{uuid.uuid4().hex[:8]}"
    etcd_config = stack.etcd_config()
    api = await start_api(
        etcd_endpoints=etcd_config.etcd_endpoints, cluster=cluster, **etcd_config.etcd_access()
    )
    etcd = await connect_etcd(stack.etcd_config())
    try:
        await etcd.put(f"/sundial/{cluster}/members/node-1".encode(), b"127.0.0.1:7001")
        await etcd.put(f"/sundial/{cluster}/members/node-2".encode(), b"127.0.0.1:7002")
        for partition in range(0, 256, 2):
            await etcd.put(f"/sundial/{cluster}/partitions/{partition}".encode(), b"node-1")
        await etcd.put(f"/sundial/{cluster}/partitions/1".encode(), b"node-2")
        status = await api.admin.ClusterStatus(apb.ClusterStatusRequest(), metadata=api.admin_md)
    finally:
        await etcd.delete_prefix(f"/sundial/{cluster}/".encode())
        await etcd.close()
    assert status.cluster == cluster
    assert [(m.node_id, m.partitions_owned) for m in status.members] == [
        ("node-1", 128),
        ("node-2", 1),
    ]
    assert [p.node_id for p in status.partitions[:4]] == ["node-1", "node-2", "node-1", ""]
