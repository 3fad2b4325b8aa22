"""A whole local Sundial deployment for end-to-end tests: API, scheduler(s) and
executor(s) as real processes (``sundial.devstack.Services``) on the session's stack,
plus typed clients for the API.

Settings are tightened for tests (short polls, 1 s heartbeats, 10 s run leases) and
loopback targets are allowed, so a target server started by the test can be called.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import nats
from nats.js.errors import NotFoundError

from sundial.core.bus import DEAD_STREAM, RUNS_STREAM
from sundial.core.tls import ClientTls, dial
from sundial.devstack import Services, Stack
from sundial.v1 import admin_pb2, admin_pb2_grpc, job_service_pb2, job_service_pb2_grpc, run_pb2
from tests.helpers.stack import in_server_thread, nats_options, on_server_thread

ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef"

FAST_ENV = {
    "SUNDIAL_ADMIN_TOKEN": ADMIN_TOKEN,
    "SUNDIAL_GRACE_PERIOD_S": "5",
    "SUNDIAL_ALLOW_LOOPBACK_TARGETS": "1",
    "SUNDIAL_LOG_FORMAT": "json",
    # scheduler
    "SUNDIAL_POLL_INTERVAL_S": "0.1",
    "SUNDIAL_SWEEP_INTERVAL_S": "0.5",
    "SUNDIAL_HEARTBEAT_INTERVAL_S": "1",
    "SUNDIAL_RUN_LEASE_S": "10",
    "SUNDIAL_CAPACITY_RETRY_S": "0.5",
    "SUNDIAL_PUBLISH_CONFIRM_S": "2",
    # executor
    "SUNDIAL_COMPLETE_FLUSH_MS": "2",
}


async def reset_streams(stack: Stack) -> None:
    """Delete both streams: no message or consumer of an earlier test is left."""
    client = await nats.connect(**nats_options(stack))
    try:
        js = client.jetstream()
        for stream in (RUNS_STREAM, DEAD_STREAM):
            with contextlib.suppress(NotFoundError):
                await js.delete_stream(stream)
    finally:
        await client.close()


@dataclass
class Tenant:
    """A tenant and a JobService client acting for it."""

    tenant_id: str
    token: str
    signing_secret: str
    jobs: job_service_pb2_grpc.JobServiceStub

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    async def create_job(self, job: object) -> object:
        answer = await self.jobs.CreateJob(
            job_service_pb2.CreateJobRequest(job=job, request_id=str(uuid.uuid4())),
            metadata=self.metadata,
            timeout=10,
        )
        return answer.job

    async def runs(self, job_id: str) -> list[run_pb2.Run]:
        answer = await self.jobs.ListRuns(
            job_service_pb2.ListRunsRequest(job_id=job_id, page_size=1000),
            metadata=self.metadata,
            timeout=10,
        )
        return list(answer.runs)

    async def call(self, method: str, request: object) -> object:
        return await getattr(self.jobs, method)(request, metadata=self.metadata, timeout=10)


@dataclass
class Cluster:
    """Running services and a channel to the API."""

    services: Services
    api: grpc.aio.Channel
    tenants: list[Tenant] = field(default_factory=list)
    """The tenants :meth:`tenant` created (whose jobs :meth:`delete_jobs` deletes)."""

    @property
    def admin(self) -> admin_pb2_grpc.AdminServiceStub:
        return admin_pb2_grpc.AdminServiceStub(self.api)

    async def tenant(
        self, tenant_id: str | None = None, *, max_concurrent_runs: int = 0, fair_weight: int = 0
    ) -> Tenant:
        tenant_id = tenant_id or f"t-{uuid.uuid4().hex[:10]}"
        admin_md = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        created = await self.admin.CreateTenant(
            admin_pb2.CreateTenantRequest(
                tenant=admin_pb2.Tenant(
                    tenant_id=tenant_id,
                    display_name=tenant_id,
                    quotas=admin_pb2.Quotas(
                        max_concurrent_runs=max_concurrent_runs, fair_weight=fair_weight
                    ),
                )
            ),
            metadata=admin_md,
            timeout=10,
        )
        token = await self.admin.CreateApiToken(
            admin_pb2.CreateApiTokenRequest(
                tenant_id=tenant_id, role=admin_pb2.TOKEN_ROLE_TENANT, description="e2e"
            ),
            metadata=admin_md,
            timeout=10,
        )
        tenant = Tenant(
            tenant_id,
            token.secret,
            created.signing_secret,
            job_service_pb2_grpc.JobServiceStub(self.api),
        )
        self.tenants.append(tenant)
        return tenant

    async def delete_jobs(self) -> None:
        """Delete every job of the tenants made through this client (their unfinished
        runs are cancelled), so that none fires for whoever uses the services next."""
        for tenant in self.tenants:
            page_token = ""
            while True:
                page = await tenant.call(
                    "ListJobs",
                    job_service_pb2.ListJobsRequest(page_size=100, page_token=page_token),
                )
                for job in page.jobs:
                    await tenant.call(
                        "DeleteJob",
                        job_service_pb2.DeleteJobRequest(job_id=job.job_id, allow_missing=True),
                    )
                if not page.next_page_token:
                    break
                page_token = page.next_page_token


_DEPLOYED: set[str] = set()
"""The NATS servers (by URL) that a deployment's processes use right now."""


@contextlib.contextmanager
def _sole_deployment(stack: Stack) -> Iterator[None]:
    """Claim ``stack`` for one deployment: the executors of two would consume each
    other's runs from the one stream (and each start resets the streams). A module that
    shares services (:func:`shared_services`) runs its tests with their own processes
    first: pytest runs a module's tests in order and stops its shared ones after the
    last."""
    if stack.nats_url in _DEPLOYED:
        raise RuntimeError(
            "services already run on this stack (a module's shared ones?): start a "
            "test's own processes before the module's first shared test"
        )
    _DEPLOYED.add(stack.nats_url)
    try:
        yield
    finally:
        _DEPLOYED.discard(stack.nats_url)


def _services(
    stack: Stack,
    database_url: str,
    log_dir: Path,
    *,
    client_tls: ClientTls | None = None,
    http: bool = False,
    env_by_service: dict[str, dict[str, str]] | None = None,
    **env: str,
) -> Services:
    return Services(
        stack,
        log_dir=log_dir,
        extra_env={**FAST_ENV, "SUNDIAL_DATABASE_URL": database_url, **env},
        client_tls=client_tls,
        http=http,
        env_by_service=env_by_service or {},
    )


@contextlib.asynccontextmanager
async def running_cluster(
    stack: Stack,
    database_url: str,
    log_dir: Path,
    *,
    client_tls: ClientTls | None = None,
    http: bool = False,
    env_by_service: dict[str, dict[str, str]] | None = None,
    **env: str,
) -> AsyncIterator[Cluster]:
    """Start API, scheduler and executor (in that order); stop them at the end.

    ``env`` adds or overrides service variables (``env_by_service``: for one service's
    processes only); when they make the services serve TLS, ``client_tls`` says how to
    dial them (the probe, the executor and ``Cluster.api``). ``http``: the API serves
    its HTTP port too (``services.processes["api"].http_url``).
    """
    with _sole_deployment(stack):
        await reset_streams(stack)
        services = _services(
            stack,
            database_url,
            log_dir,
            client_tls=client_tls,
            http=http,
            env_by_service=env_by_service,
            **env,
        )
        await asyncio.to_thread(services.start)
        try:
            async with dial(services.processes["api"].address, client_tls) as channel:
                yield Cluster(services, channel)
        finally:
            await asyncio.to_thread(services.stop)


@contextlib.contextmanager
def shared_services(
    stack: Stack,
    database_url: str,
    log_dir: Path,
    *,
    replicas: int = 1,
    executors: int | None = None,
    http: bool = False,
    env_by_service: dict[str, dict[str, str]] | None = None,
    **env: str,
) -> Iterator[Services]:
    """API, scheduler and executor for several tests (a module's, through
    :func:`client_of` or :func:`connected` per test); ``replicas`` schedulers and as many
    executors (or ``executors``: 0 when the tests start and stop their own); the
    settings as for :func:`running_cluster`.

    For tests that keep to tenants of their own and leave the processes as they found
    them (no kill, no pause, no restart): starting the three services costs seconds per
    test otherwise. No other deployment may run on ``stack`` meanwhile (see
    :func:`_sole_deployment`). They are started and stopped from the session's server
    thread, since they outlive the test (its event loop and its threads) that first
    asks for them.
    """
    with _sole_deployment(stack):
        asyncio.run(reset_streams(stack))
        services = _services(
            stack, database_url, log_dir, http=http, env_by_service=env_by_service, **env
        )
        on_server_thread(lambda: services.start(replicas, executors=executors))
        try:
            yield services
        finally:
            on_server_thread(services.stop)


@contextlib.asynccontextmanager
async def client_of(services: Services) -> AsyncIterator[Cluster]:
    """One test's :class:`Cluster` on :func:`shared_services`: at the end, the jobs of
    the tenants the test made are deleted, so the next test finds nothing of it firing."""
    async with dial(services.processes["api"].address, services.client_tls) as channel:
        cluster = Cluster(services, channel)
        try:
            yield cluster
        finally:
            await cluster.delete_jobs()


@contextlib.asynccontextmanager
async def connected(services: Services) -> AsyncIterator[Cluster]:
    """A :class:`Cluster` on running services, for one test (its jobs are left as they
    are: tests that read what the shared deployment did after them)."""
    async with dial(services.processes["api"].address, services.client_tls) as channel:
        yield Cluster(services, channel)


@contextlib.asynccontextmanager
async def with_own_executor(services: Services) -> AsyncIterator[Cluster]:
    """One test's :class:`Cluster` on a module's API and schedulers
    (:func:`shared_services` with ``executors=0``) and an executor of the test's own,
    ``processes["executor"]``, for tests that kill, freeze or stop it. At the end, the
    test's jobs are deleted (as by :func:`client_of`) and every executor still there
    (the test may have added more) is stopped."""
    await in_server_thread(lambda: services.add("executor"))
    try:
        async with client_of(services) as cluster:
            yield cluster
    finally:
        for key in [k for k, p in services.processes.items() if p.name == "executor"]:
            await asyncio.to_thread(services.processes.pop(key).stop)
