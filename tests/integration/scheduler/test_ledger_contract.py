"""The RunLedger contract, run on the real ledger and on its test double alike.

Every test runs twice: on the real :class:`RunLedgerServicer` over PostgreSQL (behind
``build_server``, its rows written as the API and a dispatch would), and on
``tests/helpers/ledger_double.py`` (``implicit_runs=False``, so a run exists only once
seeded, as a row does). Both decide with :mod:`sundial.run`; these tests pin that they
answer the wire the same way (STYLE.md habit 16), so executor tests run on the double
test against the real contract. A small adapter per implementation seeds runs and reads
a run's status; the test bodies only talk gRPC.

Real time: both ledgers read the system clock, so leases are asked for explicitly
(``lease_ttl``) and waits poll (:func:`assert_eventually`), never sleep.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import asyncpg
import grpc
import pytest

from sundial.core import wire
from sundial.core.config import ServerConfig
from sundial.core.grpc import build_server
from sundial.devstack import Stack
from sundial.run import (
    GrpcTarget,
    HttpTarget,
    JobPolicies,
    RetryPolicy,
    RunStatus,
    Target,
    target_to_json,
)
from sundial.schedule import CronSpec, Schedule
from sundial.scheduler.ledger import RunLedgerServicer
from sundial.scheduler.store import SchedulerStore
from sundial.v1 import ledger_pb2, ledger_pb2_grpc, run_pb2
from tests.helpers.eventually import assert_eventually
from tests.helpers.ledger_double import LedgerDouble, ref
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import add_tenant, insert_jobs, insert_queued_runs

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
"""scheduled_at of the seeded runs (leases run on the real clock, not on this)."""
LEASE = timedelta(seconds=30)
CAPACITY_RETRY = timedelta(seconds=5)
TENANT = "contract"
HTTP = HttpTarget("https://example.com/contract", "PUT", {"x-contract": "1"})
FAST_RETRY = RetryPolicy(
    max_attempts=3, base_delay=timedelta(seconds=1), max_delay=timedelta(seconds=1)
)
"""Backoff of at most 1 s: a retry comes due while a test polls."""

Stub = ledger_pb2_grpc.RunLedgerStub


class Ledger(Protocol):
    """One RunLedger implementation, as the contract tests see it."""

    stub: Stub

    async def queued_run(
        self,
        target: Target = HTTP,
        *,
        tenant: str = TENANT,
        cap: int = 100,
        retry: RetryPolicy | None = None,
    ) -> run_pb2.RunRef:
        """A QUEUED run at T0 of a new job calling ``target``, for ``tenant`` (whose cap
        on RUNNING runs is ``cap`` when the tenant is first seen)."""
        ...

    async def status(self, run: run_pb2.RunRef) -> RunStatus:
        """The run's status as the implementation stores it."""
        ...

    async def request_cancel(self, run: run_pb2.RunRef) -> None:
        """What CancelRun does to the run: flag it."""
        ...


class RealLedger:
    """The real ledger: rows in PostgreSQL, written as the API and a dispatch do."""

    def __init__(self, pool: asyncpg.Pool, stub: Stub) -> None:
        self.stub = stub
        self._pool = pool
        self._tenants: set[str] = set()

    async def queued_run(
        self,
        target: Target = HTTP,
        *,
        tenant: str = TENANT,
        cap: int = 100,
        retry: RetryPolicy | None = None,
    ) -> run_pb2.RunRef:
        if tenant not in self._tenants:
            await add_tenant(self._pool, tenant, cap=cap)
            self._tenants.add(tenant)
        retry = retry or RetryPolicy()
        policies = JobPolicies(
            retry_max_attempts=retry.max_attempts,
            retry_base_delay=retry.base_delay,
            retry_max_delay=retry.max_delay,
        )
        daily = Schedule(CronSpec("0 0 * * *"))
        [job] = await insert_jobs(
            self._pool, daily, first_due=T0, policies=policies, tenant_id=tenant
        )
        await self._pool.execute(
            "UPDATE job_definitions SET target = $2::jsonb WHERE job_id = $1",
            job,
            target_to_json(target),
        )
        await insert_queued_runs(self._pool, job, [T0], tenant_id=tenant)
        return ref(job, T0)

    async def status(self, run: run_pb2.RunRef) -> RunStatus:
        parsed = wire.run_ref_in(run, "run")
        text = await self._pool.fetchval(
            "SELECT status FROM job_runs WHERE job_id = $1 AND scheduled_at = $2",
            parsed.job_id,
            parsed.scheduled_at,
        )
        return RunStatus(text)

    async def request_cancel(self, run: run_pb2.RunRef) -> None:
        parsed = wire.run_ref_in(run, "run")
        await self._pool.execute(
            "UPDATE job_runs SET cancel_requested = true WHERE job_id = $1 AND scheduled_at = $2",
            parsed.job_id,
            parsed.scheduled_at,
        )


class DoubleLedger:
    """The test double: runs seeded with ``add_job`` + ``add_run``."""

    def __init__(self, double: LedgerDouble, stub: Stub) -> None:
        self.stub = stub
        self._double = double

    async def queued_run(
        self,
        target: Target = HTTP,
        *,
        tenant: str = TENANT,
        cap: int = 100,
        retry: RetryPolicy | None = None,
    ) -> run_pb2.RunRef:
        job = uuid.uuid4()
        self._double.add_job(job, wire.target(target), tenant=tenant, retry=retry)
        self._double.tenant_cap.setdefault(tenant, cap)
        run = ref(job, T0)
        self._double.add_run(run)
        return run

    async def status(self, run: run_pb2.RunRef) -> RunStatus:
        return RunStatus[self._double.status(run)]

    async def request_cancel(self, run: run_pb2.RunRef) -> None:
        self._double.cancel(run)


@pytest.fixture
async def real_ledger(
    pool: asyncpg.Pool, stack: Stack, migrated_database_url: str
) -> AsyncIterator[Ledger]:
    config = scheduler_config(
        migrated_database_url, stack, capacity_retry_s=CAPACITY_RETRY.total_seconds()
    )
    # No JetStream: dead letters stay in the outbox for a sweeper (none runs here).
    servicer = RunLedgerServicer(SchedulerStore(pool), None, config, rng=random.Random(7))
    server = build_server(
        ServerConfig(listen="127.0.0.1:0"),
        services=[(ledger_pb2_grpc.add_RunLedgerServicer_to_server, servicer)],
        service_names=["sundial.v1.RunLedger"],
    )
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            yield RealLedger(pool, Stub(channel))
    finally:
        await server.stop(0)


@pytest.fixture
async def double_ledger() -> AsyncIterator[Ledger]:
    async with LedgerDouble(implicit_runs=False) as double:
        double.capacity_retry_s = CAPACITY_RETRY.total_seconds()
        async with grpc.aio.insecure_channel(double.address) as channel:
            yield DoubleLedger(double, Stub(channel))


@pytest.fixture(params=["real_ledger", "double_ledger"], ids=["real", "double"])
def ledger(request: pytest.FixtureRequest) -> Ledger:
    """Each contract test on each implementation."""
    implementation: Ledger = request.getfixturevalue(request.param)
    return implementation


# --- calls ----------------------------------------------------------------------------


async def lease(
    ledger: Ledger, runs: list[run_pb2.RunRef], executor: str = "ex-1", ttl: timedelta = LEASE
) -> list[ledger_pb2.LeaseResult]:
    answer = await ledger.stub.LeaseRuns(
        ledger_pb2.LeaseRunsRequest(executor_id=executor, runs=runs, lease_ttl=wire.duration(ttl))
    )
    return list(answer.results)


async def granted(ledger: Ledger, run: run_pb2.RunRef, executor: str = "ex-1") -> ledger_pb2.Grant:
    [result] = await lease(ledger, [run], executor)
    assert result.WhichOneof("result") == "grant", result
    return result.grant


async def complete(
    ledger: Ledger,
    run: run_pb2.RunRef,
    attempt: int,
    status: ledger_pb2.OutcomeStatus = ledger_pb2.OUTCOME_STATUS_SUCCEEDED,
    **fields: Any,
) -> ledger_pb2.CompletionResult:
    outcome = ledger_pb2.Outcome(run=run, attempt=attempt, status=status, **fields)
    answer = await ledger.stub.CompleteRuns(
        ledger_pb2.CompleteRunsRequest(executor_id="ex-1", outcomes=[outcome])
    )
    [result] = answer.results
    return result


async def beat(
    ledger: Ledger, executor: str, held: list[ledger_pb2.HeldRun], ttl: timedelta = LEASE
) -> ledger_pb2.HeartbeatResponse:
    """One beat on a stream of its own, and its answer."""
    call = ledger.stub.Heartbeat()
    await call.write(
        ledger_pb2.HeartbeatRequest(executor_id=executor, runs=held, lease_ttl=wire.duration(ttl))
    )
    response = await call.read()
    await call.done_writing()
    assert isinstance(response, ledger_pb2.HeartbeatResponse), response
    return response


def rejection(result: ledger_pb2.LeaseResult) -> int:
    assert result.WhichOneof("result") == "rejection", result
    return result.rejection.reason


# --- leasing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [HTTP, GrpcTarget("127.0.0.1:9", plaintext=True, metadata={"x-contract": "1"})],
    ids=["http", "grpc"],
)
async def test_a_lease_grants_attempt_1_with_its_lease_and_target(
    ledger: Ledger, target: Target
) -> None:
    run = await ledger.queued_run(target)
    before = datetime.now(UTC)
    grant = await granted(ledger, run)
    after = datetime.now(UTC)
    assert grant.attempt == 1
    lease_until = wire.timestamp_in(grant.lease_until, "lease_until")
    assert before + LEASE - timedelta(seconds=1) <= lease_until <= after + LEASE
    assert wire.target_in(grant.target) == target
    assert grant.run_key == wire.run_ref_in(run, "run").key
    assert grant.tenant_id == TENANT
    assert await ledger.status(run) is RunStatus.RUNNING


async def test_a_second_lease_by_the_holder_is_the_same_attempt_again(ledger: Ledger) -> None:
    # The first answer was lost (deadline, broken connection) after the grant committed.
    run = await ledger.queued_run()
    first = await granted(ledger, run)
    again = await granted(ledger, run)
    assert again.attempt == first.attempt == 1
    assert again.lease_until.ToDatetime(UTC) >= first.lease_until.ToDatetime(UTC)
    assert wire.target_in(again.target) == HTTP
    done = await complete(ledger, run, 1)
    assert done.accepted and done.next_status == run_pb2.RUN_STATUS_SUCCEEDED


async def test_another_executor_is_told_the_run_is_leased_elsewhere(ledger: Ledger) -> None:
    run = await ledger.queued_run()
    await granted(ledger, run, "ex-1")
    [other] = await lease(ledger, [run], "ex-2")
    assert rejection(other) == ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE
    assert await ledger.status(run) is RunStatus.RUNNING


async def test_a_run_named_twice_in_one_call_is_granted_once(ledger: Ledger) -> None:
    run = await ledger.queued_run()
    first, duplicate = await lease(ledger, [run, run])
    assert first.grant.attempt == 1
    assert rejection(duplicate) == ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE


async def test_the_tenant_cap_rejects_with_retry_after(ledger: Ledger) -> None:
    one = await ledger.queued_run(tenant="capped", cap=1)
    two = await ledger.queued_run(tenant="capped", cap=1)
    held, capped = await lease(ledger, [one, two])
    assert held.grant.attempt == 1
    assert rejection(capped) == ledger_pb2.REJECT_REASON_TENANT_AT_CAPACITY
    assert wire.timedelta_in(capped.rejection.retry_after, "retry_after") == CAPACITY_RETRY
    # The holder's re-grant does not count twice; another executor is capped too.
    again, still = await lease(ledger, [one, two])
    assert again.grant.attempt == 1
    assert rejection(still) == ledger_pb2.REJECT_REASON_TENANT_AT_CAPACITY
    [elsewhere] = await lease(ledger, [two], "ex-2")
    assert rejection(elsewhere) == ledger_pb2.REJECT_REASON_TENANT_AT_CAPACITY
    # Once the first ends, the second fits.
    assert (await complete(ledger, one, 1)).accepted
    assert (await granted(ledger, two, "ex-2")).attempt == 1
    assert await ledger.status(two) is RunStatus.RUNNING


async def test_an_unknown_run_is_not_found_on_both_calls(ledger: Ledger) -> None:
    run = await ledger.queued_run()
    nobody = ref(uuid.uuid4(), T0)
    other_occurrence = ref(wire.run_ref_in(run, "run").job_id, T0 + timedelta(hours=1))
    for unknown in (nobody, other_occurrence):
        [leased] = await lease(ledger, [unknown])
        assert rejection(leased) == ledger_pb2.REJECT_REASON_NOT_FOUND
        completed = await complete(ledger, unknown, 1)
        assert not completed.accepted
        assert completed.fence_reason == ledger_pb2.FENCE_REASON_NOT_FOUND
        assert completed.next_status == run_pb2.RUN_STATUS_UNSPECIFIED
    assert await ledger.status(run) is RunStatus.QUEUED


async def test_a_job_id_that_is_no_uuid_is_an_invalid_argument(ledger: Ledger) -> None:
    bad = run_pb2.RunRef(job_id="job-1", scheduled_at=wire.timestamp(T0))
    with pytest.raises(grpc.aio.AioRpcError) as leased:
        await lease(ledger, [bad])
    assert leased.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as completed:
        await complete(ledger, bad, 1)
    assert completed.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# --- completing -----------------------------------------------------------------------


async def test_success_is_accepted_once_then_fenced_not_running(ledger: Ledger) -> None:
    run = await ledger.queued_run()
    grant = await granted(ledger, run)
    done = await complete(ledger, run, grant.attempt)
    assert done.accepted and done.next_status == run_pb2.RUN_STATUS_SUCCEEDED
    assert not done.HasField("next_attempt_at")
    assert await ledger.status(run) is RunStatus.SUCCEEDED
    # A retried CompleteRuns call: the first write counts.
    again = await complete(ledger, run, grant.attempt)
    assert not again.accepted
    assert again.fence_reason == ledger_pb2.FENCE_REASON_NOT_RUNNING
    assert again.next_status == run_pb2.RUN_STATUS_SUCCEEDED
    [finished] = await lease(ledger, [run])
    assert rejection(finished) == ledger_pb2.REJECT_REASON_FINISHED


async def test_a_stale_attempt_is_fenced_and_changes_nothing(ledger: Ledger) -> None:
    run = await ledger.queued_run(retry=FAST_RETRY)
    first = await granted(ledger, run)
    failed = await complete(ledger, run, first.attempt, ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE)
    assert failed.next_status == run_pb2.RUN_STATUS_RETRYING

    async def retried() -> ledger_pb2.Grant:
        return await granted(ledger, run)

    second: ledger_pb2.Grant = await assert_eventually(retried, what="the retry is due")
    assert second.attempt == 2
    stale = await complete(ledger, run, 1)
    assert not stale.accepted
    assert stale.fence_reason == ledger_pb2.FENCE_REASON_STALE_ATTEMPT
    assert stale.next_status == run_pb2.RUN_STATUS_RUNNING
    assert await ledger.status(run) is RunStatus.RUNNING
    assert (await complete(ledger, run, 2)).accepted


async def test_a_retryable_failure_goes_retrying_until_its_next_attempt_is_due(
    ledger: Ledger,
) -> None:
    run = await ledger.queued_run()  # 5 attempts, 10 s base delay
    grant = await granted(ledger, run)
    before = datetime.now(UTC)
    failed = await complete(
        ledger,
        run,
        grant.attempt,
        ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE,
        error="503 from target",
        error_class=run_pb2.ERROR_CLASS_RETRYABLE,
        http_status=503,
    )
    assert failed.accepted and failed.next_status == run_pb2.RUN_STATUS_RETRYING
    due = wire.timestamp_in(failed.next_attempt_at, "next_attempt_at")
    assert before <= due <= datetime.now(UTC) + timedelta(seconds=20)  # random(0, 10 s * 2^1)
    assert await ledger.status(run) is RunStatus.RETRYING
    if due > datetime.now(UTC) + timedelta(seconds=1):
        [early] = await lease(ledger, [run])
        assert rejection(early) == ledger_pb2.REJECT_REASON_NOT_DUE
        assert early.rejection.HasField("retry_after")


async def test_a_retryable_failure_of_the_last_attempt_is_dead(ledger: Ledger) -> None:
    run = await ledger.queued_run(retry=RetryPolicy(max_attempts=1))
    grant = await granted(ledger, run)
    result = await complete(ledger, run, grant.attempt, ledger_pb2.OUTCOME_STATUS_TIMED_OUT)
    assert result.accepted and result.next_status == run_pb2.RUN_STATUS_DEAD
    assert not result.HasField("next_attempt_at")
    assert await ledger.status(run) is RunStatus.DEAD


async def test_a_final_failure_is_dead(ledger: Ledger) -> None:
    run = await ledger.queued_run()
    grant = await granted(ledger, run)
    result = await complete(
        ledger,
        run,
        grant.attempt,
        ledger_pb2.OUTCOME_STATUS_FAILED_FINAL,
        error="404 from target",
        error_class=run_pb2.ERROR_CLASS_FINAL,
    )
    assert result.accepted and result.next_status == run_pb2.RUN_STATUS_DEAD
    assert not result.HasField("next_attempt_at")
    assert await ledger.status(run) is RunStatus.DEAD
    [finished] = await lease(ledger, [run])
    assert rejection(finished) == ledger_pb2.REJECT_REASON_FINISHED


async def test_a_cancel_request_wins_over_a_retry(ledger: Ledger) -> None:
    run = await ledger.queued_run()
    grant = await granted(ledger, run)
    await ledger.request_cancel(run)
    result = await complete(ledger, run, grant.attempt, ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE)
    assert result.accepted and result.next_status == run_pb2.RUN_STATUS_CANCELLED
    assert await ledger.status(run) is RunStatus.CANCELLED
    [again] = await lease(ledger, [run])
    assert rejection(again) == ledger_pb2.REJECT_REASON_CANCELLED


# --- heartbeats -----------------------------------------------------------------------


async def test_a_heartbeat_extends_the_holders_lease_and_reports_other_claims_lost(
    ledger: Ledger,
) -> None:
    run = await ledger.queued_run()
    grant = await granted(ledger, run, "ex-1")
    first_until = wire.timestamp_in(grant.lease_until, "lease_until")
    held = ledger_pb2.HeldRun(run=run, attempt=grant.attempt)
    wrong_attempt = ledger_pb2.HeldRun(run=run, attempt=grant.attempt + 1)
    answer = await beat(ledger, "ex-1", [held, wrong_attempt], ttl=2 * LEASE)
    [extension] = answer.extended
    assert extension.run == run and extension.attempt == grant.attempt
    assert wire.timestamp_in(extension.lease_until, "lease_until") >= first_until + LEASE
    assert list(answer.lost) == [wrong_attempt] and not answer.cancel
    assert answer.HasField("heartbeat_interval")
    # Another executor claiming the same attempt is told it lost the run...
    other = await beat(ledger, "ex-2", [held])
    assert list(other.lost) == [held] and not other.extended
    # ...and the holder still holds it.
    assert await ledger.status(run) is RunStatus.RUNNING
    assert (await complete(ledger, run, grant.attempt)).accepted
    # A run that ended is lost to its former holder too.
    ended = await beat(ledger, "ex-1", [held])
    assert list(ended.lost) == [held] and not ended.extended
