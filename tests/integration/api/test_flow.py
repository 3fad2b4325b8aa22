"""Flow control through JobService and AdminService (flow.proto, docs/design.md section 7
"Flow control"), against the API's real graph and PostgreSQL.

SetFlowLimit, ListFlowLimits and DeleteFlowLimit: the stored limits and the state of each
key (waiting and running runs, the bucket's tokens, a target's Retry-After), paging,
the audit log, the per-tenant quota under the tenant's lock, refusals naming the field
with nothing written, and two tenants that never see or change each other's limits. A
job's flow policy round-trips through CreateJob, GetJob and UpdateJob; a tenant's fair
weight through AdminService. The runs the schedulers would hold are written with SQL,
as the schedulers write them (run_waits, job_runs).
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2

from sundial.client import error_details
from sundial.core.clock import ManualClock
from sundial.v1 import admin_pb2 as apb
from sundial.v1 import flow_pb2, job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, Tenant, expect_error, make_job

pytestmark = pytest.mark.timeout(60)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
T0 = datetime(2030, 1, 1, tzinfo=UTC)
ORIGIN = "http://127.0.0.1:9"  # make_job's target, as the dispatcher resolves its origin


async def set_limit(api: Api, tenant: Tenant, key: str, **limits: Any) -> flow_pb2.FlowLimit:
    answer = await api.jobs.SetFlowLimit(
        flow_pb2.SetFlowLimitRequest(limit=flow_pb2.FlowLimit(key=key, **limits)),
        metadata=tenant.md,
    )
    return answer.limit


async def list_limits(api: Api, tenant: Tenant, page_size: int = 0) -> list[flow_pb2.FlowLimit]:
    """Every limit of the tenant, page by page."""
    found: list[flow_pb2.FlowLimit] = []
    token = ""
    while True:
        page = await api.jobs.ListFlowLimits(
            flow_pb2.ListFlowLimitsRequest(page_size=page_size, page_token=token),
            metadata=tenant.md,
        )
        found.extend(page.limits)
        token = page.next_page_token
        if not token:
            return found


async def by_key(api: Api, tenant: Tenant) -> dict[str, flow_pb2.FlowLimit]:
    return {limit.key: limit for limit in await list_limits(api, tenant)}


async def test_set_list_delete_with_buckets_and_the_audit_log(start_api: StartApi) -> None:
    clock = ManualClock(T0)
    api = await start_api(clock=clock)
    tenant = await api.tenant("acme")
    made = await set_limit(api, tenant, "crm", rate_per_second=2.5)
    # Burst 0 is one second's worth of the rate, at least 1; the bucket starts full.
    assert (made.rate_per_second, made.burst, made.max_running) == (2.5, 3, 0)
    assert made.available_tokens == 3.0
    assert made.create_time.ToDatetime(UTC) == T0 == made.update_time.ToDatetime(UTC)
    assert not made.HasField("blocked_until")
    assert (made.waiting_runs, made.running_runs) == (0, 0)
    slow = await set_limit(api, tenant, "slow", rate_per_second=0.01)
    assert slow.burst == 1
    only_running = await set_limit(api, tenant, "customer=42", max_running=5)
    assert (only_running.rate_per_second, only_running.burst) == (0.0, 0)
    assert only_running.available_tokens == 0.0  # no rate limit, no bucket

    # The schedulers took every token at T0; the bucket refills at the rate, up to its size.
    await api.sql("UPDATE flow_limits SET tokens = 0, refilled_at = $1 WHERE key = 'crm'", T0)
    clock.advance(0.8)
    assert (await by_key(api, tenant))["crm"].available_tokens == pytest.approx(2.0)
    clock.advance(60)
    assert (await by_key(api, tenant))["crm"].available_tokens == 3.0
    # A target's Retry-After blocks the key until then; past it, nothing is shown.
    await api.sql(
        "UPDATE flow_limits SET blocked_until = $1 WHERE key = 'crm'", T0 + timedelta(seconds=90)
    )
    blocked = (await by_key(api, tenant))["crm"]
    assert blocked.blocked_until.ToDatetime(UTC) == T0 + timedelta(seconds=90)
    clock.advance(30)
    assert not (await by_key(api, tenant))["crm"].HasField("blocked_until")

    # Replacing the limits without changing the rate or burst keeps the bucket as the
    # schedulers left it; a changed rate starts a full bucket at now.
    await api.sql("UPDATE flow_limits SET tokens = 0, refilled_at = $1 WHERE key = 'crm'", T0)
    kept = await set_limit(api, tenant, "crm", rate_per_second=2.5, burst=3, max_running=7)
    assert (kept.max_running, kept.available_tokens) == (7, 3.0)  # refilled since T0
    (row,) = await api.sql("SELECT tokens, refilled_at FROM flow_limits WHERE key = 'crm'")
    assert (row["tokens"], row["refilled_at"]) == (0.0, T0)
    changed = await set_limit(api, tenant, "crm", rate_per_second=50, burst=10)
    (row,) = await api.sql("SELECT tokens, refilled_at FROM flow_limits WHERE key = 'crm'")
    assert (row["tokens"], row["refilled_at"]) == (10.0, clock.now())
    assert (changed.burst, changed.max_running, changed.available_tokens) == (10, 0, 10.0)
    assert changed.create_time.ToDatetime(UTC) == T0
    assert changed.update_time.ToDatetime(UTC) == clock.now()

    # Pages by key in byte order ("C" collation: upper case first), one at a time too.
    await set_limit(api, tenant, "Zeta", max_running=1)
    keys = ["Zeta", "crm", "customer=42", "slow"]
    assert [limit.key for limit in await list_limits(api, tenant)] == keys
    assert [limit.key for limit in await list_limits(api, tenant, page_size=1)] == keys
    await expect_error(
        api.jobs.ListFlowLimits(
            flow_pb2.ListFlowLimitsRequest(page_token="nope"), metadata=tenant.md
        ),
        INVALID,
        field="page_token",
    )

    await api.jobs.DeleteFlowLimit(flow_pb2.DeleteFlowLimitRequest(key="slow"), metadata=tenant.md)
    await expect_error(
        api.jobs.DeleteFlowLimit(flow_pb2.DeleteFlowLimitRequest(key="slow"), metadata=tenant.md),
        grpc.StatusCode.NOT_FOUND,
    )
    assert [limit.key for limit in await list_limits(api, tenant)] == keys[:3]

    # Every write is in the audit log, naming the key.
    events = await api.jobs.ListAuditEvents(pb.ListAuditEventsRequest(), metadata=tenant.md)
    flow = [
        (e.method.rsplit("/", 1)[1], e.resource, e.code)
        for e in events.events
        if "FlowLimit" in e.method
    ]
    assert flow[:2] == [
        ("DeleteFlowLimit", "flow_limits/slow", "NOT_FOUND"),
        ("DeleteFlowLimit", "flow_limits/slow", "OK"),
    ]
    assert ("SetFlowLimit", "flow_limits/customer=42", "OK") in flow
    assert not any(method.startswith("List") for method, _, _ in flow)


BAD_LIMITS: dict[str, tuple[dict[str, Any], str]] = {
    "no key": ({"rate_per_second": 1}, "limit.key"),
    "long key": ({"key": "k" * 201, "rate_per_second": 1}, "limit.key"),
    "control character in key": ({"key": "a\nb", "rate_per_second": 1}, "limit.key"),
    "negative rate": ({"key": "k", "rate_per_second": -1}, "limit.rate_per_second"),
    "rate too high": ({"key": "k", "rate_per_second": 10_000.5}, "limit.rate_per_second"),
    "rate NaN": ({"key": "k", "rate_per_second": math.nan}, "limit.rate_per_second"),
    "rate infinite": ({"key": "k", "rate_per_second": math.inf}, "limit.rate_per_second"),
    "negative burst": ({"key": "k", "rate_per_second": 1, "burst": -1}, "limit.burst"),
    "burst too large": ({"key": "k", "rate_per_second": 1, "burst": 10_001}, "limit.burst"),
    "burst without a rate": ({"key": "k", "burst": 5, "max_running": 1}, "limit.burst"),
    "negative max_running": ({"key": "k", "max_running": -1}, "limit.max_running"),
    "max_running too large": ({"key": "k", "max_running": 100_001}, "limit.max_running"),
    "neither limit": ({"key": "k"}, "limit.rate_per_second"),
}


async def test_bad_limits_are_refused_naming_the_field_and_write_nothing(
    api: Api, tenant: Tenant
) -> None:
    await set_limit(api, tenant, "k", rate_per_second=1, burst=2, max_running=3)
    before = await api.sql("SELECT * FROM flow_limits")
    for case, (fields, field) in BAD_LIMITS.items():
        error = await expect_error(
            api.jobs.SetFlowLimit(
                flow_pb2.SetFlowLimitRequest(limit=flow_pb2.FlowLimit(**fields)), metadata=tenant.md
            ),
            INVALID,
            field=field,
        )
        assert "INTERNAL" not in (error.details() or ""), case
    await expect_error(
        api.jobs.SetFlowLimit(flow_pb2.SetFlowLimitRequest(), metadata=tenant.md),
        INVALID,
        field="limit",
    )
    for key, field in (("", "key"), ("x" * 201, "key"), ("tab\there", "key")):
        await expect_error(
            api.jobs.DeleteFlowLimit(flow_pb2.DeleteFlowLimitRequest(key=key), metadata=tenant.md),
            INVALID,
            field=field,
        )
    assert await api.sql("SELECT * FROM flow_limits") == before
    # The extremes are accepted.
    top = await set_limit(api, tenant, "k" * 200, rate_per_second=10_000, burst=10_000)
    assert (top.burst, top.available_tokens) == (10_000, 10_000.0)
    await set_limit(api, tenant, "émoji ☃ key", max_running=100_000)


async def test_waiting_and_running_runs_per_key(api: Api) -> None:
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")

    async def job(tenant: Tenant, name: str, **flow: Any) -> str:
        spec = make_job(name)
        spec.policies.flow.CopyFrom(job_pb2.FlowPolicy(**flow))
        created = await api.jobs.CreateJob(pb.CreateJobRequest(job=spec), metadata=tenant.md)
        return created.job.uid

    both = await job(a, "both", rate_limit_key="crm", concurrency_key="customer=42")
    origin = await job(a, "origin", concurrency_key="customer=42")
    plain = await job(a, "plain")
    other = await job(b, "other", rate_limit_key="crm", concurrency_key="customer=42")
    for tenant in (a, b):
        await set_limit(api, tenant, "crm", rate_per_second=10)
        await set_limit(api, tenant, "customer=42", max_running=2)
        await set_limit(api, tenant, ORIGIN, rate_per_second=5)
        await set_limit(api, tenant, "idle", max_running=1)

    async def run(job_id: str, minute: int, status: str, *, published: bool = False) -> None:
        await api.sql(
            """INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind, status,
                   attempt, dispatch_seq, lease_until, executor_id, created_at, updated_at)
               SELECT job_id, $2::timestamptz, tenant_id, partition_id, 'scheduled', $3::text,
                      CASE WHEN $3::text = 'queued' THEN 0 ELSE 1 END, $4::bigint,
                      CASE WHEN $3::text = 'running' THEN $2::timestamptz + interval '30 s' END,
                      CASE WHEN $3::text = 'running' THEN 'executor-1' END,
                      $2::timestamptz, $2::timestamptz
                 FROM jobs WHERE job_id = $1""",
            uuid.UUID(job_id),
            T0 + timedelta(minutes=minute),
            status,
            7 if published else 0,
        )

    async def wait(job_id: str, minute: int, rate_key: str) -> None:
        """A run held for admission: queued, never published, and its run_waits row."""
        await run(job_id, minute, "queued")
        await api.sql(
            """INSERT INTO run_waits (job_id, scheduled_at, tenant_id, partition_id, priority,
                   due_at, rate_key)
               SELECT job_id, $2, tenant_id, partition_id, 3, $2, $3 FROM jobs WHERE job_id = $1""",
            uuid.UUID(job_id),
            T0 + timedelta(minutes=minute),
            rate_key,
        )

    await wait(both, 1, "crm")
    await wait(origin, 2, ORIGIN)
    await wait(plain, 3, ORIGIN)
    await run(both, 4, "running")
    await run(origin, 5, "running")
    await run(origin, 6, "queued", published=True)  # waits for a lease (the key is full)
    await run(plain, 7, "running")
    await run(both, 8, "succeeded")
    for minute in range(1, 5):  # tenant B's runs on the same keys count for B alone
        await wait(other, 10 + minute, "crm")
    await run(other, 20, "running")

    def state(limit: flow_pb2.FlowLimit) -> tuple[int, int]:
        return limit.waiting_runs, limit.running_runs

    assert {key: state(limit) for key, limit in (await by_key(api, a)).items()} == {
        "crm": (1, 1),  # the wait of "both"; "both" running
        "customer=42": (3, 2),  # both jobs' waits and the published one; two running
        ORIGIN: (2, 0),  # resolved at dispatch: running runs are not attributed to it
        "idle": (0, 0),
    }
    assert {key: state(limit) for key, limit in (await by_key(api, b)).items()} == {
        "crm": (4, 1),
        "customer=42": (4, 1),
        ORIGIN: (0, 0),
        "idle": (0, 0),
    }
    single = await set_limit(api, a, "customer=42", max_running=3)  # SetFlowLimit shows it too
    assert state(single) == (3, 2)


async def test_a_tenants_limits_are_its_own(api: Api) -> None:
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    await set_limit(api, a, "shared", rate_per_second=1, max_running=1)
    await set_limit(api, a, "a-only", max_running=4)
    assert await list_limits(api, b) == []
    await expect_error(
        api.jobs.DeleteFlowLimit(flow_pb2.DeleteFlowLimitRequest(key="a-only"), metadata=b.md),
        grpc.StatusCode.NOT_FOUND,
    )
    # B setting the same key makes B's own limit; A's stays as it was.
    theirs = await set_limit(api, b, "shared", rate_per_second=100)
    assert (theirs.rate_per_second, theirs.max_running) == (100.0, 0)
    mine = await by_key(api, a)
    assert sorted(mine) == ["a-only", "shared"]
    assert (mine["shared"].rate_per_second, mine["shared"].max_running) == (1.0, 1)
    await api.jobs.DeleteFlowLimit(flow_pb2.DeleteFlowLimitRequest(key="shared"), metadata=b.md)
    assert sorted(await by_key(api, a)) == ["a-only", "shared"]
    assert await list_limits(api, b) == []
    # A page token of A's is no use to B.
    page = await api.jobs.ListFlowLimits(flow_pb2.ListFlowLimitsRequest(page_size=1), metadata=a.md)
    await expect_error(
        api.jobs.ListFlowLimits(
            flow_pb2.ListFlowLimitsRequest(page_size=1, page_token=page.next_page_token),
            metadata=b.md,
        ),
        INVALID,
        field="page_token",
    )


async def test_limits_per_tenant_are_capped_under_its_lock(start_api: StartApi) -> None:
    api = await start_api(max_flow_limits=3)
    a, b = await api.tenant("tenant-a"), await api.tenant("tenant-b")
    # Ten new keys at once: the tenant's row lock lets exactly three in.
    answers = await asyncio.gather(
        *(set_limit(api, a, f"key-{i}", max_running=1) for i in range(10)),
        return_exceptions=True,
    )
    refused = [e for e in answers if isinstance(e, grpc.aio.AioRpcError)]
    assert len(refused) == 7, answers
    assert {e.code() for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    info = error_details(refused[0])["ErrorInfo"]
    assert info.metadata["quota"] == "max_flow_limits"  # type: ignore[attr-defined]
    assert info.metadata["limit"] == "3"  # type: ignore[attr-defined]
    assert "limit of 3 flow limits" in (refused[0].details() or "")
    kept = [limit.key for limit in await list_limits(api, a)]
    assert len(kept) == 3
    # A key it has is replaced at the cap; another is not added; B's keys are its own.
    await set_limit(api, a, kept[0], rate_per_second=3)
    await expect_error(
        set_limit(api, a, "one-more", max_running=1), grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    for i in range(3):
        await set_limit(api, b, f"key-{i}", max_running=1)
    await api.jobs.DeleteFlowLimit(flow_pb2.DeleteFlowLimitRequest(key=kept[1]), metadata=a.md)
    await set_limit(api, a, "one-more", max_running=1)


async def test_a_jobs_flow_policy_round_trips(api: Api, tenant: Tenant) -> None:
    plain = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("plain")), metadata=tenant.md)
    ).job
    assert plain.policies.flow == job_pb2.FlowPolicy(priority=3)  # the defaults, shown
    spec = make_job("flowing")
    spec.policies.flow.CopyFrom(
        job_pb2.FlowPolicy(priority=1, rate_limit_key="crm", concurrency_key="customer=42")
    )
    created = (await api.jobs.CreateJob(pb.CreateJobRequest(job=spec), metadata=tenant.md)).job
    assert created.policies.flow == spec.policies.flow
    got = (await api.jobs.GetJob(pb.GetJobRequest(job_id=created.job_id), metadata=tenant.md)).job
    assert got.policies.flow == spec.policies.flow
    (row,) = await api.sql(
        "SELECT policies->'flow' AS flow FROM job_definitions WHERE job_id = $1",
        uuid.UUID(created.uid),
    )
    assert json.loads(row["flow"]) == {
        "priority": 1,
        "rate_limit_key": "crm",
        "concurrency_key": "customer=42",
    }

    async def update(job: job_pb2.Job, *paths: str) -> job_pb2.Job:
        job.job_id = created.job_id
        request = pb.UpdateJobRequest(job=job, update_mask=field_mask_pb2.FieldMask(paths=paths))
        return (await api.jobs.UpdateJob(request, metadata=tenant.md)).job

    # One field of the flow policy; the rest stays.
    changed = await update(
        job_pb2.Job(policies=job_pb2.Policies(flow=job_pb2.FlowPolicy(priority=5))),
        "policies.flow.priority",
    )
    assert changed.policies.flow == job_pb2.FlowPolicy(
        priority=5, rate_limit_key="crm", concurrency_key="customer=42"
    )
    # The whole policies: what the request leaves unset goes back to its default.
    policies = job_pb2.Policies()
    policies.CopyFrom(changed.policies)
    policies.flow.CopyFrom(job_pb2.FlowPolicy(concurrency_key="batch"))
    replaced = await update(job_pb2.Job(policies=policies), "policies")
    assert replaced.policies.flow == job_pb2.FlowPolicy(priority=3, concurrency_key="batch")
    assert replaced.policies.run_timeout == created.policies.run_timeout
    assert replaced.version == created.version + 2
    # Bad values: INVALID_ARGUMENT naming the field, and the job as it was.
    for flow, field in (
        (job_pb2.FlowPolicy(priority=6), "policies.flow.priority"),
        (job_pb2.FlowPolicy(priority=-1), "policies.flow.priority"),
        (job_pb2.FlowPolicy(rate_limit_key="r" * 201), "policies.flow.rate_limit_key"),
        (job_pb2.FlowPolicy(concurrency_key="bell\x07"), "policies.flow.concurrency_key"),
    ):
        await expect_error(
            update(job_pb2.Job(policies=job_pb2.Policies(flow=flow)), "policies.flow"),
            INVALID,
            field=field,
        )
    after = (await api.jobs.GetJob(pb.GetJobRequest(job_id=created.job_id), metadata=tenant.md)).job
    assert after == replaced


async def _tenant_quotas(api: Api, tenant_id: str) -> apb.Quotas:
    got = await api.admin.GetTenant(
        apb.GetTenantRequest(tenant_id=tenant_id), metadata=api.admin_md
    )
    return got.tenant.quotas


async def test_fair_weight_is_the_operators_default_unless_the_tenant_has_its_own(
    start_api: StartApi,
) -> None:
    api = await start_api(fair_weight=2)
    plain = await api.admin.CreateTenant(
        apb.CreateTenantRequest(tenant=apb.Tenant(tenant_id="plain", display_name="plain")),
        metadata=api.admin_md,
    )
    assert plain.tenant.quotas.fair_weight == 2  # reads show the effective weight
    heavy = await api.admin.CreateTenant(
        apb.CreateTenantRequest(
            tenant=apb.Tenant(
                tenant_id="heavy", display_name="heavy", quotas=apb.Quotas(fair_weight=3)
            )
        ),
        metadata=api.admin_md,
    )
    assert heavy.tenant.quotas.fair_weight == 3
    stored = await api.sql("SELECT tenant_id, fair_weight FROM tenants ORDER BY tenant_id")
    assert [(r["tenant_id"], r["fair_weight"]) for r in stored] == [("heavy", 3), ("plain", None)]
    listed = await api.admin.ListTenants(apb.ListTenantsRequest(), metadata=api.admin_md)
    assert {t.tenant_id: t.quotas.fair_weight for t in listed.tenants} == {"heavy": 3, "plain": 2}

    async def update(tenant_id: str, weight: int, path: str) -> apb.Tenant:
        answer = await api.admin.UpdateTenant(
            apb.UpdateTenantRequest(
                tenant=apb.Tenant(tenant_id=tenant_id, quotas=apb.Quotas(fair_weight=weight)),
                update_mask=field_mask_pb2.FieldMask(paths=[path]),
            ),
            metadata=api.admin_md,
        )
        return answer.tenant

    assert (await update("plain", 100, "quotas.fair_weight")).quotas.fair_weight == 100
    assert (await update("heavy", 0, "quotas.fair_weight")).quotas.fair_weight == 2
    (row,) = await api.sql("SELECT fair_weight FROM tenants WHERE tenant_id = 'heavy'")
    assert row["fair_weight"] is None
    for weight in (101, -1):
        await expect_error(
            update("plain", weight, "quotas.fair_weight"),
            INVALID,
            field="tenant.quotas.fair_weight",
        )
    await expect_error(
        api.admin.CreateTenant(
            apb.CreateTenantRequest(
                tenant=apb.Tenant(
                    tenant_id="bad", display_name="b", quotas=apb.Quotas(fair_weight=500)
                )
            ),
            metadata=api.admin_md,
        ),
        INVALID,
        field="tenant.quotas.fair_weight",
    )
    assert (await _tenant_quotas(api, "plain")).fair_weight == 100
    assert await api.sql("SELECT 1 FROM tenants WHERE tenant_id = 'bad'") == []
    # Other quota updates leave the weight alone.
    await update("plain", 0, "quotas.max_calendars")
    assert (await _tenant_quotas(api, "plain")).fair_weight == 100
