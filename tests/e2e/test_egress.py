"""End to end: a tenant's egress policy, changed while its job runs, applies from the next
attempt on (the policy travels with each lease grant); the refusal is a final failure of
class target_forbidden in the run and in ``sundial_runs_completed_total``; an
unresolvable name is accepted when written and fails when called.

The services are real processes with loopback targets allowed by the operator, as
``sundial dev`` runs them; the target is an IP literal (127.0.0.1), so no name lookup
is involved, and loopback is reachable for a tenant with its own policy only through
one of its rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from sundial.devstack import Services, Stack
from sundial.v1 import admin_pb2, egress_pb2, job_service_pb2, run_pb2
from tests.e2e.test_executor_runs import every, http_job, once
from tests.e2e.test_metrics_endpoint import Scraped, metrics_env, scrape, value
from tests.helpers.cluster import ADMIN_TOKEN, Cluster, Tenant, client_of, shared_services
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

SUCCEEDED, DEAD = run_pb2.RUN_STATUS_SUCCEEDED, run_pb2.RUN_STATUS_DEAD
FORBIDDEN = run_pb2.ERROR_CLASS_TARGET_FORBIDDEN
# How far the scheduler's clock (the database's, measured) may be from this one.
CLOCK_SLACK = timedelta(milliseconds=200)


@pytest.fixture(scope="module")
def metrics_services(
    stack: Stack, module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Services, dict[str, int]]]:
    """One deployment serving /metrics for the module's tests (each its own tenant)."""
    ports, own_env = metrics_env()
    with shared_services(
        stack, module_database_url, tmp_path_factory.mktemp("egress"), env_by_service=own_env
    ) as services:
        yield services, ports


@pytest.fixture
async def scraped(metrics_services: tuple[Services, dict[str, int]]) -> AsyncIterator[Scraped]:
    services, ports = metrics_services
    async with client_of(services) as cluster:
        yield Scraped(cluster, ports)


async def set_policy(cluster: Cluster, tenant_id: str, *cidrs: str) -> datetime:
    """Give the tenant a policy of ``cidrs`` (both protocols); returns when it was set."""
    await cluster.admin.SetTenantEgressPolicy(
        admin_pb2.SetTenantEgressPolicyRequest(
            tenant_id=tenant_id,
            policy=egress_pb2.EgressPolicy(rules=[egress_pb2.EgressRule(cidr=c) for c in cidrs]),
        ),
        metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),),
        timeout=10,
    )
    return datetime.now(UTC)


async def runs_of(tenant: Tenant, job_id: str, status: int) -> list[run_pb2.Run]:
    return [r for r in await tenant.runs(job_id) if r.status == status]


async def test_a_changed_policy_applies_to_the_next_call_of_an_existing_job(
    scraped: Scraped, target: RecordingTarget
) -> None:
    cluster = scraped.cluster
    tenant = await cluster.tenant("tenant-a")
    await set_policy(cluster, tenant.tenant_id, "127.0.0.0/8", "10.0.0.0/8")
    created = await tenant.create_job(
        http_job("tick", f"{target.url}/tick", every(1), max_attempts=1)
    )
    job_id = created.job_id  # type: ignore[attr-defined]

    async def succeeded(after: datetime | None = None) -> list[run_pb2.Run]:
        runs = await runs_of(tenant, job_id, SUCCEEDED)
        if after is not None:
            runs = [r for r in runs if r.started_at.ToDatetime(UTC) > after]
        assert runs, "no succeeded run yet"
        return runs

    await assert_eventually(succeeded, timeout_s=30, interval_s=0.2)

    # Tightened: loopback is no longer in the tenant's policy.
    tightened_at = await set_policy(cluster, tenant.tenant_id, "10.0.0.0/8")

    async def forbidden(at_least: int) -> list[run_pb2.Run]:
        runs = [r for r in await runs_of(tenant, job_id, DEAD) if r.error_class == FORBIDDEN]
        assert len(runs) >= at_least, f"{len(runs)} forbidden runs"
        return runs

    refused = await assert_eventually(lambda: forbidden(3), timeout_s=30, interval_s=0.2)
    assert all(r.attempt == 1 for r in refused)  # final at once, never retried
    assert refused[0].last_error == (
        "127.0.0.1 is a loopback address the tenant's egress policy does not allow for http targets"
    )
    # No attempt granted after the change reached the target.
    for run in await runs_of(tenant, job_id, SUCCEEDED):
        assert run.started_at.ToDatetime(UTC) <= tightened_at + CLOCK_SLACK, run.run_key
    calls = len(target.calls)
    assert calls == len(await runs_of(tenant, job_id, SUCCEEDED))

    # The metric counts them by error class.
    def counted() -> None:
        samples = scrape(scraped.metrics_ports["scheduler"])
        dead = value(
            samples, "sundial_runs_completed_total", outcome="dead", error_class="target_forbidden"
        )
        assert dead is not None and dead >= 3, dead

    await assert_eventually(lambda: asyncio.to_thread(counted), timeout_s=20, interval_s=0.5)
    listed = await tenant.call("ListJobs", job_service_pb2.ListJobsRequest(target_forbidden=True))
    assert [j.name for j in listed.jobs] == ["tick"]  # type: ignore[attr-defined]

    # Widened again: the next calls go through.
    widened_at = await set_policy(cluster, tenant.tenant_id, "127.0.0.1/32")
    await assert_eventually(
        lambda: succeeded(after=widened_at - CLOCK_SLACK), timeout_s=30, interval_s=0.2
    )
    assert len(target.calls) > calls


async def test_an_unresolvable_name_is_accepted_and_fails_when_called(
    scraped: Scraped,
) -> None:
    tenant = await scraped.cluster.tenant()
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    created = await tenant.create_job(
        http_job("later", "http://not-yet.invalid/hook", once(when), max_attempts=1)
    )
    job_id = created.job_id  # type: ignore[attr-defined]

    async def dead() -> run_pb2.Run:
        runs = await runs_of(tenant, job_id, DEAD)
        assert len(runs) == 1, f"{len(runs)} dead runs"
        return runs[0]

    run = await assert_eventually(dead, timeout_s=30, interval_s=0.2)
    assert run.error_class == run_pb2.ERROR_CLASS_CONNECTION
    assert "host not-yet.invalid does not resolve" in run.last_error, run.last_error
