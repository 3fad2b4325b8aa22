"""Fixtures for executor tests: leases, callers and a runner against real servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from sundial.core.runkey import run_key
from sundial.executor.model import GrpcTarget, HttpTarget, Lease, RunId
from sundial.executor.runner import Runner
from sundial.executor.targets import AddressPolicy, CircuitBreaker, GrpcCaller, HttpCaller
from tests.helpers.target_server import RecordingTarget

SCHEDULED_AT = datetime(2026, 3, 8, 14, 0, tzinfo=UTC)


def make_lease(
    target: HttpTarget | GrpcTarget,
    *,
    job_id: str = "8f1c2e4a-7b3d-4c5e-9f60-1a2b3c4d5e6f",
    attempt: int = 1,
    payload: bytes = b'{"hello":"world"}',
    run_timeout_s: float = 10.0,
    scheduled_at: datetime = SCHEDULED_AT,
) -> Lease:
    run = RunId(job_id, scheduled_at)
    return Lease(
        run=run,
        attempt=attempt,
        lease_until=datetime.now(UTC) + timedelta(seconds=30),
        target=target,
        payload=payload,
        run_timeout_s=run_timeout_s,
        tenant_id="tenant-1",
        run_key=run_key(job_id, scheduled_at),
        signature="t=1772978400,v1=abc123",
    )


@pytest.fixture
async def target() -> AsyncIterator[RecordingTarget]:
    async with RecordingTarget() as server:
        yield server


@pytest.fixture
def breaker() -> CircuitBreaker:
    return CircuitBreaker(failures=3, open_s=30.0)


@pytest.fixture
async def runner(breaker: CircuitBreaker) -> AsyncIterator[Runner]:
    policy = AddressPolicy(allow_loopback=True)
    http = HttpCaller(policy, max_connections=16)
    grpc_caller = GrpcCaller(policy)
    yield Runner(http, grpc_caller, breaker)
    await http.aclose()
    await grpc_caller.aclose()
