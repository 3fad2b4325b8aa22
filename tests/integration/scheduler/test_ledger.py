"""RunLedger through a real gRPC server: leases, fencing, heartbeats, retries, the cap."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import random
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import grpc
import pytest
from google.protobuf import duration_pb2
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from sundial.client import key_id, verify_signature
from sundial.core import wire
from sundial.core.auth import Role, Tokens
from sundial.core.bus import Bus
from sundial.core.clock import ManualClock, SystemClock
from sundial.core.config import ServerConfig
from sundial.core.egress import parse_rule, policy_of
from sundial.core.grpc import build_server
from sundial.core.telemetry import (
    LEASES_EXPIRED,
    OCCURRENCES_STARTED,
    RUNS_COMPLETED,
    RUNS_FENCED,
)
from sundial.core.wire import timestamp
from sundial.devstack import Stack
from sundial.internal.v1 import events_pb2, ledger_pb2, ledger_pb2_grpc
from sundial.job import JobPolicies
from sundial.schedule import CronSpec, Schedule
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.ledger import LedgerAuthInterceptor, RunLedgerServiceServicer
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from sundial.scheduler.sweeper import Sweeper
from sundial.v1 import run_pb2
from tests.helpers.bearer import bearer_interceptors
from tests.helpers.eventually import assert_eventually
from tests.helpers.metrics import counts
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import (
    add_tenant,
    dead_letters,
    insert_jobs,
    insert_queued_runs,
    issue_token,
)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
ALL = list(range(256))
DAILY = Schedule(CronSpec("0 0 * * *"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@contextlib.asynccontextmanager
async def serve(
    servicer: RunLedgerServiceServicer, pool: asyncpg.Pool
) -> AsyncIterator[ledger_pb2_grpc.RunLedgerServiceStub]:
    """``servicer`` behind a real gRPC server on a free port (with its authentication),
    and a stub calling it with an executor token."""
    server = build_server(
        ServerConfig(listen="127.0.0.1:0"),
        services=[(ledger_pb2_grpc.add_RunLedgerServiceServicer_to_server, servicer)],
        service_names=["sundial.internal.v1.RunLedgerService"],
        interceptors=[LedgerAuthInterceptor(Tokens(pool, SystemClock()))],
    )
    await server.start()
    token = await issue_token(pool, Role.EXECUTOR)
    try:
        async with grpc.aio.insecure_channel(
            server.address, interceptors=bearer_interceptors(token)
        ) as channel:
            yield ledger_pb2_grpc.RunLedgerServiceStub(channel)
    finally:
        await server.stop(0)


@pytest.fixture
async def ledger(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> AsyncIterator[ledger_pb2_grpc.RunLedgerServiceStub]:
    config = scheduler_config(migrated_database_url, stack)
    servicer = RunLedgerServiceServicer(
        SchedulerStore(pool), bus.jetstream, config, clock, random.Random(7)
    )
    async with serve(servicer, pool) as stub:
        yield stub


def ref(job_id: object, at: datetime) -> run_pb2.RunRef:
    return run_pb2.RunRef(job_id=str(job_id), scheduled_at=timestamp(at))


HOLDERS: dict[tuple[str, int, int], tuple[str, str]] = {}
"""(executor id, lease id) of every grant seen, by (job id, scheduled_at, attempt): whom
``complete`` reports as (these tests are about the ledger's decisions, not fencing on the
holder, which the contract suite covers)."""


def _held_key(run: run_pb2.RunRef, attempt: int) -> tuple[str, int, int]:
    return (run.job_id, run.scheduled_at.seconds, attempt)


async def lease(
    stub: ledger_pb2_grpc.RunLedgerServiceStub, refs: list[run_pb2.RunRef], executor: str = "ex-1"
) -> list[ledger_pb2.LeaseResult]:
    answer = await stub.LeaseRuns(ledger_pb2.LeaseRunsRequest(executor_id=executor, runs=refs))
    for run, result in zip(refs, answer.results, strict=True):
        if result.WhichOneof("result") == "grant":
            grant = result.grant
            HOLDERS[_held_key(run, grant.attempt)] = (executor, grant.lease_id)
    return list(answer.results)


async def complete(
    stub: ledger_pb2_grpc.RunLedgerServiceStub,
    run: run_pb2.RunRef,
    attempt: int,
    status: int = ledger_pb2.OUTCOME_STATUS_SUCCEEDED,
    **fields: object,
) -> ledger_pb2.CompletionResult:
    executor, lease_id = HOLDERS.get(_held_key(run, attempt), ("ex-1", ""))
    outcome = ledger_pb2.Outcome(
        run=run, attempt=attempt, status=status, lease_id=lease_id, **fields
    )
    answer = await stub.CompleteRuns(
        ledger_pb2.CompleteRunsRequest(executor_id=executor, outcomes=[outcome])
    )
    return answer.results[0]


async def test_grant_carries_what_to_call_and_success_is_recorded(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0, payload=b'{"a":1}')
    await insert_queued_runs(pool, job, [T0])
    [result] = await lease(ledger, [ref(job, T0)])
    grant = result.grant
    assert grant.attempt == 1 and grant.payload == b'{"a":1}'
    assert grant.target.http.url == "https://example.com/hook"
    assert grant.run_key == f"{job}@2030-01-01T12:00:00Z"
    assert grant.signature.startswith("t=") and ",v1=" in grant.signature
    assert grant.run_timeout.seconds == 1800 and grant.tenant_id == "acme"
    # A duplicate delivery of the same message is told the run is leased.
    [again] = await lease(ledger, [ref(job, T0)], executor="ex-2")
    assert again.rejection.reason == ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE
    done = await complete(ledger, ref(job, T0), 1)
    assert done.accepted and done.next_status == run_pb2.RUN_STATUS_SUCCEEDED
    row = await pool.fetchrow("SELECT status, check_at FROM job_runs WHERE job_id = $1", job)
    assert row["status"] == "succeeded" and row["check_at"] is None
    stats = await pool.fetchrow("SELECT succeeded_count FROM job_stats WHERE job_id = $1", job)
    assert stats["succeeded_count"] == 1
    [finished] = await lease(ledger, [ref(job, T0)])
    assert finished.rejection.reason == ledger_pb2.REJECT_REASON_FINISHED


async def test_stale_attempt_is_fenced_out_and_changes_nothing(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0])
    [first] = await lease(ledger, [ref(job, T0)], executor="ex-old")
    assert first.grant.attempt == 1
    clock.advance(31)  # the old executor's lease expires
    [second] = await lease(ledger, [ref(job, T0)], executor="ex-new")
    assert second.grant.attempt == 2
    before = await pool.fetchrow("SELECT * FROM job_runs WHERE job_id = $1", job)
    stale = await complete(ledger, ref(job, T0), 1, ledger_pb2.OUTCOME_STATUS_FAILED_FINAL)
    assert not stale.accepted
    assert stale.fence_reason == ledger_pb2.FENCE_REASON_STALE_ATTEMPT
    assert stale.next_status == run_pb2.RUN_STATUS_RUNNING
    after = await pool.fetchrow("SELECT * FROM job_runs WHERE job_id = $1", job)
    assert dict(after) == dict(before)
    # The stale executor's heartbeat learns it lost the run.
    call = ledger.Heartbeat()
    held = ledger_pb2.HeldRun(run=ref(job, T0), attempt=1)
    await call.write(ledger_pb2.HeartbeatRequest(executor_id="ex-old", runs=[held]))
    beat = await call.read()
    assert list(beat.lost) == [held] and not beat.extended
    await call.done_writing()
    current = await complete(ledger, ref(job, T0), 2)
    assert current.accepted
    retried = await complete(ledger, ref(job, T0), 2)  # a retried CompleteRuns call
    assert retried.fence_reason == ledger_pb2.FENCE_REASON_NOT_RUNNING


async def test_heartbeat_extends_matching_leases(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0])
    [granted] = await lease(ledger, [ref(job, T0)])
    clock.advance(20)
    call = ledger.Heartbeat()
    held = ledger_pb2.HeldRun(
        run=ref(job, T0), attempt=granted.grant.attempt, lease_id=granted.grant.lease_id
    )
    await call.write(ledger_pb2.HeartbeatRequest(executor_id="ex-1", runs=[held]))
    beat = await call.read()
    await call.done_writing()
    [extension] = beat.extended
    assert extension.lease_until.ToDatetime(UTC) == T0 + timedelta(seconds=50)
    assert beat.heartbeat_interval.seconds == 10
    lease_until = await pool.fetchval("SELECT lease_until FROM job_runs WHERE job_id=$1", job)
    assert lease_until == T0 + timedelta(seconds=50)


async def test_retryable_failure_backs_off_then_dies_with_a_dead_letter(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock, bus: Bus
) -> None:
    policies = JobPolicies(retry_max_attempts=2, retry_base_delay=timedelta(seconds=10))
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=policies)
    await insert_queued_runs(pool, job, [T0])
    [g1] = await lease(ledger, [ref(job, T0)])
    failed = await complete(
        ledger,
        ref(job, T0),
        g1.grant.attempt,
        ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE,
        error="503 from target",
        error_class=run_pb2.ERROR_CLASS_RETRYABLE,
        http_status=503,
    )
    assert failed.accepted and failed.next_status == run_pb2.RUN_STATUS_RETRYING
    assert await pool.fetchval("SELECT last_http_status FROM job_runs") == 503
    wait = failed.next_attempt_at.ToDatetime(UTC) - T0
    assert timedelta(0) <= wait <= timedelta(seconds=20)  # random(0, 10 s * 2^1)
    # Early duplicate message: not due yet.
    if wait > timedelta(0):
        [early] = await lease(ledger, [ref(job, T0)])
        assert early.rejection.reason == ledger_pb2.REJECT_REASON_NOT_DUE
    clock.advance(21)
    [g2] = await lease(ledger, [ref(job, T0)])
    assert g2.grant.attempt == 2
    # Retry-After is honoured... but this is the last attempt: the run dies.
    dead = await complete(
        ledger,
        ref(job, T0),
        2,
        ledger_pb2.OUTCOME_STATUS_TIMED_OUT,
        error="timed out after 30 min",
    )
    assert dead.accepted and dead.next_status == run_pb2.RUN_STATUS_DEAD
    row = await pool.fetchrow("SELECT status, last_error, error_class FROM job_runs")
    assert dict(row) == {
        "status": "dead",
        "last_error": "timed out after 30 min",
        "error_class": "timeout",
    }
    assert await pool.fetchval("SELECT dead_count FROM job_stats WHERE job_id=$1", job) == 1
    [letter] = [d for d in await dead_letters(bus.jetstream) if d.run.job_id == str(job)]
    assert letter.last_error == "timed out after 30 min" and letter.run.attempt == 2
    assert letter.run.run_key == f"{job}@2030-01-01T12:00:00Z"


async def test_retry_after_is_honoured(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0])
    await lease(ledger, [ref(job, T0)])
    result = await complete(
        ledger,
        ref(job, T0),
        1,
        ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE,
        retry_after=duration_pb2.Duration(seconds=600),
    )
    assert result.next_attempt_at.ToDatetime(UTC) == T0 + timedelta(seconds=600)


async def test_tenant_cap_holds_under_concurrent_leases(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    await add_tenant(pool, "capped", cap=3)
    jobs = await insert_jobs(pool, DAILY, first_due=T0, count=20, tenant_id="capped")
    for job in jobs:
        await insert_queued_runs(pool, job, [T0], tenant_id="capped")
    calls = [
        lease(ledger, [ref(job, T0) for job in jobs[i * 4 : i * 4 + 4]], executor=f"ex-{i}")
        for i in range(5)
    ]
    results = [r for batch in await asyncio.gather(*calls) for r in batch]
    grants = [r for r in results if r.HasField("grant")]
    capped = [
        r for r in results if r.rejection.reason == ledger_pb2.REJECT_REASON_TENANT_AT_CAPACITY
    ]
    assert len(grants) == 3 and len(capped) == 17
    assert all(r.rejection.retry_after.seconds == 5 for r in capped)
    running = await pool.fetchval(
        "SELECT count(*) FROM job_runs WHERE tenant_id='capped' AND status='running'"
    )
    assert running == 3


async def test_unknown_run_is_not_found(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    [result] = await lease(ledger, [ref(job, T0)])
    assert result.rejection.reason == ledger_pb2.REJECT_REASON_NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await lease(ledger, [run_pb2.RunRef(job_id="nope", scheduled_at=timestamp(T0))])
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_cancel_between_beats_is_pushed_on_the_stream(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0])
    [granted] = await lease(ledger, [ref(job, T0)])
    call = ledger.Heartbeat()
    held = ledger_pb2.HeldRun(
        run=ref(job, T0), attempt=granted.grant.attempt, lease_id=granted.grant.lease_id
    )
    await call.write(ledger_pb2.HeartbeatRequest(executor_id="ex-1", runs=[held]))
    first = await call.read()
    assert len(first.extended) == 1 and not first.cancel
    # CancelRun / CANCEL_OTHER flag the run while the executor is between beats.
    await pool.execute("UPDATE job_runs SET cancel_requested = true WHERE job_id = $1", job)
    async with asyncio.timeout(10):
        pushed = await call.read()
    assert [c.run for c in pushed.cancel] == [held.run] and not pushed.extended
    await call.done_writing()


async def test_signature_has_one_v1_and_one_v2_per_valid_secret(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    # A rotation in progress: the new secret and the old one until it expires.
    await pool.execute(
        "INSERT INTO tenant_signing_secrets (tenant_id, secret, created_at, expires_at) VALUES"
        " ('acme', $1, now() - interval '1 day', now() + interval '1 hour'),"
        " ('acme', $2, now(), NULL),"
        " ('acme', $3, now() - interval '2 days', now() - interval '1 hour')",
        b"o" * 32,
        b"n" * 32,
        b"x" * 32,
    )
    [job] = await insert_jobs(pool, DAILY, first_due=T0, payload=b"body")
    await insert_queued_runs(pool, job, [T0])
    [result] = await lease(ledger, [ref(job, T0)])
    grant = result.grant
    t, *macs = grant.signature.split(",")
    message = f"{t[2:]}.{grant.run_key}.1.".encode() + b"body"
    assert [m for m in macs if m.startswith("v1=")] == [
        "v1=" + hmac.new(secret, message, hashlib.sha256).hexdigest()
        for secret in (b"n" * 32, b"o" * 32)
    ]
    # And one v2 each, bound to the run's purpose and its target (the secrets' key ids).
    assert [m.split(":")[0] for m in macs if m.startswith("v2=")] == [
        f"v2={key_id(secret.decode())}" for secret in (b"n" * 32, b"o" * 32)
    ]
    for secret in ("n" * 32, "o" * 32):
        verify_signature(
            grant.signature,
            secrets=[secret],
            idempotency_key=grant.run_key,
            attempt=1,
            body=b"body",
            purpose="run",
            destination=grant.target.http.url,
            now=int(t[2:]),  # the ledger's clock is the test's
        )


async def test_dead_letter_the_ledger_could_not_publish_is_sent_by_the_sweeper(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    config = scheduler_config(migrated_database_url, stack)
    store = SchedulerStore(pool)
    policies = JobPolicies(retry_max_attempts=1)
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=policies)
    await insert_queued_runs(pool, job, [T0])
    # A ledger without NATS: the run dies, its letter is not acknowledged.
    async with serve(RunLedgerServiceServicer(store, None, config, clock), pool) as cut_off:
        [grant] = await lease(cut_off, [ref(job, T0)])
        dead = await complete(
            cut_off,
            ref(job, T0),
            grant.grant.attempt,
            ledger_pb2.OUTCOME_STATUS_FAILED_FINAL,
            error="404 from target",
            error_class=run_pb2.ERROR_CLASS_FINAL,
        )
    assert dead.accepted and dead.next_status == run_pb2.RUN_STATUS_DEAD
    assert await pool.fetchval("SELECT check_at FROM job_runs") is not None
    # Once the outbox entry is due, the sweeper publishes the letter.
    clock.advance(config.publish_confirm_s)
    sweeper = Sweeper(store, RunPublisher(bus.jetstream, "test"), lambda: ALL, config, clock)
    await sweeper.sweep_once()

    async def one_letter() -> events_pb2.DeadLetter:
        letters = [d for d in await dead_letters(bus.jetstream) if d.run.job_id == str(job)]
        assert len(letters) == 1, letters
        return letters[0]

    letter = await assert_eventually(one_letter, what="dead letter")
    assert letter.last_error == "404 from target" and letter.run.attempt == 1
    assert letter.error_class == run_pb2.ERROR_CLASS_FINAL
    assert await pool.fetchval("SELECT check_at FROM job_runs") is None


async def test_ledger_clears_the_outbox_entry_once_its_letter_is_acknowledged(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, bus: Bus
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0])
    [grant] = await lease(ledger, [ref(job, T0)])
    await complete(
        ledger, ref(job, T0), grant.grant.attempt, ledger_pb2.OUTCOME_STATUS_FAILED_FINAL
    )
    row = await pool.fetchrow("SELECT status, check_at FROM job_runs")
    assert (row["status"], row["check_at"]) == ("dead", None)
    assert [d for d in await dead_letters(bus.jetstream) if d.run.job_id == str(job)]


async def test_a_cancel_is_honoured_when_the_attempt_fails_retryably(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0])
    [grant] = await lease(ledger, [ref(job, T0)])
    # CancelRun while it runs; the target then fails with a retryable error.
    await pool.execute("UPDATE job_runs SET cancel_requested = true")
    result = await complete(
        ledger,
        ref(job, T0),
        grant.grant.attempt,
        ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE,
        error="503 from target",
    )
    assert result.accepted and result.next_status == run_pb2.RUN_STATUS_CANCELLED
    row = await pool.fetchrow("SELECT status, check_at, next_attempt_at FROM job_runs")
    assert dict(row) == {"status": "cancelled", "check_at": None, "next_attempt_at": None}
    assert await pool.fetchval("SELECT cancelled_count FROM job_stats WHERE job_id=$1", job) == 1


async def test_a_run_asked_to_stop_is_not_leased_again(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0])
    [grant] = await lease(ledger, [ref(job, T0)])
    assert grant.HasField("grant")
    # Cancelled, then the executor vanished: its lease expires before any sweep.
    await pool.execute("UPDATE job_runs SET cancel_requested = true")
    clock.advance(31)
    [again] = await lease(ledger, [ref(job, T0)], executor="ex-2")
    assert again.rejection.reason == ledger_pb2.REJECT_REASON_CANCELLED
    assert await pool.fetchval("SELECT attempt FROM job_runs") == 1


async def test_expired_lease_on_the_last_attempt_is_not_granted_again(
    *,
    pool: asyncpg.Pool,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    clock: ManualClock,
    bus: Bus,
    stack: Stack,
    migrated_database_url: str,
) -> None:
    policies = JobPolicies(retry_max_attempts=1)
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=policies)
    await insert_queued_runs(pool, job, [T0])
    [grant] = await lease(ledger, [ref(job, T0)])
    assert grant.grant.attempt == 1
    # The executor vanished; its message is redelivered before any sweep ran.
    clock.advance(31)
    [again] = await lease(ledger, [ref(job, T0)], executor="ex-2")
    assert again.rejection.reason == ledger_pb2.REJECT_REASON_FINISHED
    assert await pool.fetchval("SELECT attempt FROM job_runs") == 1
    # The sweeper applies the same rule: DEAD, with its dead letter.
    config = scheduler_config(migrated_database_url, stack)
    store = SchedulerStore(pool)
    reader = InMemoryMetricReader()
    sweeper = Sweeper(
        store,
        RunPublisher(bus.jetstream, "test"),
        lambda: ALL,
        config,
        clock,
        meter=MeterProvider(metric_readers=[reader]).get_meter("test"),
    )
    await sweeper.sweep_once()
    assert await pool.fetchval("SELECT status FROM job_runs") == "dead"
    assert counts(reader, LEASES_EXPIRED) == {(("outcome", "dead"),): 1}


async def test_a_retried_lease_call_of_the_same_executor_gets_the_same_grant_again(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock
) -> None:
    # The first LeaseRuns committed, but its answer never reached the executor (deadline,
    # broken connection): the retry must hand the same grant back, or nobody runs it.
    policies = JobPolicies(retry_max_attempts=1)
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=policies)
    await insert_queued_runs(pool, job, [T0])
    [first] = await lease(ledger, [ref(job, T0)], executor="ex-1")
    assert first.grant.attempt == 1
    clock.advance(5)
    [retried] = await lease(ledger, [ref(job, T0)], executor="ex-1")
    assert retried.WhichOneof("result") == "grant", retried
    assert retried.grant.attempt == 1  # the same fencing token: not a new attempt
    assert retried.grant.lease_until.ToDatetime(UTC) == T0 + timedelta(seconds=35)
    assert retried.grant.target.http.url == "https://example.com/hook"
    row = await pool.fetchrow("SELECT attempt, lease_until, executor_id FROM job_runs")
    assert row["attempt"] == 1 and row["executor_id"] == "ex-1"
    assert row["lease_until"] == T0 + timedelta(seconds=35)
    # Another executor is still told the run is leased; the holder's outcome counts.
    [other] = await lease(ledger, [ref(job, T0)], executor="ex-2")
    assert other.rejection.reason == ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE
    done = await complete(ledger, ref(job, T0), 1)
    assert done.accepted and done.next_status == run_pb2.RUN_STATUS_SUCCEEDED


async def test_a_regrant_does_not_count_against_the_tenant_cap_twice(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    await pool.execute("UPDATE tenants SET max_concurrent_runs = 1")
    jobs = await insert_jobs(pool, DAILY, first_due=T0, count=2)
    for job in jobs:
        await insert_queued_runs(pool, job, [T0])
    [first] = await lease(ledger, [ref(jobs[0], T0)])
    assert first.grant.attempt == 1
    again, capped = await lease(ledger, [ref(jobs[0], T0), ref(jobs[1], T0)])
    assert again.grant.attempt == 1
    assert capped.rejection.reason == ledger_pb2.REJECT_REASON_TENANT_AT_CAPACITY


async def test_outcomes_are_counted_by_next_status_and_error_class_and_fences_by_reason(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    reader = InMemoryMetricReader()
    servicer = RunLedgerServiceServicer(
        SchedulerStore(pool),
        bus.jetstream,
        scheduler_config(migrated_database_url, stack),
        clock,
        random.Random(7),
        meter=MeterProvider(metric_readers=[reader]).get_meter("test"),
    )
    policies = JobPolicies(retry_max_attempts=3, retry_base_delay=timedelta(seconds=10))
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=policies)
    await insert_queued_runs(pool, job, [T0])
    async with serve(servicer, pool) as ledger:
        [first] = await lease(ledger, [ref(job, T0)])
        failed = await complete(
            ledger,
            ref(job, T0),
            first.grant.attempt,
            ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE,
            error="503 from target",
            error_class=run_pb2.ERROR_CLASS_RETRYABLE,
        )
        assert failed.accepted
        clock.advance(21)  # past the backoff, random(0, 10 s * 2^1)
        [second] = await lease(ledger, [ref(job, T0)])
        assert (await complete(ledger, ref(job, T0), second.grant.attempt)).accepted
        retried = await complete(ledger, ref(job, T0), second.grant.attempt)
        assert not retried.accepted
    assert counts(reader, RUNS_COMPLETED) == {
        (("error_class", "retryable"), ("outcome", "retrying")): 1,
        (("outcome", "succeeded"),): 1,
    }
    assert counts(reader, RUNS_FENCED) == {(("reason", "not_running"),): 1}


@pytest.mark.parametrize("by_tenant", [False, True])
async def test_started_occurrences_are_counted_once_with_the_tenant_only_when_asked(
    pool: asyncpg.Pool,
    bus: Bus,
    stack: Stack,
    migrated_database_url: str,
    by_tenant: bool,
) -> None:
    # sundial.occurrences.started (the job SLO's starts, docs/design.md section 11): the
    # first grant of a scheduled run, on time or late against the job's threshold.
    policies = JobPolicies(lateness_threshold=timedelta(seconds=10))
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=policies)
    late, on_time = T0 - timedelta(seconds=30), T0 - timedelta(seconds=5)
    await insert_queued_runs(pool, job, [late, on_time])
    reader = InMemoryMetricReader()
    servicer = RunLedgerServiceServicer(
        SchedulerStore(pool),
        bus.jetstream,
        scheduler_config(migrated_database_url, stack, metrics_tenant_attribute=by_tenant),
        ManualClock(T0),
        random.Random(7),
        meter=MeterProvider(metric_readers=[reader]).get_meter("test"),
    )
    async with serve(servicer, pool) as ledger:
        for _ in range(2):  # the second call re-grants: each run started once
            results = await lease(ledger, [ref(job, late), ref(job, on_time)], "ex-slo")
            assert all(r.WhichOneof("result") == "grant" for r in results), results
    tenant = (("tenant", "acme"),) if by_tenant else ()
    assert counts(reader, OCCURRENCES_STARTED) == {
        (("outcome", "late"), *tenant): 1,
        (("outcome", "on_time"), *tenant): 1,
    }


async def test_each_grant_carries_the_tenants_egress_policy_as_it_is_then(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock
) -> None:
    policies = JobPolicies(retry_max_attempts=3, retry_base_delay=timedelta(seconds=1))
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=policies)
    await insert_queued_runs(pool, job, [T0])
    [first] = await lease(ledger, [ref(job, T0)])
    assert not first.grant.HasField("egress")  # no policy of its own: the default applies
    tightened = policy_of([parse_rule("*.svc.cluster.local"), parse_rule("10.0.0.0/8=grpc")])
    await pool.execute(
        "UPDATE tenants SET egress_policy = $1::text::jsonb WHERE tenant_id = 'acme'",
        tightened.document(),
    )
    failed = await complete(
        ledger,
        ref(job, T0),
        first.grant.attempt,
        ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE,
        error="503",
        error_class=run_pb2.ERROR_CLASS_RETRYABLE,
    )
    assert failed.accepted
    clock.advance(5)  # past the backoff
    [second] = await lease(ledger, [ref(job, T0)])
    assert second.grant.attempt == 2
    assert wire.egress_policy_in(second.grant.egress, "egress") == tightened


@pytest.fixture
def budgeted_ledger(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> Callable[[int], RunLedgerServiceServicer]:
    """Ledgers whose LeaseRuns answers hold at most the given bytes of grants."""

    def build(budget: int) -> RunLedgerServiceServicer:
        config = scheduler_config(migrated_database_url, stack, lease_answer_max_bytes=budget)
        return RunLedgerServiceServicer(
            SchedulerStore(pool), bus.jetstream, config, clock, random.Random(7)
        )

    return build


async def test_an_answer_stops_granting_at_its_byte_budget_and_the_rest_take_no_attempt(
    pool: asyncpg.Pool, budgeted_ledger: Callable[[int], RunLedgerServiceServicer]
) -> None:
    budget = 64 * 1024
    servicer = budgeted_ledger(budget)
    await add_tenant(pool, "other")
    big = await insert_jobs(pool, DAILY, first_due=T0, count=5, payload=b"x" * (40 * 1024))
    [small] = await insert_jobs(pool, DAILY, first_due=T0, tenant_id="other", payload=b"{}")
    for job in [*big, small]:
        await insert_queued_runs(pool, job, [T0], tenant_id="other" if job == small else "acme")
    refs = [ref(job, T0) for job in [*big, small]]
    async with serve(servicer, pool) as stub:
        answer = await stub.LeaseRuns(ledger_pb2.LeaseRunsRequest(executor_id="ex-1", runs=refs))
        kinds = [r.WhichOneof("result") for r in answer.results]
        # One 40 KiB grant fits a 64 KiB budget, a second does not; the small run of
        # the other tenant, later in the request, still fits.
        assert kinds == ["grant", "rejection", "rejection", "rejection", "rejection", "grant"]
        assert answer.ByteSize() <= budget
        full = [r.rejection for r in answer.results if r.WhichOneof("result") == "rejection"]
        assert {r.reason for r in full} == {ledger_pb2.REJECT_REASON_ANSWER_FULL}
        # Nothing was written for the runs left out: no attempt, still QUEUED.
        rows = await pool.fetch(
            "SELECT status, attempt FROM job_runs WHERE job_id = ANY($1::uuid[])", big[1:]
        )
        assert [(r["status"], r["attempt"]) for r in rows] == [("queued", 0)] * 4
        # Leased again, each call grants what fits, at attempt 1.
        granted = {0, 5}
        for _ in range(4):
            left = [i for i in range(5) if i not in granted]
            again = await stub.LeaseRuns(
                ledger_pb2.LeaseRunsRequest(executor_id="ex-1", runs=[refs[i] for i in left])
            )
            assert again.ByteSize() <= budget
            for i, result in zip(left, again.results, strict=True):
                if result.WhichOneof("result") == "grant":
                    assert result.grant.attempt == 1
                    granted.add(i)
        assert granted == set(range(6))


async def test_one_grant_larger_than_the_budget_is_still_granted(
    pool: asyncpg.Pool, budgeted_ledger: Callable[[int], RunLedgerServiceServicer]
) -> None:
    servicer = budgeted_ledger(64 * 1024)
    [job] = await insert_jobs(pool, DAILY, first_due=T0, payload=b"x" * (100 * 1024))
    await insert_queued_runs(pool, job, [T0])
    async with serve(servicer, pool) as stub:
        [result] = await lease(stub, [ref(job, T0)])
    assert result.grant.attempt == 1 and len(result.grant.payload) == 100 * 1024


async def test_a_lease_brings_the_next_admission_pass_at_once(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    """A lease frees room in its tenant's window: the sweeper admits the next waiting
    run when the ledger leased, not an admission interval (here a minute) later."""
    config = scheduler_config(
        migrated_database_url, stack, sweep_interval_s=60.0, admit_interval_s=60.0, tenant_window=1
    )
    store = SchedulerStore(pool)
    publisher = RunPublisher(bus.jetstream, "test")
    sweeper = Sweeper(store, publisher, lambda: ALL, config, clock)
    dispatcher = Dispatcher(store, publisher, lambda: ALL, config, clock)
    first, second = await insert_jobs(pool, DAILY, first_due=T0, count=2)
    await dispatcher.dispatch_once()  # one run published (the window of one), one waiting

    async def published() -> set[object]:
        rows = await pool.fetch("SELECT job_id FROM job_runs WHERE dispatch_seq > 0")
        return {row["job_id"] for row in rows}

    [admitted] = await published()
    [waiting] = {first, second} - {admitted}
    servicer = RunLedgerServiceServicer(
        store, bus.jetstream, config, clock, leased=sweeper.runs_leased
    )
    sweeping = asyncio.create_task(sweeper.run(lambda: None))
    try:
        # The first pass (a whole sweep) finds the window full: the next is a minute away.
        await assert_eventually(lambda: sweeper._next_whole > 0, what="first sweep")
        assert waiting not in await published()
        async with serve(servicer, pool) as stub:
            [grant] = await lease(stub, [ref(admitted, T0)])
        assert grant.WhichOneof("result") == "grant"

        async def admitted_too() -> None:
            assert waiting in await published()

        await assert_eventually(admitted_too, what="the waiting run admitted")
    finally:
        await sweeper.stop()
        await sweeping
