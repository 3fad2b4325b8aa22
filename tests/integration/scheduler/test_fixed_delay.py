"""Fixed-delay intervals (docs/design.md section 4, "Fixed delay"): the dispatcher parks
the job at a re-check while its run is unfinished, the transaction that ends the run
(the ledger's completion, the sweeper's lease expiry) re-arms it at the end plus the
delay, and the dispatcher's re-check derives the same instant when nothing re-armed it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg
import pytest

from sundial.core.clock import ManualClock
from sundial.internal.v1 import ledger_pb2, ledger_pb2_grpc
from sundial.job import JobPolicies, OverlapPolicy
from sundial.schedule import IntervalSpec, Schedule
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.sweeper import Sweeper
from tests.helpers.eventually import assert_eventually
from tests.integration.scheduler.support import insert_jobs, runs_of
from tests.integration.scheduler.test_dispatch import dispatcher
from tests.integration.scheduler.test_failure_policy import sweeper
from tests.integration.scheduler.test_ledger import (  # the ledger on a real server
    T0,
    clock,
    complete,
    lease,
    ledger,
    ref,
)

pytestmark = pytest.mark.timeout(120)
__all__ = ["clock", "dispatcher", "ledger", "sweeper"]  # fixtures, imported

DELAY = timedelta(minutes=1)
FIXED = Schedule(IntervalSpec(DELAY, from_end=True))
SUCCEEDED = ledger_pb2.OUTCOME_STATUS_SUCCEEDED


def move_to(clock: ManualClock, instant: datetime) -> None:
    clock.advance((instant - clock.now()).total_seconds())


@contextlib.asynccontextmanager
async def completing_while(
    pool: asyncpg.Pool,
    locking: str,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    job: uuid.UUID,
    attempt: int,
) -> AsyncIterator[asyncio.Task[ledger_pb2.CompletionResult]]:
    """Within: another transaction holds the row ``locking`` locks (``$1``: the job)
    and the success of the job's run at T0 is reported, its transaction waiting on the
    job's stats row (written after the re-arm). The holder commits on the way out."""
    async with pool.acquire() as holder, holder.transaction():
        await holder.execute(locking, job)
        completing = asyncio.create_task(complete(ledger, ref(job, T0), attempt, SUCCEEDED))

        async def waiting_on_stats() -> None:
            waits = await pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database() AND strpos(query, 'INSERT INTO job_stats') > 0"
            )
            assert waits == 1

        await assert_eventually(waiting_on_stats, timeout_s=10)
        yield completing


async def next_run_at(pool: asyncpg.Pool, job: uuid.UUID) -> datetime | None:
    return await pool.fetchval("SELECT next_run_at FROM jobs WHERE job_id = $1", job)


async def run_once(
    stub: ledger_pb2_grpc.RunLedgerServiceStub, job: uuid.UUID, at: datetime
) -> ledger_pb2.CompletionResult:
    """Lease the run of ``job`` at ``at`` and report it succeeded."""
    [granted] = await lease(stub, [ref(job, at)])
    assert granted.WhichOneof("result") == "grant", granted
    return await complete(stub, ref(job, at), granted.grant.attempt, SUCCEEDED)


async def test_each_run_starts_a_delay_after_the_previous_ended(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    clock: ManualClock,
) -> None:
    [job] = await insert_jobs(pool, FIXED, first_due=T0)
    assert (await dispatcher.dispatch_once()).inserted == 1
    # Parked: the next fire time is a re-check one delay on (a lower bound).
    assert await next_run_at(pool, job) == T0 + DELAY
    clock.advance(5)
    assert (await run_once(ledger, job, T0)).accepted
    # The completion re-armed it: its end plus the delay.
    assert await next_run_at(pool, job) == T0 + timedelta(seconds=5) + DELAY
    clock.advance(DELAY.total_seconds() - 1)
    assert (await dispatcher.dispatch_once()).claimed == 0
    clock.advance(1)
    assert (await dispatcher.dispatch_once()).inserted == 1
    runs = await runs_of(pool, job)
    assert [r["scheduled_at"] for r in runs] == [T0, T0 + timedelta(seconds=5) + DELAY]
    assert runs[0]["finished_at"] == T0 + timedelta(seconds=5)
    assert runs[1]["lateness_ms"] == 0


async def test_completion_and_rearm_commit_together(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    clock: ManualClock,
) -> None:
    """While the completion's transaction waits (on the job's stats row, which it writes
    after the re-arm), neither the outcome nor the re-arm is visible; both are after it
    commits."""
    [job] = await insert_jobs(pool, FIXED, first_due=T0)
    await dispatcher.dispatch_once()
    [granted] = await lease(ledger, [ref(job, T0)])
    await pool.execute("INSERT INTO job_stats (job_id, updated_at) VALUES ($1, $2)", job, T0)
    clock.advance(5)
    locking = "SELECT 1 FROM job_stats WHERE job_id = $1 FOR UPDATE"
    async with completing_while(pool, locking, ledger, job, granted.grant.attempt) as completing:
        assert (await runs_of(pool, job))[0]["status"] == "running"
        assert await next_run_at(pool, job) == T0 + DELAY
    assert (await completing).accepted
    assert (await runs_of(pool, job))[0]["status"] == "succeeded"
    assert await next_run_at(pool, job) == T0 + timedelta(seconds=5) + DELAY


async def test_a_locked_job_is_rearmed_by_the_dispatchers_recheck(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    clock: ManualClock,
) -> None:
    """A jobs row another transaction holds (an API write) is skipped by the re-arm: the
    completion commits without it, and the dispatcher's re-check finds the run's end."""
    [job] = await insert_jobs(pool, FIXED, first_due=T0)
    await dispatcher.dispatch_once()
    [granted] = await lease(ledger, [ref(job, T0)])
    clock.advance(5)
    # Past the re-arm, the stats row's foreign key waits for the holder (as it always
    # did for a job an API call holds).
    locking = "SELECT 1 FROM jobs WHERE job_id = $1 FOR UPDATE"
    async with completing_while(pool, locking, ledger, job, granted.grant.attempt) as completing:
        pass
    assert (await completing).accepted
    assert await next_run_at(pool, job) == T0 + DELAY  # not re-armed
    move_to(clock, T0 + DELAY)
    outcome = await dispatcher.dispatch_once()
    assert (outcome.claimed, outcome.inserted) == (1, 0)
    assert await next_run_at(pool, job) == T0 + timedelta(seconds=5) + DELAY
    clock.advance(5)
    assert (await dispatcher.dispatch_once()).inserted == 1
    assert [r["scheduled_at"] for r in await runs_of(pool, job)] == [
        T0,
        T0 + timedelta(seconds=5) + DELAY,
    ]


async def test_a_run_longer_than_the_delay_is_waited_for(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    clock: ManualClock,
) -> None:
    [job] = await insert_jobs(pool, FIXED, first_due=T0)
    await dispatcher.dispatch_once()
    [granted] = await lease(ledger, [ref(job, T0)])
    # Still running at the re-check: no run, another re-check a delay later.
    move_to(clock, T0 + DELAY)
    outcome = await dispatcher.dispatch_once()
    assert (outcome.claimed, outcome.inserted) == (1, 0)
    assert await next_run_at(pool, job) == T0 + 2 * DELAY
    move_to(clock, T0 + timedelta(seconds=90))
    answer = await complete(ledger, ref(job, T0), granted.grant.attempt, SUCCEEDED)
    assert answer.accepted
    assert await next_run_at(pool, job) == T0 + timedelta(seconds=90) + DELAY
    move_to(clock, T0 + timedelta(seconds=90) + DELAY)
    assert (await dispatcher.dispatch_once()).inserted == 1
    assert len(await runs_of(pool, job)) == 2


async def test_a_lost_executor_still_rearms_the_job_through_the_sweeper(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    sweeper: Sweeper,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    clock: ManualClock,
) -> None:
    """An executor that leased the run and died: the lease expires, the sweeper ends the
    run dead (one attempt allowed) and re-arms the job in that transaction."""
    policies = JobPolicies(retry_max_attempts=1)
    [job] = await insert_jobs(pool, FIXED, first_due=T0, policies=policies)
    await dispatcher.dispatch_once()
    [granted] = await lease(ledger, [ref(job, T0)])
    lease_until = await pool.fetchval("SELECT lease_until FROM job_runs WHERE job_id = $1", job)
    move_to(clock, lease_until + timedelta(seconds=1))
    await sweeper.sweep_once()
    [run] = await runs_of(pool, job)
    assert run["status"] == "dead"
    assert await next_run_at(pool, job) == run["finished_at"] + DELAY
    assert granted.grant.attempt == 1


async def test_manual_runs_do_not_move_the_anchor(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    clock: ManualClock,
) -> None:
    """A manual run unfinished at the occurrence meets the overlap policy (SKIP: a skipped
    row, the delay counting from the skip); its own end moves nothing."""
    policies = JobPolicies(overlap=OverlapPolicy.SKIP)
    [job] = await insert_jobs(pool, FIXED, first_due=T0, policies=policies)
    manual = T0 - timedelta(seconds=1)
    await pool.execute(
        "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind, status,"
        " check_at) SELECT job_id, $2, tenant_id, partition_id, 'manual', 'queued', $2"
        " FROM jobs WHERE job_id = $1",
        job,
        manual,
    )
    await dispatcher.dispatch_once()
    skipped = [r for r in await runs_of(pool, job) if r["kind"] == "scheduled"]
    assert [(r["scheduled_at"], r["status"]) for r in skipped] == [(T0, "skipped")]
    assert await next_run_at(pool, job) == T0 + DELAY
    clock.advance(10)
    assert (await run_once(ledger, job, manual)).accepted
    assert await next_run_at(pool, job) == T0 + DELAY  # the manual run's end moved nothing
    move_to(clock, T0 + DELAY)
    assert (await dispatcher.dispatch_once()).inserted == 1


async def test_a_late_occurrence_fires_once_at_once(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    """The scheduler was down for an hour past the due time: one run, now, late."""
    [job] = await insert_jobs(pool, FIXED, first_due=T0)
    clock.advance(3600)
    assert (await dispatcher.dispatch_once()).inserted == 1
    [run] = await runs_of(pool, job)
    assert run["scheduled_at"] == T0 and run["lateness_ms"] == 3_600_000
    assert await next_run_at(pool, job) == T0 + timedelta(hours=1) + DELAY


async def test_max_runs_ends_the_schedule(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    clock: ManualClock,
) -> None:
    [job] = await insert_jobs(
        pool, Schedule(IntervalSpec(DELAY, from_end=True), max_runs=1), first_due=T0
    )
    await dispatcher.dispatch_once()
    assert await next_run_at(pool, job) is None
    clock.advance(5)
    assert (await run_once(ledger, job, T0)).accepted
    assert await next_run_at(pool, job) is None  # an ended schedule stays ended
