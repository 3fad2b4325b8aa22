"""gRPC targets against a real grpc.aio TargetService: request, metadata, status codes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import grpc
import pytest

from sundial.devstack import free_port
from sundial.executor.runner import Runner
from sundial.run import ErrorClass, GrpcTarget, OutcomeStatus
from sundial.targets import AddressPolicy, CircuitBreaker, GrpcCaller, HttpCaller
from tests.helpers.grpc_target import GrpcTargetServer
from tests.integration.executor.conftest import EXECUTION_ID, LEASE_ID, make_lease

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def server() -> AsyncIterator[GrpcTargetServer]:
    async with GrpcTargetServer() as running:
        yield running


async def test_execute_receives_the_run_and_metadata(
    runner: Runner, server: GrpcTargetServer
) -> None:
    lease = make_lease(
        GrpcTarget(server.address, plaintext=True, metadata={"x-team": "billing"}), attempt=2
    )
    outcome = await runner.run(lease)
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.grpc_code == 0
    [call] = server.calls
    assert call.request.run_key == lease.run_key
    assert call.request.idempotency_key == lease.run_key
    assert call.request.job_id == str(lease.run.job_id)
    assert call.request.tenant_id == "tenant-1"
    assert call.request.attempt == 2
    assert call.request.payload == lease.payload
    assert call.request.scheduled_at.ToJsonString() == "2026-03-08T14:00:00Z"
    assert call.metadata["idempotency-key"] == lease.run_key
    assert call.metadata["sundial-attempt"] == "2"
    assert call.metadata["sundial-execution-id"] == EXECUTION_ID != LEASE_ID
    assert call.request.execution_id == EXECUTION_ID
    assert call.metadata["sundial-scheduled-at"] == "2026-03-08T14:00:00Z"
    assert call.metadata["sundial-signature"] == lease.signature
    assert call.metadata["traceparent"].startswith("00-")
    assert call.metadata["x-team"] == "billing"


@pytest.mark.parametrize(
    ("code", "status", "error_class"),
    [
        (grpc.StatusCode.UNAVAILABLE, OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE),
        (grpc.StatusCode.ABORTED, OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE),
        (grpc.StatusCode.INTERNAL, OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE),
        (grpc.StatusCode.UNKNOWN, OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE),
        (grpc.StatusCode.DEADLINE_EXCEEDED, OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE),
        (grpc.StatusCode.INVALID_ARGUMENT, OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL),
        (grpc.StatusCode.NOT_FOUND, OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL),
        (grpc.StatusCode.PERMISSION_DENIED, OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL),
        (grpc.StatusCode.FAILED_PRECONDITION, OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL),
    ],
)
async def test_status_codes_are_classified(
    server: GrpcTargetServer,
    code: grpc.StatusCode,
    status: OutcomeStatus,
    error_class: ErrorClass,
) -> None:
    # A fresh breaker per case: these are deliberate failures of one target.
    policy = AddressPolicy(allow_loopback=True)
    runner = Runner(HttpCaller(policy), GrpcCaller(policy), CircuitBreaker(failures=99, open_s=1))
    server.answer = (code, f"target says {code.name}", ())
    outcome = await runner.run(make_lease(GrpcTarget(server.address, plaintext=True)))
    assert (outcome.status, outcome.error_class) == (status, error_class)
    assert outcome.grpc_code == code.value[0]
    assert f"target says {code.name}" in outcome.error


async def test_retry_after_trailing_metadata(runner: Runner, server: GrpcTargetServer) -> None:
    server.answer = (grpc.StatusCode.UNAVAILABLE, "busy", (("retry-after", "9"),))
    outcome = await runner.run(make_lease(GrpcTarget(server.address, plaintext=True)))
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.retry_after == timedelta(seconds=9)


async def test_run_timeout_is_the_deadline(runner: Runner, server: GrpcTargetServer) -> None:
    server.delay_s = 5.0
    outcome = await runner.run(
        make_lease(GrpcTarget(server.address, plaintext=True), run_timeout_s=0.3)
    )
    assert outcome.status is OutcomeStatus.TIMED_OUT
    assert outcome.error_class is ErrorClass.TIMEOUT


async def test_unreachable_target_is_a_connection_error(runner: Runner) -> None:
    outcome = await runner.run(
        make_lease(GrpcTarget(f"127.0.0.1:{free_port()}", plaintext=True), run_timeout_s=3)
    )
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.error_class in (ErrorClass.CONNECTION, ErrorClass.RETRYABLE)


async def test_loopback_refused_unless_allowed(server: GrpcTargetServer) -> None:
    runner = Runner(
        HttpCaller(AddressPolicy()),
        GrpcCaller(AddressPolicy()),
        CircuitBreaker(failures=3, open_s=1),
    )
    outcome = await runner.run(make_lease(GrpcTarget(server.address, plaintext=True)))
    assert outcome.status is OutcomeStatus.FAILED_FINAL
    assert outcome.error_class is ErrorClass.TARGET_FORBIDDEN
    assert server.calls == []
