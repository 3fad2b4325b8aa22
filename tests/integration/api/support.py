"""Helpers of the API integration tests: the running server's handle, job builders,
error assertions."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sundial.api.app import build
from sundial.api.cluster import MembershipSource
from sundial.api.config import ApiConfig
from sundial.core.clock import Clock
from sundial.core.service import Service
from sundial.core.tls import ClientTls, dial
from sundial.v1 import admin_pb2, admin_pb2_grpc, job_pb2, job_service_pb2_grpc
from tests.helpers.eventually import assert_eventually

ADMIN_TOKEN = "test-admin-token-0123456789abcdef"
SECRET_KEYS = "test-kek-1:" + "a2V5LWVuY3J5cHRpb24ta2V5LW9mLXRoZS10ZXN0cyE="
"""The API's key-encryption key in these tests (32 bytes: "key-encryption-key-of-the-tests!")."""
TARGET_URL = "http://127.0.0.1:9/hook"


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying ``token``."""
    return (("authorization", f"Bearer {token}"),)


@dataclass
class Tenant:
    """A tenant created through AdminService, with a TENANT token."""

    tenant_id: str
    token: str
    signing_secret: str

    @property
    def md(self) -> tuple[tuple[str, str], ...]:
        """Metadata authenticating as this tenant."""
        return bearer(self.token)


@dataclass
class Api:
    """A running API server and clients for it."""

    service: Service
    address: str
    channel: grpc.aio.Channel
    jobs: job_service_pb2_grpc.JobServiceStub
    admin: admin_pb2_grpc.AdminServiceStub
    database_url: str
    stop: asyncio.Event
    task: asyncio.Task[int]
    admin_md: tuple[tuple[str, str], ...] = field(default=bearer(ADMIN_TOKEN))
    conn: asyncpg.Connection | None = None

    async def tenant(
        self, tenant_id: str | None = None, *, max_jobs: int = 0, max_concurrent_runs: int = 0
    ) -> Tenant:
        """Create a tenant and issue it a token."""
        tenant_id = tenant_id or f"t-{uuid.uuid4().hex[:10]}"
        created = await self.admin.CreateTenant(
            admin_pb2.CreateTenantRequest(
                tenant=admin_pb2.Tenant(
                    tenant_id=tenant_id,
                    display_name=f"Tenant {tenant_id}",
                    quotas=admin_pb2.Quotas(
                        max_jobs=max_jobs, max_concurrent_runs=max_concurrent_runs
                    ),
                )
            ),
            metadata=self.admin_md,
        )
        token = await self.admin.CreateApiToken(
            admin_pb2.CreateApiTokenRequest(
                tenant_id=tenant_id, role=admin_pb2.TOKEN_ROLE_TENANT, description="tests"
            ),
            metadata=self.admin_md,
        )
        return Tenant(tenant_id, token.secret, created.signing_secret)

    async def _connection(self) -> asyncpg.Connection:
        # One direct connection per server, reused: backends on a fresh database are
        # costly to start, and the validation cases check the tables twice each.
        if self.conn is None:
            self.conn = await asyncpg.connect(self.database_url)
        return self.conn

    async def sql(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """Run SQL directly (to set up run states, or check nothing was written)."""
        return await (await self._connection()).fetch(query, *args)

    async def counts(self) -> dict[str, int]:
        """Rows in every table a job write touches, and the tenants' job counters."""
        row = await (await self._connection()).fetchrow(
            """
            SELECT (SELECT count(*) FROM jobs) AS jobs,
                   (SELECT count(*) FROM job_definitions) AS job_definitions,
                   (SELECT count(*) FROM job_stats) AS job_stats,
                   (SELECT count(*) FROM job_requests) AS job_requests,
                   (SELECT count(*) FROM job_runs) AS job_runs,
                   (SELECT coalesce(sum(job_count), 0) FROM tenants) AS job_count
            """
        )
        return dict(row)

    async def shutdown(self) -> None:
        """Close the clients, stop the server gracefully, check it exited cleanly."""
        await self.channel.close()
        if self.conn is not None:
            await self.conn.close()
        self.stop.set()
        async with asyncio.timeout(15):
            code = await self.task
        assert code == 0, "the API service exited with an error"


async def launch(
    database_url: str,
    *,
    clock: Clock | None = None,
    membership: MembershipSource | None = None,
    channel_tls: ClientTls | None = None,
    **settings: Any,
) -> Api:
    """Build the API service (``app.build``) on ``database_url``, serve it in-process on
    127.0.0.1:0 with loopback targets allowed (``settings`` override ApiConfig fields),
    and wait until it reports SERVING. ``channel_tls``: dial it so (when ``settings``
    make it serve TLS)."""
    config = ApiConfig(
        database_url=database_url,
        listen="127.0.0.1:0",
        admin_token=ADMIN_TOKEN,
        secret_keys=SECRET_KEYS,
        allow_loopback_targets=True,
        migrate_on_start=False,
        grace_period_s=2.0,
        log_format="text",
    )
    config = dataclasses.replace(config, **settings)
    service = await build(config, clock=clock, membership=membership)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(install_signal_handlers=False, stop_event=stop))
    address = service.server.address
    channel = dial(address, channel_tls)
    health = health_pb2_grpc.HealthStub(channel)

    async def serving() -> None:
        assert not task.done(), "the API service stopped while starting"
        try:
            answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.aio.AioRpcError as exc:
            raise AssertionError(f"health check failed: {exc.code()}") from exc
        assert answer.status == health_pb2.HealthCheckResponse.SERVING

    await assert_eventually(serving, timeout_s=20, what="API serving")
    return Api(
        service=service,
        address=address,
        channel=channel,
        jobs=job_service_pb2_grpc.JobServiceStub(channel),
        admin=admin_pb2_grpc.AdminServiceStub(channel),
        database_url=database_url,
        stop=stop,
        task=task,
    )


StartApi = Callable[..., Awaitable[Api]]
"""The ``start_api`` fixture: ``await start_api(**ApiConfig overrides, clock=, membership=)``."""


def make_job(name: str = "nightly", *, cron: str = "0 3 * * *", **fields: Any) -> job_pb2.Job:
    """A valid job definition (HTTP target on loopback) with ``fields`` overriding."""
    job = job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron=cron, time_zone="UTC"),
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=TARGET_URL)),
    )
    for key, value in fields.items():
        if isinstance(value, dict) and key in ("labels",):
            getattr(job, key).update(value)
        elif hasattr(value, "DESCRIPTOR"):
            getattr(job, key).CopyFrom(value)
        else:
            setattr(job, key, value)
    return job


async def expect_error(
    call: Awaitable[Any], code: grpc.StatusCode, *, field: str | None = None, text: str = ""
) -> grpc.aio.AioRpcError:
    """Await ``call`` and assert it fails with ``code`` (and a message naming ``field``)."""
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == code, f"expected {code.name}, got {exc.code().name}: {exc.details()}"
        details = exc.details() or ""
        if field is not None:
            assert details.startswith(f"{field}: "), f"{details!r} does not name {field!r}"
        assert text in details, f"{text!r} not in {details!r}"
        return exc
    raise AssertionError(f"expected {code.name}, the call succeeded")


def names(jobs: Sequence[job_pb2.Job]) -> list[str]:
    """The names of ``jobs``, in order."""
    return [job.name for job in jobs]
