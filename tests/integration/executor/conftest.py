"""Fixtures for executor tests: leases, callers and a runner against real servers, and
the whole executor graph against real JetStream and a RunLedger double."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from sundial.core.bus import RUNS_STREAM, ensure_streams
from sundial.devstack import Stack
from sundial.executor.app import build
from sundial.executor.config import ExecutorConfig
from sundial.executor.model import Lease
from sundial.executor.runner import Runner
from sundial.run import GrpcTarget, HttpTarget, RunRef
from sundial.targets import AddressPolicy, CircuitBreaker, GrpcCaller, HttpCaller
from tests.helpers.eventually import assert_eventually
from tests.helpers.ledger_double import LedgerDouble
from tests.helpers.stack import nats_options
from tests.helpers.target_server import RecordingTarget
from tests.integration.executor.support import RunningExecutor, connected

SCHEDULED_AT = datetime(2026, 3, 8, 14, 0, tzinfo=UTC)


LEASE_ID = "5d2f6a1e-0c4b-4f7e-9a3d-2b8c1e6f4a90"
"""The lease id of :func:`make_lease`'s leases."""
EXECUTION_ID = "f530aeb2-7132-526f-af82-d4a3de8539e1"
"""What targets are told for it (Sundial-Execution-Id): pinned, so a change of the
derivation is seen."""


def make_lease(
    target: HttpTarget | GrpcTarget,
    *,
    job_id: str = "8f1c2e4a-7b3d-4c5e-9f60-1a2b3c4d5e6f",
    attempt: int = 1,
    payload: bytes = b'{"hello":"world"}',
    run_timeout_s: float = 10.0,
    scheduled_at: datetime = SCHEDULED_AT,
    tenant_id: str = "tenant-1",
) -> Lease:
    run = RunRef(uuid.UUID(job_id), scheduled_at)
    return Lease(
        run=run,
        attempt=attempt,
        lease_until=datetime.now(UTC) + timedelta(seconds=30),
        target=target,
        payload=payload,
        run_timeout_s=run_timeout_s,
        tenant_id=tenant_id,
        run_key=run.key,
        signature="t=1772978400,v1=abc123",
        lease_id=LEASE_ID,
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


@pytest.fixture
async def jetstream(stack: Stack) -> AsyncIterator[JetStreamContext]:
    """JetStream with an empty SUNDIAL_RUNS (and no consumers left by other tests)."""
    client = await nats.connect(**nats_options(stack))
    js = client.jetstream()
    with contextlib.suppress(NotFoundError):
        await js.delete_stream(RUNS_STREAM)
    await ensure_streams(js)
    yield js
    with contextlib.suppress(NotFoundError):
        await js.delete_stream(RUNS_STREAM)
    await client.drain()


@pytest.fixture
async def ledger() -> AsyncIterator[LedgerDouble]:
    async with LedgerDouble() as double:
        yield double


@pytest.fixture
async def start_executor(
    stack: Stack, ledger: LedgerDouble, jetstream: JetStreamContext
) -> AsyncIterator[object]:
    running: list[RunningExecutor] = []

    async def start(**overrides: object) -> RunningExecutor:
        nats = stack.nats_config("executor")  # the executor's own NATS user
        config = ExecutorConfig(
            nats_url=nats.nats_url,
            nats_user=nats.nats_user,
            nats_password=nats.nats_password,
            nats_inbox_prefix=nats.nats_inbox_prefix,
            ledger_address=ledger.address,
            ledger_token=ledger.token,
            node_id="test-executor",
            allow_loopback_targets=True,
            heartbeat_interval_s=0.2,
            grace_period_s=5.0,
            capacity_retry_s=0.5,
            log_format="text",
        )
        config = replace(config, **overrides)  # type: ignore[arg-type]
        service = await build(config)
        stop_event = asyncio.Event()
        task = asyncio.create_task(
            service.run(install_signal_handlers=False, stop_event=stop_event)
        )
        executor = RunningExecutor(service, task, stop_event)
        running.append(executor)
        await assert_eventually(lambda: connected(executor), timeout_s=10, what="heartbeat stream")
        return executor

    yield start
    for executor in running:
        if not executor.task.done():
            await executor.stop()
