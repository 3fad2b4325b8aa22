"""The RunLedger contract, run on the real ledger and on its test double alike.

Every test runs twice: on the real :class:`RunLedgerServiceServicer` over PostgreSQL (behind
``build_server``, its rows written as the API and a dispatch would), and on
``tests/helpers/ledger_double.py`` (``implicit_runs=False``, so a run exists only once
seeded, as a row does). Both decide with :mod:`sundial.run`; these tests pin that they
answer the wire the same way (STYLE.md habit 16), so executor tests run on the double
test against the real contract. A small adapter per implementation seeds runs and reads
a run's status; the test bodies only talk gRPC.

Real time: both ledgers read the system clock, so leases are asked for explicitly
(``lease_ttl``) and waits poll (:func:`assert_eventually`), never sleep.

Credentials: both sit behind the real ``LedgerAuthInterceptor``; the real one looks
tokens up in ``api_tokens``, the double in its own table. Every call here presents the
adapter's executor token unless a test says otherwise, and reports outcomes under the
lease id its grant carried (as an executor does).
"""

from __future__ import annotations

import asyncio
import random
import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import asyncpg
import grpc
import pytest

from sundial.core import wire
from sundial.core.auth import Role, Tokens, token_hash
from sundial.core.clock import SystemClock
from sundial.core.config import ServerConfig
from sundial.core.grpc import build_server
from sundial.devstack import Stack
from sundial.internal.v1 import ledger_pb2, ledger_pb2_grpc
from sundial.job import JobPolicies, target_to_json
from sundial.run import GrpcTarget, HttpTarget, RetryPolicy, RunStatus, Target
from sundial.schedule import CronSpec, Schedule
from sundial.scheduler.ledger import LedgerAuthInterceptor, RunLedgerServiceServicer
from sundial.scheduler.store import SchedulerStore
from sundial.v1 import run_pb2
from tests.helpers.eventually import assert_eventually
from tests.helpers.ledger_double import LedgerDouble, ref
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import (
    add_tenant,
    insert_jobs,
    insert_queued_runs,
    issue_token,
)

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
STREAM_REFUSED_WITHIN_S = 10.0
"""A refused Heartbeat stream ends by then (an admitted one waits for its first beat)."""

Stub = ledger_pb2_grpc.RunLedgerServiceStub


class Ledger(Protocol):
    """One RunLedger implementation, as the contract tests see it."""

    stub: Stub
    channel: grpc.aio.Channel
    """The stub's channel (for raw bytes)."""
    token: str
    """A valid executor token."""
    leases: dict[tuple[str, int], str]
    """Lease id of each grant seen, by (run key, attempt): what its holder reports."""

    async def issue_token(self, role: Role) -> str:
        """A new valid token of ``role``."""
        ...

    async def revoke(self, token: str) -> None:
        """Revoke ``token`` (as RevokeApiToken does)."""
        ...

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

    def __init__(self, pool: asyncpg.Pool, channel: grpc.aio.Channel, token: str) -> None:
        self.stub = Stub(channel)
        self.channel = channel
        self.token = token
        self.leases: dict[tuple[str, int], str] = {}
        self._pool = pool
        self._tenants: set[str] = set()

    async def issue_token(self, role: Role) -> str:
        return await issue_token(self._pool, role)

    async def revoke(self, token: str) -> None:
        await self._pool.execute(
            "UPDATE api_tokens SET revoked_at = now() WHERE token_hash = $1", token_hash(token)
        )

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

    def __init__(self, double: LedgerDouble, channel: grpc.aio.Channel) -> None:
        self.stub = Stub(channel)
        self.channel = channel
        self.token = double.token
        self.leases: dict[tuple[str, int], str] = {}
        self._double = double

    async def issue_token(self, role: Role) -> str:
        token = f"double-{role.value}-{secrets.token_hex(8)}"
        self._double.tokens[token] = role
        return token

    async def revoke(self, token: str) -> None:
        del self._double.tokens[token]

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
    servicer = RunLedgerServiceServicer(SchedulerStore(pool), None, config, rng=random.Random(7))
    server = build_server(
        ServerConfig(listen="127.0.0.1:0"),
        services=[(ledger_pb2_grpc.add_RunLedgerServiceServicer_to_server, servicer)],
        service_names=["sundial.internal.v1.RunLedgerService"],
        interceptors=[LedgerAuthInterceptor(Tokens(pool, SystemClock()))],
    )
    await server.start()
    token = await issue_token(pool, Role.EXECUTOR)
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            yield RealLedger(pool, channel, token)
    finally:
        await server.stop(0)


@pytest.fixture
async def double_ledger() -> AsyncIterator[Ledger]:
    async with LedgerDouble(implicit_runs=False) as double:
        double.capacity_retry_s = CAPACITY_RETRY.total_seconds()
        async with grpc.aio.insecure_channel(double.address) as channel:
            yield DoubleLedger(double, channel)


@pytest.fixture(params=["real_ledger", "double_ledger"], ids=["real", "double"])
def ledger(request: pytest.FixtureRequest) -> Ledger:
    """Each contract test on each implementation."""
    implementation: Ledger = request.getfixturevalue(request.param)
    return implementation


# --- calls ----------------------------------------------------------------------------


def auth(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata presenting ``token``."""
    return (("authorization", f"Bearer {token}"),)


def key(run: run_pb2.RunRef) -> str:
    """The run as sent (no parsing: malformed refs are sent too)."""
    return f"{run.job_id}@{run.scheduled_at.seconds}.{run.scheduled_at.nanos}"


async def lease(
    ledger: Ledger, runs: list[run_pb2.RunRef], executor: str = "ex-1", ttl: timedelta = LEASE
) -> list[ledger_pb2.LeaseResult]:
    answer = await ledger.stub.LeaseRuns(
        ledger_pb2.LeaseRunsRequest(executor_id=executor, runs=runs, lease_ttl=wire.duration(ttl)),
        metadata=auth(ledger.token),
    )
    for run, result in zip(runs, answer.results, strict=True):
        if result.WhichOneof("result") == "grant":
            ledger.leases[key(run), result.grant.attempt] = result.grant.lease_id
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
    *,
    executor: str = "ex-1",
    lease_id: str | None = None,
    **fields: Any,
) -> ledger_pb2.CompletionResult:
    """Report an outcome; under the lease id of the grant of that attempt by default."""
    if lease_id is None:
        lease_id = ledger.leases.get((key(run), attempt), "")
    outcome = ledger_pb2.Outcome(
        run=run, attempt=attempt, status=status, lease_id=lease_id, **fields
    )
    answer = await ledger.stub.CompleteRuns(
        ledger_pb2.CompleteRunsRequest(executor_id=executor, outcomes=[outcome]),
        metadata=auth(ledger.token),
    )
    [result] = answer.results
    return result


async def beat(
    ledger: Ledger, executor: str, held: list[ledger_pb2.HeldRun], ttl: timedelta = LEASE
) -> ledger_pb2.HeartbeatResponse:
    """One beat on a stream of its own, and its answer."""
    call = ledger.stub.Heartbeat(metadata=auth(ledger.token))
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


async def test_one_call_answers_mixed_outcomes_each_in_its_place(ledger: Ledger) -> None:
    """Successes, a failure, a success under another lease and a run named twice in one
    CompleteRuns call: each answered in the request's order, each run written once."""
    runs = [await ledger.queued_run(retry=FAST_RETRY) for _ in range(4)]
    grants = [result.grant for result in await lease(ledger, runs)]
    assert all(g.attempt == 1 for g in grants)

    def outcome(i: int, status: ledger_pb2.OutcomeStatus, lease_id: str) -> ledger_pb2.Outcome:
        return ledger_pb2.Outcome(run=runs[i], attempt=1, status=status, lease_id=lease_id)

    ok, failed = ledger_pb2.OUTCOME_STATUS_SUCCEEDED, ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE
    outcomes = [
        outcome(2, ok, grants[2].lease_id),
        outcome(1, failed, grants[1].lease_id),
        outcome(3, ok, str(uuid.uuid4())),  # not the lease it holds
        outcome(0, ok, grants[0].lease_id),
        outcome(2, ok, grants[2].lease_id),  # named twice: the first counts
    ]
    answer = await ledger.stub.CompleteRuns(
        ledger_pb2.CompleteRunsRequest(executor_id="ex-1", outcomes=outcomes),
        metadata=auth(ledger.token),
    )
    seen = [(r.accepted, r.next_status, r.fence_reason, r.run.job_id) for r in answer.results]
    succeeded, retrying = run_pb2.RUN_STATUS_SUCCEEDED, run_pb2.RUN_STATUS_RETRYING
    assert seen == [
        (True, succeeded, ledger_pb2.FENCE_REASON_UNSPECIFIED, runs[2].job_id),
        (True, retrying, ledger_pb2.FENCE_REASON_UNSPECIFIED, runs[1].job_id),
        (False, run_pb2.RUN_STATUS_RUNNING, ledger_pb2.FENCE_REASON_NOT_HOLDER, runs[3].job_id),
        (True, succeeded, ledger_pb2.FENCE_REASON_UNSPECIFIED, runs[0].job_id),
        (False, succeeded, ledger_pb2.FENCE_REASON_NOT_RUNNING, runs[2].job_id),
    ]
    statuses = [await ledger.status(run) for run in runs]
    assert statuses == [
        RunStatus.SUCCEEDED,
        RunStatus.RETRYING,
        RunStatus.SUCCEEDED,
        RunStatus.RUNNING,
    ]
    # The run under the other lease is still its holder's to complete.
    assert (await complete(ledger, runs[3], 1)).accepted


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
    held = ledger_pb2.HeldRun(run=run, attempt=grant.attempt, lease_id=grant.lease_id)
    wrong_attempt = ledger_pb2.HeldRun(run=run, attempt=grant.attempt + 1, lease_id=grant.lease_id)
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


# --- credentials ----------------------------------------------------------------------


async def call_each_method(ledger: Ledger, metadata: Any, run: run_pb2.RunRef) -> list[Any]:
    """Every RunLedger method once with ``metadata``: the AioRpcError of each (or None)."""
    errors: list[Any] = []
    attempts = [
        lambda: ledger.stub.LeaseRuns(
            ledger_pb2.LeaseRunsRequest(executor_id="thief/0", runs=[run]), metadata=metadata
        ),
        lambda: ledger.stub.CompleteRuns(
            ledger_pb2.CompleteRunsRequest(
                executor_id="thief/0",
                outcomes=[
                    ledger_pb2.Outcome(
                        run=run, attempt=1, status=ledger_pb2.OUTCOME_STATUS_FAILED_FINAL
                    )
                ],
            ),
            metadata=metadata,
        ),
    ]
    for attempt in attempts:
        try:
            await attempt()
            errors.append(None)
        except grpc.aio.AioRpcError as exc:
            errors.append(exc)
    # The Heartbeat stream is refused as it opens, before any beat is read, so the test
    # reads its status without writing: a beat written while the refusal arrives can
    # fail in grpc.aio's client, which then reports INTERNAL in place of the server's
    # status (grpc/grpc#36066). A stream that was let in stays open: no answer in time.
    stream = ledger.stub.Heartbeat(metadata=metadata)
    try:
        await asyncio.wait_for(stream.read(), STREAM_REFUSED_WITHIN_S)
        errors.append(None)
    except grpc.aio.AioRpcError as exc:
        errors.append(exc)
    except TimeoutError:
        errors.append(None)
    finally:
        stream.cancel()
    return errors


@pytest.mark.parametrize(
    "metadata",
    [
        (),
        (("authorization", "Bearer not-a-token"),),
        (("authorization", "Basic dXNlcjpwYXNz"),),
        (("authorization", "Bearer " + "x" * 600),),
    ],
    ids=["none", "unknown", "not bearer", "oversized"],
)
async def test_every_method_is_unauthenticated_without_an_executor_credential(
    ledger: Ledger, metadata: Any
) -> None:
    run = await ledger.queued_run()
    granted_run = await ledger.queued_run()
    holder = await granted(ledger, granted_run)
    nobody = ref(uuid.uuid4(), T0)
    answers = {}
    for name, target in (("queued", run), ("granted", granted_run), ("unknown", nobody)):
        errors = await call_each_method(ledger, metadata, target)
        assert all(e is not None for e in errors), (name, errors)
        assert {e.code() for e in errors} == {grpc.StatusCode.UNAUTHENTICATED}, (name, errors)
        answers[name] = [e.details() for e in errors]
    # The same answer whatever the run: no existence oracle, nothing read before the check.
    assert answers["queued"] == answers["granted"] == answers["unknown"]
    assert await ledger.status(run) is RunStatus.QUEUED
    assert await ledger.status(granted_run) is RunStatus.RUNNING
    assert (await complete(ledger, granted_run, holder.attempt)).accepted


@pytest.mark.parametrize("role", [Role.TENANT, Role.ADMIN], ids=["tenant", "admin"])
async def test_tenant_and_admin_tokens_are_permission_denied(ledger: Ledger, role: Role) -> None:
    run = await ledger.queued_run()
    token = await ledger.issue_token(role)
    errors = await call_each_method(ledger, auth(token), run)
    assert [e.code() if e else None for e in errors] == [grpc.StatusCode.PERMISSION_DENIED] * 3
    assert "executor token" in errors[0].details()
    assert await ledger.status(run) is RunStatus.QUEUED


async def test_a_revoked_executor_token_is_refused_at_once_also_on_an_open_stream(
    ledger: Ledger,
) -> None:
    token = await ledger.issue_token(Role.EXECUTOR)
    run = await ledger.queued_run()
    stream = ledger.stub.Heartbeat(metadata=auth(token))
    await stream.write(ledger_pb2.HeartbeatRequest(executor_id="ex-9", runs=[]))
    assert isinstance(await stream.read(), ledger_pb2.HeartbeatResponse)
    await ledger.revoke(token)
    errors = await call_each_method(ledger, auth(token), run)
    assert [e.code() if e else None for e in errors] == [grpc.StatusCode.UNAUTHENTICATED] * 3
    # The stream opened before the revocation ends at its next beat.
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await stream.write(ledger_pb2.HeartbeatRequest(executor_id="ex-9", runs=[]))
        await stream.read()
    assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert await ledger.status(run) is RunStatus.QUEUED


# --- fencing on the holder ------------------------------------------------------------


async def test_a_grant_carries_a_fresh_lease_id_kept_on_a_regrant(ledger: Ledger) -> None:
    run = await ledger.queued_run(retry=FAST_RETRY)
    first = await granted(ledger, run)
    assert uuid.UUID(first.lease_id)
    assert (await granted(ledger, run)).lease_id == first.lease_id
    await complete(ledger, run, 1, ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE)

    async def retried() -> ledger_pb2.Grant:
        return await granted(ledger, run)

    second: ledger_pb2.Grant = await assert_eventually(retried, what="the retry is due")
    assert second.attempt == 2 and second.lease_id != first.lease_id


@pytest.mark.parametrize(
    ("executor", "lease_id"),
    [("stranger/0", ""), ("stranger/0", None), ("ex-1", ""), ("ex-1", str(uuid.uuid4()))],
    ids=["stranger", "stranger with the lease id", "holder id without lease", "wrong lease"],
)
@pytest.mark.parametrize(
    "status",
    [
        ledger_pb2.OUTCOME_STATUS_FAILED_FINAL,
        ledger_pb2.OUTCOME_STATUS_SUCCEEDED,
        ledger_pb2.OUTCOME_STATUS_CANCELLED,
    ],
    ids=["kill", "close", "cancel"],
)
async def test_only_the_holder_can_complete_its_lease(
    ledger: Ledger, executor: str, lease_id: str | None, status: int
) -> None:
    run = await ledger.queued_run()
    grant = await granted(ledger, run, "ex-1")
    forged = await complete(
        ledger, run, grant.attempt, status, executor=executor, lease_id=lease_id
    )
    assert not forged.accepted
    assert forged.fence_reason == ledger_pb2.FENCE_REASON_NOT_HOLDER
    assert forged.next_status == run_pb2.RUN_STATUS_RUNNING
    assert await ledger.status(run) is RunStatus.RUNNING
    # The holder's own report still counts.
    done = await complete(ledger, run, grant.attempt)
    assert done.accepted and done.next_status == run_pb2.RUN_STATUS_SUCCEEDED


async def test_only_the_holder_can_heartbeat_its_lease(ledger: Ledger) -> None:
    run = await ledger.queued_run()
    grant = await granted(
        ledger,
        run,
        "ex-1",
    )
    until = wire.timestamp_in(grant.lease_until, "lease_until")
    guessed = ledger_pb2.HeldRun(run=run, attempt=grant.attempt, lease_id=str(uuid.uuid4()))
    blank = ledger_pb2.HeldRun(run=run, attempt=grant.attempt)
    for executor, held in (("ex-1", guessed), ("ex-1", blank), ("stranger/0", blank)):
        answer = await beat(ledger, executor, [held], ttl=5 * LEASE)
        assert list(answer.lost) == [held] and not answer.extended, executor
    # Nothing was extended: the holder's next beat starts from its own lease.
    real = ledger_pb2.HeldRun(run=run, attempt=grant.attempt, lease_id=grant.lease_id)
    answer = await beat(ledger, "ex-1", [real], ttl=LEASE)
    [extension] = answer.extended
    assert wire.timestamp_in(extension.lease_until, "lease_until") < until + 2 * LEASE


async def test_the_holders_executor_id_under_another_token_gets_no_regrant(
    ledger: Ledger,
) -> None:
    # executor_id is chosen by the caller; claiming the holder's must not hand out its
    # lease (and lease id): the re-grant also requires the credential of the grant.
    run = await ledger.queued_run()
    grant = await granted(ledger, run, "ex-1")
    other = await ledger.issue_token(Role.EXECUTOR)
    answer = await ledger.stub.LeaseRuns(
        ledger_pb2.LeaseRunsRequest(executor_id="ex-1", runs=[run]), metadata=auth(other)
    )
    [result] = answer.results
    assert rejection(result) == ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE
    assert grant.lease_id not in str(answer)
    # The holder's own retry is still granted again, lease id and all.
    assert (await granted(ledger, run, "ex-1")).lease_id == grant.lease_id


async def test_an_undecodable_heartbeat_is_an_invalid_argument(ledger: Ledger) -> None:
    good = ledger_pb2.HeartbeatRequest(executor_id="ZZZZ").SerializeToString()
    bad = good.replace(b"ZZZZ", b"\xff\xfe\xfd\xfc")  # not UTF-8 in a string field
    call = ledger.channel.stream_stream("/sundial.internal.v1.RunLedgerService/Heartbeat")(
        metadata=auth(ledger.token)
    )
    await call.write(bad)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call.read()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid message" in (refused.value.details() or "")
