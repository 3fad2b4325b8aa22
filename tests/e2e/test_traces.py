"""One trace per run: an in-process OTLP receiver sees a triggered run's spans from the
API, the scheduler and the executor under the trace id of the caller's ``traceparent``,
the ``traceparent`` the target received inside that trace, a failed attempt with ERROR
status, and both attempts of the retried run in the same trace. And an executor whose
collector is unreachable still stops promptly (the span flush at exit is bounded)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import grpc
import nats
import pytest
from google.protobuf.duration_pb2 import Duration

from sundial.core.bus import DEAD_STREAM, dead_subject
from sundial.devstack import Services, Stack
from sundial.v1 import job_pb2, job_service_pb2, run_pb2
from tests.e2e.test_executor_processes import one_time_jobs, succeeded
from tests.helpers.cluster import Cluster, Tenant, client_of, shared_services
from tests.helpers.eventually import assert_eventually
from tests.helpers.grpc_target import GrpcTargetServer
from tests.helpers.otlp_receiver import STATUS_ERROR, OtlpReceiver, ReceivedSpan
from tests.helpers.stack import nats_options
from tests.helpers.target_server import RecordingTarget

pytestmark = pytest.mark.timeout(120)

SPAN_KIND_CLIENT = 3  # opentelemetry.proto.trace.v1.Span.SpanKind
# Exports every 0.2 s instead of the SDK's 5 s, so the test waits less for the spans.
QUICK_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "200"}


@pytest.fixture(scope="module")
def module_receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture
def receiver(module_receiver: OtlpReceiver) -> OtlpReceiver:
    """The module's receiver, without the spans of the tests before."""
    module_receiver.forget()
    return module_receiver


@pytest.fixture(scope="module")
def traced_services(
    stack: Stack,
    module_database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
    module_receiver: OtlpReceiver,
) -> Iterator[Services]:
    """The three services, each exporting its spans to the receiver, shared by the
    module's tests (each with a tenant of its own; traces are told apart by their ids)."""
    with shared_services(
        stack,
        module_database_url,
        tmp_path_factory.mktemp("traced"),
        SUNDIAL_OTLP_ENDPOINT=module_receiver.endpoint,
        **QUICK_EXPORT,
    ) as services:
        yield services


@pytest.fixture
async def traced(traced_services: Services, receiver: OtlpReceiver) -> AsyncIterator[Cluster]:
    async with client_of(traced_services) as running:
        yield running


def _retrying_job(name: str, target: job_pb2.Target) -> job_pb2.Job:
    """A job that never comes due by itself, retried after a second or two."""
    return job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron="0 0 1 1 *"),
        target=target,
        policies=job_pb2.Policies(
            retry=job_pb2.RetryPolicy(
                max_attempts=3, base_delay=Duration(seconds=1), max_delay=Duration(seconds=1)
            )
        ),
    )


async def _trigger(tenant: Tenant, job_id: str, traceparent: str) -> run_pb2.Run:
    answer = await tenant.jobs.TriggerJob(
        job_service_pb2.TriggerJobRequest(job_id=job_id),
        metadata=(*tenant.metadata, ("traceparent", traceparent)),
        timeout=10,
    )
    return answer.run  # type: ignore[no-any-return]


async def _succeeded_at(tenant: Tenant, job_id: str, attempt: int) -> run_pb2.Run:
    runs = await tenant.runs(job_id)
    assert len(runs) == 1, runs
    [run] = runs
    assert run.status == run_pb2.RUN_STATUS_SUCCEEDED, run
    assert run.attempt == attempt
    return run


def _attempts(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    found = [s for s in spans if s.service == "sundial-executor" and s.name == "sundial.attempt"]
    return sorted(found, key=lambda s: s.attributes["sundial.attempt"])


async def test_a_triggered_run_is_one_trace_across_the_three_services(
    traced: Cluster, receiver: OtlpReceiver, target: RecordingTarget
) -> None:
    tenant = await traced.tenant()
    http = job_pb2.Target(http=job_pb2.HttpTarget(url=f"{target.url}/flaky"))
    job = await tenant.create_job(_retrying_job("traced-http", http))
    job_id = job.job_id  # type: ignore[attr-defined]
    # The first attempt fails (and asks for 2 s, so the script changes before the retry).
    target.script("/flaky", status=503, headers={"Retry-After": "2"})
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    await _trigger(tenant, job_id, f"00-{trace_id}-{caller_span}-01")
    await assert_eventually(lambda: _assert_called(target, 1), timeout_s=20, interval_s=0.05)
    target.script("/flaky", status=200)
    await assert_eventually(lambda: _succeeded_at(tenant, job_id, 2), timeout_s=30)

    def whole_trace() -> list[ReceivedSpan]:
        spans = receiver.trace(trace_id)
        assert len(_attempts(spans)) == 2, [(s.service, s.name) for s in spans]
        services = {s.service for s in spans}
        assert services == {"sundial-api", "sundial-scheduler", "sundial-executor"}
        assert any(s.name == "sundial.retry" for s in spans)
        return spans

    spans = await assert_eventually(whole_trace, timeout_s=20, interval_s=0.2)

    # The API's TriggerJob span, child of the caller's, starts the run's context.
    [api] = [s for s in spans if s.service == "sundial-api"]
    assert api.name == "/sundial.v1.JobService/TriggerJob"
    assert api.parent_span_id == caller_span
    assert api.attributes["rpc.system"] == "grpc"
    assert api.attributes["rpc.service"] == "sundial.v1.JobService"
    assert api.attributes["rpc.method"] == "TriggerJob"

    # The scheduler published the run, then the retry, each in the run's trace.
    scheduler = [s for s in spans if s.service == "sundial-scheduler"]
    assert {s.name for s in scheduler} >= {"sundial.publish", "sundial.retry"}
    assert all(s.parent_span_id == api.span_id for s in scheduler)

    # Both attempts are children of the run's context; the failed one has ERROR status.
    first, second = _attempts(spans)
    assert (first.attributes["sundial.attempt"], second.attributes["sundial.attempt"]) == (1, 2)
    assert first.parent_span_id == second.parent_span_id == api.span_id
    assert first.status_code == STATUS_ERROR
    assert first.attributes["sundial.outcome"] == "failed_retryable"
    assert first.attributes["sundial.run.next_status"] == "retrying"
    assert second.status_code != STATUS_ERROR
    assert second.attributes["sundial.run.next_status"] == "succeeded"

    # Each attempt links to the LeaseRuns batch that granted it, whose RPC reached the
    # ledger (the scheduler's server span, a child of the executor's client span). That
    # batch is a trace of its own, exported by each process on its own schedule: waited
    # for (the scheduler's span once came after the run's trace was whole).
    def leases_reached_the_ledger() -> None:
        for attempt in (first, second):
            [(link_trace, link_span)] = attempt.links
            lease = receiver.span(link_span)
            assert lease is not None and lease.name == "sundial.lease"
            calls = [
                s
                for s in receiver.trace(link_trace)
                if s.name.endswith("RunLedgerService/LeaseRuns")
            ]
            assert {s.service for s in calls} == {"sundial-executor", "sundial-scheduler"}
            assert any(
                s.kind == SPAN_KIND_CLIENT and "server.address" in s.attributes for s in calls
            )

    await assert_eventually(leases_reached_the_ledger, timeout_s=20, interval_s=0.2)

    # The target received a traceparent inside the trace: the HTTP call's span, a child
    # of its attempt, with the HTTP attributes (the 503 an error).
    received = [c.request.headers["traceparent"] for c in target.calls_to("/flaky")]
    assert len(received) == 2
    for traceparent, attempt, status in zip(received, (first, second), (503, 200), strict=True):
        _, tid, sid, _ = traceparent.split("-")
        assert tid == trace_id
        call = receiver.span(sid)
        assert call is not None, f"no span {sid} for the call the target received"
        assert call.kind == SPAN_KIND_CLIENT
        assert call.parent_span_id == attempt.span_id
        assert call.attributes["http.request.method"] == "POST"
        assert call.attributes["http.response.status_code"] == status
        assert call.attributes["server.address"] == "127.0.0.1"
        assert (call.status_code == STATUS_ERROR) == (status == 503)


async def test_a_grpc_target_answering_unavailable_fails_its_attempt_in_the_trace(
    traced: Cluster, receiver: OtlpReceiver
) -> None:
    async with GrpcTargetServer() as server:
        server.answer = (grpc.StatusCode.UNAVAILABLE, "busy", (("retry-after", "2"),))
        tenant = await traced.tenant()
        target = job_pb2.Target(grpc=job_pb2.GrpcTarget(address=server.address, plaintext=True))
        job = await tenant.create_job(_retrying_job("traced-grpc", target))
        job_id = job.job_id  # type: ignore[attr-defined]
        trace_id = secrets.token_hex(16)
        await _trigger(tenant, job_id, f"00-{trace_id}-{secrets.token_hex(8)}-01")
        await assert_eventually(lambda: _assert_one(server.calls), timeout_s=20, interval_s=0.05)
        server.answer = (grpc.StatusCode.OK, "", ())
        await assert_eventually(lambda: _succeeded_at(tenant, job_id, 2), timeout_s=30)
        received = [call.metadata["traceparent"] for call in server.calls]

    def attempts() -> list[ReceivedSpan]:
        found = _attempts(receiver.trace(trace_id))
        assert len(found) == 2
        return found

    first, second = await assert_eventually(attempts, timeout_s=20, interval_s=0.2)
    assert first.status_code == STATUS_ERROR
    assert first.attributes["sundial.error_class"] == "retryable"
    assert second.status_code != STATUS_ERROR
    # Each call is the gRPC instrumentation's client span under its attempt.
    for traceparent, attempt, code in zip(received, (first, second), (14, 0), strict=True):
        _, tid, sid, _ = traceparent.split("-")
        assert tid == trace_id
        call = receiver.span(sid)
        assert call is not None
        assert call.name == "/sundial.v1.TargetService/Execute"
        assert call.parent_span_id == attempt.span_id
        assert call.attributes["rpc.grpc.status_code"] == code
        assert call.attributes["server.address"] == "127.0.0.1"
        assert (call.status_code == STATUS_ERROR) == (code != 0)


async def test_scheduled_and_backfilled_runs_each_get_a_trace_of_their_own(
    traced: Cluster, receiver: OtlpReceiver, target: RecordingTarget
) -> None:
    """A scheduled run's trace starts at its dispatch, linked to the CreateJob call that
    made its job; backfilled runs get one trace each, linked to the BackfillJob call that
    made them, and their attempts join it."""
    tenant = await traced.tenant()
    [scheduled_job] = await one_time_jobs(tenant, f"{target.url}/ok", 1)
    http = job_pb2.Target(http=job_pb2.HttpTarget(url=f"{target.url}/ok"))
    backfilled = await tenant.create_job(
        job_pb2.Job(
            name="traced-backfill", schedule=job_pb2.Schedule(cron="* * * * *"), target=http
        )
    )
    backfilled_id = backfilled.job_id  # type: ignore[attr-defined]
    request = job_service_pb2.BackfillJobRequest(job_id=backfilled_id)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    request.start_time.FromDatetime(now - timedelta(minutes=2))
    request.end_time.FromDatetime(now)
    await tenant.call("BackfillJob", request)
    await assert_eventually(
        lambda: succeeded(tenant, [scheduled_job, backfilled_id]), timeout_s=40, interval_s=0.5
    )

    def attempts_of(prefixes: tuple[str, ...], count: int) -> list[ReceivedSpan]:
        found = [
            s
            for s in receiver.spans
            if s.name == "sundial.attempt" and s.attributes["sundial.run_key"].startswith(prefixes)
        ]
        assert len(found) == count
        return found

    def scheduled_trace() -> None:
        # Each service exports its spans on its own schedule: wait for all of them.
        [scheduled] = attempts_of((f"{scheduled_job}@",), 1)
        dispatch = receiver.span(scheduled.parent_span_id)
        assert dispatch is not None
        assert (dispatch.service, dispatch.name) == ("sundial-scheduler", "sundial.dispatch")
        assert dispatch.parent_span_id == ""  # the root of the run's trace
        assert dispatch.attributes["sundial.run_key"] == scheduled.attributes["sundial.run_key"]
        # The job's first run links to the CreateJob call that made the job.
        [(create_trace, create_span)] = dispatch.links
        create = receiver.span(create_span)
        assert create is not None and create.trace_id == create_trace
        assert (create.service, create.name) == ("sundial-api", "/sundial.v1.JobService/CreateJob")

    await assert_eventually(scheduled_trace, timeout_s=20)

    # The two backfilled occurrences (the job's own cron may also fire meanwhile).
    backfilled_keys = tuple(
        f"{backfilled_id}@{(now - timedelta(minutes=m)):%Y-%m-%dT%H:%M:%SZ}" for m in (2, 1)
    )

    def backfill_traces() -> None:
        backfill_attempts = attempts_of(backfilled_keys, 2)
        assert len({a.trace_id for a in backfill_attempts}) == 2  # one trace per run
        [call] = [s for s in receiver.spans if s.name == "/sundial.v1.JobService/BackfillJob"]
        for attempt in backfill_attempts:
            root = receiver.span(attempt.parent_span_id)
            assert root is not None and root.name == "sundial.backfill"
            assert root.trace_id == attempt.trace_id != call.trace_id
            assert root.links == ((call.trace_id, call.span_id),)

    await assert_eventually(backfill_traces, timeout_s=20)


async def test_a_dead_run_ends_its_trace_with_the_dead_letter(
    traced: Cluster, receiver: OtlpReceiver, target: RecordingTarget, stack: Stack
) -> None:
    """The dead letter is in the run's trace, and its context travels with the letter."""
    tenant = await traced.tenant()
    target.script("/gone", status=404)  # a final failure: dead at once
    http = job_pb2.Target(http=job_pb2.HttpTarget(url=f"{target.url}/gone"))
    job = await tenant.create_job(_retrying_job("traced-dead", http))
    job_id = job.job_id  # type: ignore[attr-defined]
    trace_id = secrets.token_hex(16)
    await _trigger(tenant, job_id, f"00-{trace_id}-{secrets.token_hex(8)}-01")

    def letter_span() -> ReceivedSpan:
        letters = [s for s in receiver.trace(trace_id) if s.name == "sundial.dead_letter"]
        assert len(letters) == 1, [(s.service, s.name) for s in receiver.trace(trace_id)]
        return letters[0]

    letter = await assert_eventually(letter_span, timeout_s=30, interval_s=0.2)

    def attempt_span() -> ReceivedSpan:
        # The executor exports its spans in batches of its own: the scheduler's dead
        # letter can reach the receiver first.
        attempts = _attempts(receiver.trace(trace_id))
        assert len(attempts) == 1, [(s.service, s.name) for s in receiver.trace(trace_id)]
        return attempts[0]

    attempt = await assert_eventually(attempt_span, timeout_s=30, interval_s=0.2)
    assert attempt.status_code == STATUS_ERROR
    assert attempt.attributes["sundial.run.next_status"] == "dead"
    assert letter.service == "sundial-scheduler"
    assert letter.parent_span_id == attempt.parent_span_id  # the run's context
    client = await nats.connect(**nats_options(stack))
    try:
        message = await client.jetstream().get_last_msg(DEAD_STREAM, dead_subject(tenant.tenant_id))
    finally:
        await client.close()
    assert message.headers is not None
    assert message.headers["traceparent"].split("-")[1:3] == [trace_id, letter.span_id]


async def test_a_run_longer_than_its_lease_keeps_it_through_the_traced_heartbeat(
    traced: Cluster, target: RecordingTarget
) -> None:
    """The instrumented Heartbeat stream still extends leases: a call outlasting the
    lease (10 s here) succeeds at its first attempt."""
    tenant = await traced.tenant()
    target.script("/slow", delay_s=12)
    [job_id] = await one_time_jobs(tenant, f"{target.url}/slow", 1, in_s=1)
    await assert_eventually(lambda: _succeeded_at(tenant, job_id, 1), timeout_s=40)
    assert len(target.calls_to("/slow")) == 1


# Last: it stops the module's receiver and one of its processes.
async def test_an_executor_stops_promptly_when_its_collector_is_unreachable(
    traced: Cluster, module_receiver: OtlpReceiver, target: RecordingTarget
) -> None:
    module_receiver.stop()  # nothing listens at the services' collector endpoint now
    tenant = await traced.tenant()
    jobs = await one_time_jobs(tenant, f"{target.url}/ok", 3)
    await assert_eventually(lambda: succeeded(tenant, jobs), timeout_s=40, interval_s=0.5)
    executor = traced.services.processes.pop("executor")
    started = time.monotonic()
    await asyncio.to_thread(executor.stop)
    elapsed = time.monotonic() - started
    # Spans are queued (three runs' worth, never exported); the flush gives up after its
    # bound (2 s in all with the metrics), not after the exporter's retries (10 s a batch).
    assert elapsed < 5, f"the executor took {elapsed:.1f} s to stop"


def _assert_called(target: RecordingTarget, count: int) -> None:
    assert len(target.calls_to("/flaky")) >= count


def _assert_one(calls: list[object]) -> None:
    assert calls
