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
from dataclasses import dataclass
from pathlib import Path

import grpc
import nats
from nats.js.errors import NotFoundError

from sundial.core.bus import DEAD_STREAM, RUNS_STREAM
from sundial.core.tls import ClientTls, dial
from sundial.devstack import Services, Stack
from sundial.v1 import admin_pb2, admin_pb2_grpc, job_service_pb2, job_service_pb2_grpc, run_pb2
from tests.helpers.stack import nats_options

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
        return Tenant(
            tenant_id,
            token.secret,
            created.signing_secret,
            job_service_pb2_grpc.JobServiceStub(self.api),
        )


@contextlib.asynccontextmanager
async def running_cluster(
    stack: Stack,
    database_url: str,
    log_dir: Path,
    *,
    client_tls: ClientTls | None = None,
    http: bool = False,
    **env: str,
) -> AsyncIterator[Cluster]:
    """Start API, scheduler and executor (in that order); stop them at the end.

    ``env`` adds or overrides service variables; when they make the services serve TLS,
    ``client_tls`` says how to dial them (the probe, the executor and ``Cluster.api``).
    ``http``: the API serves its HTTP port too (``services.processes["api"].http_url``).
    """
    await reset_streams(stack)
    services = fast_services(stack, database_url, log_dir, client_tls=client_tls, http=http, **env)
    await asyncio.to_thread(services.start)
    try:
        async with dial(services.processes["api"].address, client_tls) as channel:
            yield Cluster(services, channel)
    finally:
        await asyncio.to_thread(services.stop)


def fast_services(
    stack: Stack,
    database_url: str,
    log_dir: Path,
    *,
    client_tls: ClientTls | None = None,
    http: bool = False,
    **env: str,
) -> Services:
    """The services of :func:`running_cluster`, not started yet."""
    return Services(
        stack,
        log_dir=log_dir,
        extra_env={**FAST_ENV, "SUNDIAL_DATABASE_URL": database_url, **env},
        client_tls=client_tls,
        http=http,
    )


@contextlib.contextmanager
def shared_services(
    stack: Stack, database_url: str, log_dir: Path, *, replicas: int = 1, **env: str
) -> Iterator[Services]:
    """The services of :func:`running_cluster`, started and stopped synchronously: for a
    fixture that serves several tests (a class of them), started outside any test's event
    loop. Its processes live as long as the calling thread (``ManagedProcess``), so call
    it from the main thread; no two such deployments may run at once (they share the
    stack's streams). Each test dials it with :func:`connected`."""
    asyncio.run(reset_streams(stack))
    services = fast_services(stack, database_url, log_dir, **env)
    services.start(replicas)
    try:
        yield services
    finally:
        services.stop()


@contextlib.asynccontextmanager
async def connected(services: Services) -> AsyncIterator[Cluster]:
    """A :class:`Cluster` on running (plaintext) services, for one test."""
    async with dial(services.processes["api"].address, None) as channel:
        yield Cluster(services, channel)
