"""HTTP targets against a real local HTTP server: headers, outcomes, timeouts, SSRF."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, StatusCode

from sundial.core import tracing
from sundial.core.clock import ManualClock
from sundial.core.telemetry import RUN_START_LATENESS
from sundial.devstack import free_port
from sundial.executor.config import ExecutorConfig
from sundial.executor.inflight import InFlight
from sundial.executor.model import Answer
from sundial.executor.runner import Runner
from sundial.run import Completion, ErrorClass, HttpTarget, OutcomeStatus
from sundial.targets import AddressPolicy, CircuitBreaker, GrpcCaller, HttpCaller
from tests.helpers.eventually import assert_eventually
from tests.helpers.metrics import points
from tests.helpers.target_server import RecordingTarget
from tests.integration.executor.conftest import EXECUTION_ID, LEASE_ID, make_lease

pytestmark = pytest.mark.timeout(30)


async def test_success_sends_payload_and_sundial_headers(
    runner: Runner, target: RecordingTarget
) -> None:
    lease = make_lease(HttpTarget(f"{target.url}/hook", "PUT", {"X-Custom": "yes"}), attempt=3)
    outcome = await runner.run(lease)
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.http_status == 200
    assert outcome.started_at <= outcome.finished_at
    [call] = target.calls
    request = call.request
    assert request.method == "PUT"
    assert request.body == b'{"hello":"world"}'
    headers = request.headers
    assert headers["idempotency-key"] == lease.run_key
    assert headers["sundial-scheduled-at"] == "2026-03-08T14:00:00Z"
    assert headers["sundial-attempt"] == "3"
    assert headers["sundial-execution-id"] == EXECUTION_ID != LEASE_ID
    assert headers["sundial-signature"] == "t=1772978400,v1=abc123"
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]", headers["traceparent"])
    assert headers["content-type"] == "application/octet-stream"
    assert headers["x-custom"] == "yes"
    assert headers["user-agent"].startswith("sundial-executor/")


async def test_job_headers_cannot_override_sundial_headers(
    runner: Runner, target: RecordingTarget
) -> None:
    lease = make_lease(HttpTarget(f"{target.url}/h", "POST", {"Idempotency-Key": "forged"}))
    await runner.run(lease)
    assert target.calls[0].key == lease.run_key


async def test_retryable_status_with_retry_after_seconds(
    runner: Runner, target: RecordingTarget
) -> None:
    target.script("/busy", status=503, headers={"Retry-After": "17"}, body=b"overloaded")
    outcome = await runner.run(make_lease(HttpTarget(f"{target.url}/busy")))
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.error_class is ErrorClass.RETRYABLE
    assert outcome.http_status == 503
    assert outcome.retry_after == timedelta(seconds=17)
    assert "503" in outcome.error and "overloaded" in outcome.error


async def test_429_with_http_date_retry_after(runner: Runner, target: RecordingTarget) -> None:
    target.script(
        "/slow-down", status=429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
    )
    outcome = await runner.run(make_lease(HttpTarget(f"{target.url}/slow-down")))
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.retry_after == timedelta(0)  # a date in the past: no extra wait


@pytest.mark.parametrize("status", [400, 404, 302])
async def test_final_statuses(runner: Runner, target: RecordingTarget, status: int) -> None:
    target.script("/x", status=status, headers={"Location": "http://169.254.169.254/"})
    outcome = await runner.run(make_lease(HttpTarget(f"{target.url}/x")))
    assert outcome.status is OutcomeStatus.FAILED_FINAL
    assert outcome.error_class is ErrorClass.FINAL
    assert outcome.http_status == status
    assert len(target.calls) == 1  # a redirect is not followed


async def test_run_timeout_aborts_the_call(runner: Runner, target: RecordingTarget) -> None:
    target.hold("/forever")
    outcome = await runner.run(make_lease(HttpTarget(f"{target.url}/forever"), run_timeout_s=0.3))
    assert outcome.status is OutcomeStatus.TIMED_OUT
    assert outcome.error_class is ErrorClass.TIMEOUT
    assert (outcome.finished_at - outcome.started_at).total_seconds() >= 0.3


async def test_connection_refused_is_retryable(runner: Runner) -> None:
    port = free_port()
    outcome = await runner.run(make_lease(HttpTarget(f"http://127.0.0.1:{port}/")))
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.error_class is ErrorClass.CONNECTION
    assert outcome.http_status is None


async def test_unresolvable_host_is_a_connection_error(runner: Runner) -> None:
    outcome = await runner.run(make_lease(HttpTarget("http://no-such-host.invalid/")))
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.error_class is ErrorClass.CONNECTION


async def test_loopback_refused_at_call_time_unless_allowed(target: RecordingTarget) -> None:
    strict = HttpCaller(AddressPolicy())
    runner = Runner(strict, GrpcCaller(AddressPolicy()), CircuitBreaker(failures=3, open_s=1))
    try:
        for url in (f"{target.url}/a", f"http://localhost:{target.url.rsplit(':', 1)[1]}/a"):
            outcome = await runner.run(make_lease(HttpTarget(url)))
            assert outcome.status is OutcomeStatus.FAILED_FINAL, url
            assert outcome.error_class is ErrorClass.TARGET_FORBIDDEN
            assert "loopback" in outcome.error
        outcome = await runner.run(make_lease(HttpTarget("http://169.254.169.254/latest/")))
        assert outcome.error_class is ErrorClass.TARGET_FORBIDDEN
        assert target.calls == []
    finally:
        await strict.aclose()


async def test_connections_are_pooled(runner: Runner, target: RecordingTarget) -> None:
    leases = [
        make_lease(HttpTarget(f"{target.url}/p"), job_id=f"00000000-0000-0000-0000-{i:012d}")
        for i in range(20)
    ]
    for lease in leases:
        assert (await runner.run(lease)).status is OutcomeStatus.SUCCEEDED
    outcomes = await asyncio.gather(*(runner.run(lease) for lease in leases))
    assert all(o.status is OutcomeStatus.SUCCEEDED for o in outcomes)
    assert len(target.calls) == 40


async def test_breaker_holds_calls_back_after_repeated_failures(
    runner: Runner, target: RecordingTarget
) -> None:
    target.script("/down", status=502)
    lease = make_lease(HttpTarget(f"{target.url}/down"))
    for _ in range(3):
        assert (await runner.run(lease)).http_status == 502
    held = await runner.run(lease)
    assert held.status is OutcomeStatus.FAILED_RETRYABLE
    assert "circuit breaker open" in held.error
    assert held.retry_after is not None
    assert timedelta(0) < held.retry_after <= timedelta(seconds=30)
    assert len(target.calls) == 3  # the fourth attempt never reached the target
    # Another origin is not affected.
    assert (
        await runner.run(
            make_lease(HttpTarget(f"{target.url.replace('127.0.0.1', 'localhost')}/ok"))
        )
    ).status is OutcomeStatus.SUCCEEDED
    # Nor is another tenant at the same origin: the breaker is this tenant's.
    other = await runner.run(make_lease(HttpTarget(f"{target.url}/ok"), tenant_id="tenant-2"))
    assert other.status is OutcomeStatus.SUCCEEDED
    assert (await runner.run(make_lease(HttpTarget(f"{target.url}/ok")))).error.startswith(
        "circuit breaker open"
    )


async def test_cancelling_the_call_propagates(runner: Runner, target: RecordingTarget) -> None:
    target.hold("/held")
    task = asyncio.create_task(runner.run(make_lease(HttpTarget(f"{target.url}/held"))))
    await assert_eventually(lambda: _called(target), timeout_s=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def _called(target: RecordingTarget) -> None:
    assert target.calls, "no call yet"


async def test_first_attempts_record_their_start_lateness(target: RecordingTarget) -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    policy = AddressPolicy(allow_loopback=True)
    http, grpc_caller = HttpCaller(policy), GrpcCaller(policy)
    runner = Runner(http, grpc_caller, CircuitBreaker(failures=3, open_s=1), meter=meter)
    try:
        due = datetime.now(UTC) - timedelta(seconds=90)
        await runner.run(make_lease(HttpTarget(f"{target.url}/a"), scheduled_at=due))
        # A retry measures the backoff, not Sundial: not recorded.
        await runner.run(make_lease(HttpTarget(f"{target.url}/b"), scheduled_at=due, attempt=2))
    finally:
        await http.aclose()
        await grpc_caller.aclose()
    [point] = points(reader, RUN_START_LATENESS)
    assert point.count == 1
    assert 90 <= point.sum < 120


async def test_outcomes_are_stamped_by_the_injected_clock(target: RecordingTarget) -> None:
    at = datetime(2026, 3, 8, 14, 0, 5, tzinfo=UTC)
    clock = ManualClock(at)
    policy = AddressPolicy(allow_loopback=True)
    http, grpc_caller = HttpCaller(policy, clock=clock), GrpcCaller(policy, clock=clock)
    runner = Runner(http, grpc_caller, CircuitBreaker(failures=3, open_s=1), clock=clock)
    # An HTTP-date Retry-After is read against the clock's now, not the machine's.
    target.script("/later", status=503, headers={"Retry-After": "Sun, 08 Mar 2026 14:00:35 GMT"})
    try:
        outcome = await runner.run(make_lease(HttpTarget(f"{target.url}/later")))
    finally:
        await http.aclose()
        await grpc_caller.aclose()
    assert (outcome.started_at, outcome.finished_at) == (at, at)
    assert outcome.retry_after == timedelta(seconds=30)


def _recording_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def test_a_traced_call_passes_its_span_to_the_target(target: RecordingTarget) -> None:
    """With tracing on, the HTTP call is a CLIENT span under the attempt's span, with the
    HTTP semantic-convention attributes, and the target receives that span's context;
    with tracing off it gets a fresh trace id and no span is made."""
    provider, exporter = _recording_provider()
    policy = AddressPolicy(allow_loopback=True)
    http, grpc_caller = HttpCaller(policy), GrpcCaller(policy)
    runner = Runner(http, grpc_caller, CircuitBreaker(failures=3, open_s=1))
    lease = make_lease(HttpTarget(f"{target.url}/traced"), attempt=2)
    tracing.install(provider)
    try:
        with provider.get_tracer("t").start_as_current_span("attempt") as attempt:
            await runner.run(lease)
        tracing.install(None)
        await runner.run(lease)  # tracing off: no span, a fresh id
    finally:
        tracing.install(None)
        await http.aclose()
        await grpc_caller.aclose()
    call_span, attempt_span = exporter.get_finished_spans()
    assert attempt_span.context == attempt.get_span_context()
    assert call_span.name == "POST"
    assert call_span.kind is SpanKind.CLIENT
    assert call_span.parent is not None
    assert call_span.parent.span_id == attempt.get_span_context().span_id
    assert call_span.attributes is not None
    assert call_span.attributes["http.request.method"] == "POST"
    assert call_span.attributes["server.address"] == "127.0.0.1"
    assert call_span.attributes["server.port"] == int(target.url.rsplit(":", 1)[1])
    assert call_span.attributes["http.response.status_code"] == 200
    context = call_span.get_span_context()
    traced, fresh = (call.request.headers["traceparent"] for call in target.calls)
    assert traced == f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", fresh)
    assert fresh.split("-")[1] != traced.split("-")[1]


async def test_a_failed_traced_call_has_error_status(target: RecordingTarget) -> None:
    provider, exporter = _recording_provider()
    policy = AddressPolicy(allow_loopback=True)
    http, grpc_caller = HttpCaller(policy), GrpcCaller(policy)
    runner = Runner(http, grpc_caller, CircuitBreaker(failures=3, open_s=1))
    target.script("/down", status=503)
    tracing.install(provider)
    try:
        with provider.get_tracer("t").start_as_current_span("attempt"):
            outcome = await runner.run(make_lease(HttpTarget(f"{target.url}/down")))
    finally:
        tracing.install(None)
        await http.aclose()
        await grpc_caller.aclose()
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    span, _ = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["http.response.status_code"] == 503
    assert span.attributes["error.type"] == "503"


async def test_an_unsampled_run_makes_no_attempt_span_and_calls_with_its_own_context(
    target: RecordingTarget,
) -> None:
    """Tracing on, two runs: the sampled one gets its attempt span (the call's parent);
    the one whose stored context is not sampled gets none (the sampler follows the
    parent: it would record nothing) and its call carries that stored context."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(1.0)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_ids = ("4bf92f3577b34da6a3ce929d0e0e4736", "5cf92f3577b34da6a3ce929d0e0e4737")
    sampled = f"00-{trace_ids[0]}-00f067aa0ba902b7-01"
    unsampled = f"00-{trace_ids[1]}-00f067aa0ba902b8-00"
    leases = [
        dataclasses.replace(make_lease(HttpTarget(f"{target.url}/sampled")), traceparent=sampled),
        dataclasses.replace(
            make_lease(
                HttpTarget(f"{target.url}/unsampled"),
                job_id="9f1c2e4a-7b3d-4c5e-9f60-1a2b3c4d5e6f",
            ),
            traceparent=unsampled,
        ),
    ]
    reported: list[Completion] = []

    async def submit(completion: Completion) -> Answer:
        reported.append(completion)
        return Answer(accepted=True)

    policy = AddressPolicy(allow_loopback=True)
    http, grpc_caller = HttpCaller(policy), GrpcCaller(policy)
    runner = Runner(http, grpc_caller, CircuitBreaker(failures=3, open_s=1))
    config = ExecutorConfig(
        nats_url="nats://127.0.0.1:4222", ledger_address="127.0.0.1:1", ledger_token="t"
    )
    inflight = InFlight(config, runner, submit)
    tracing.install(provider)
    try:
        assert await inflight.reserve(2, stop=asyncio.Event()) == 2
        assert all(inflight.start(lease) for lease in leases)
        await asyncio.wait_for(inflight.wait_idle(), 10)
    finally:
        tracing.install(None)
        await http.aclose()
        await grpc_caller.aclose()
    assert [c.outcome.status for c in reported] == [OutcomeStatus.SUCCEEDED] * 2
    spans = exporter.get_finished_spans()
    assert sorted(span.name for span in spans) == ["POST", "sundial.attempt"]
    assert {f"{span.context.trace_id:032x}" for span in spans} == {trace_ids[0]}
    (unsampled_call,) = target.calls_to("/unsampled")
    assert unsampled_call.request.headers["traceparent"] == unsampled
    (sampled_call,) = target.calls_to("/sampled")
    assert sampled_call.request.headers["traceparent"].split("-")[1] == trace_ids[0]
