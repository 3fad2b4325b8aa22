"""Overlap policies at dispatch, and the sweeps that republish, reclaim and release."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import nats.errors
import pytest

from sundial.core.bus import Bus
from sundial.core.clock import ManualClock
from sundial.devstack import Stack
from sundial.internal.v1 import events_pb2
from sundial.job import JobPolicies, OverlapPolicy
from sundial.schedule import IntervalSpec, Schedule
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from sundial.scheduler.sweeper import Sweeper
from sundial.v1 import run_pb2
from tests.helpers.eventually import assert_eventually
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import (
    TENANT,
    add_tenant,
    dead_letters,
    insert_jobs,
    read_dispatches,
    runs_of,
)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
EVERY_MINUTE = Schedule(IntervalSpec(timedelta(minutes=1)))
ALL = range(256)


class Parts:
    def __init__(self, dispatcher: Dispatcher, sweeper: Sweeper, clock: ManualClock) -> None:
        self.dispatcher, self.sweeper, self.clock = dispatcher, sweeper, clock

    async def tick(self, seconds: float = 60) -> None:
        """Let ``seconds`` pass, then run a dispatch pass and a sweep pass."""
        self.clock.advance(seconds)
        await self.dispatcher.dispatch_once()
        await self.sweeper.sweep_once()


class NatsDown:
    """A JetStream context whose server is unreachable: every publish fails."""

    def __init__(self) -> None:
        self.attempts = 0

    async def publish(self, *args: object, **kwargs: object) -> None:
        self.attempts += 1
        raise nats.errors.ConnectionClosedError


@pytest.fixture
def parts(pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str) -> Parts:
    clock = ManualClock(T0)
    config = scheduler_config(migrated_database_url, stack)
    store = SchedulerStore(pool)
    publisher = RunPublisher(bus.jetstream, "test")
    return Parts(
        Dispatcher(store, publisher, lambda: ALL, config, clock),
        Sweeper(store, publisher, lambda: ALL, config, clock),
        clock,
    )


async def statuses(pool: asyncpg.Pool, job: object) -> list[tuple[str, str | None]]:
    return [(r["status"], r["skip_reason"]) for r in await runs_of(pool, job)]  # type: ignore[arg-type]


async def finish_all(pool: asyncpg.Pool, job: object) -> None:
    await pool.execute(
        "UPDATE job_runs SET status = 'succeeded', check_at = NULL"
        " WHERE job_id = $1 AND status IN ('queued', 'running')",
        job,
    )


async def test_skip(pool: asyncpg.Pool, parts: Parts) -> None:
    policies = JobPolicies(overlap=OverlapPolicy.SKIP)
    [job] = await insert_jobs(pool, EVERY_MINUTE, first_due=T0, policies=policies)
    await parts.tick(0)
    await parts.tick()
    assert await statuses(pool, job) == [("queued", None), ("skipped", "overlap")]
    assert await pool.fetchval("SELECT skipped_count FROM job_stats WHERE job_id=$1", job) == 1
    await finish_all(pool, job)
    await parts.tick()
    assert (await statuses(pool, job))[-1] == ("queued", None)


async def test_buffer_one(pool: asyncpg.Pool, parts: Parts) -> None:
    policies = JobPolicies(overlap=OverlapPolicy.BUFFER_ONE)
    [job] = await insert_jobs(pool, EVERY_MINUTE, first_due=T0, policies=policies)
    await parts.tick(0)
    await parts.tick()
    await parts.tick()
    assert await statuses(pool, job) == [
        ("queued", None),
        ("pending", None),
        ("skipped", "buffer_full"),
    ]
    # The blocking run ends: the buffered one is released and published.
    await finish_all(pool, job)
    await parts.sweeper.sweep_once()
    runs = await runs_of(pool, job)
    assert runs[1]["status"] == "queued" and runs[1]["dispatch_seq"] > 0
    # Published and acknowledged: its confirm deadline stands, the ack holds the recheck.
    assert runs[1]["check_at"] == parts.clock.now() + timedelta(seconds=10)
    assert await pool.fetchval(
        "SELECT recheck_at FROM dispatch_acks WHERE dispatch_seq = $1", runs[1]["dispatch_seq"]
    ) == parts.clock.now() + timedelta(seconds=120)


async def test_buffer_all(pool: asyncpg.Pool, parts: Parts) -> None:
    policies = JobPolicies(overlap=OverlapPolicy.BUFFER_ALL)
    [job] = await insert_jobs(pool, EVERY_MINUTE, first_due=T0, policies=policies)
    for seconds in (0, 60, 60):
        await parts.tick(seconds)
    assert await statuses(pool, job) == [("queued", None), ("pending", None), ("pending", None)]
    await finish_all(pool, job)
    await parts.sweeper.sweep_once()
    # Oldest first, one at a time.
    assert [s for s, _ in await statuses(pool, job)] == ["succeeded", "queued", "pending"]


async def test_allow_all(pool: asyncpg.Pool, parts: Parts) -> None:
    policies = JobPolicies(overlap=OverlapPolicy.ALLOW_ALL)
    [job] = await insert_jobs(pool, EVERY_MINUTE, first_due=T0, policies=policies)
    for seconds in (0, 60, 60):
        await parts.tick(seconds)
    assert await statuses(pool, job) == [("queued", None)] * 3


async def test_cancel_other(pool: asyncpg.Pool, parts: Parts) -> None:
    policies = JobPolicies(overlap=OverlapPolicy.CANCEL_OTHER)
    [job] = await insert_jobs(pool, EVERY_MINUTE, first_due=T0, policies=policies)
    await parts.tick(0)
    await pool.execute(
        "UPDATE job_runs SET status='running', attempt=1, lease_until=$2, check_at=$2"
        " WHERE job_id=$1",
        job,
        T0 + timedelta(minutes=10),
    )
    await parts.tick()
    runs = await runs_of(pool, job)
    # The running one is asked to stop (through its heartbeat); the new one runs.
    assert runs[0]["status"] == "running" and runs[0]["cancel_requested"]
    assert runs[1]["status"] == "queued"
    await parts.tick()
    runs = await runs_of(pool, job)
    assert runs[1]["status"] == "cancelled" and runs[2]["status"] == "queued"
    assert await pool.fetchval("SELECT cancelled_count FROM job_stats WHERE job_id=$1", job) == 1


async def test_expired_lease_makes_the_run_leasable_and_republishes(
    pool: asyncpg.Pool, parts: Parts
) -> None:
    [job] = await insert_jobs(pool, Schedule(IntervalSpec(timedelta(days=1))), first_due=T0)
    await parts.tick(0)
    await pool.execute(
        "UPDATE job_runs SET status='running', attempt=1, lease_until=$2, check_at=$2,"
        " executor_id='gone' WHERE job_id=$1",
        job,
        T0 + timedelta(seconds=30),
    )
    before = (await runs_of(pool, job))[0]["dispatch_seq"]
    await parts.tick(29)
    assert (await runs_of(pool, job))[0]["status"] == "running"
    await parts.tick(2)
    [run] = await runs_of(pool, job)
    assert run["status"] == "queued" and run["dispatch_seq"] > before
    assert run["error_class"] == "lease_expired" and run["attempt"] == 1
    assert run["lease_until"] is None


async def test_unconfirmed_publish_is_republished(pool: asyncpg.Pool, parts: Parts) -> None:
    [job] = await insert_jobs(pool, Schedule(IntervalSpec(timedelta(days=1))), first_due=T0)
    await parts.tick(0)
    # As if the scheduler died between commit and publish: no ack, check_at due.
    await pool.execute("DELETE FROM dispatch_acks")
    await pool.execute("UPDATE job_runs SET check_at = $2 WHERE job_id = $1", job, T0)
    seq = (await runs_of(pool, job))[0]["dispatch_seq"]
    await parts.sweeper.sweep_once()
    [run] = await runs_of(pool, job)
    # Published again under a new dispatch, and that publish was acknowledged.
    assert run["dispatch_seq"] > seq and run["check_at"] == T0 + timedelta(seconds=10)
    assert await pool.fetchval(
        "SELECT recheck_at FROM dispatch_acks WHERE dispatch_seq = $1", run["dispatch_seq"]
    ) == T0 + timedelta(seconds=120)


async def test_a_republish_names_each_runs_tenant_and_weight(
    pool: asyncpg.Pool, parts: Parts, bus: Bus
) -> None:
    # An executor shares its slots and paces by the tenant a message names; a republish
    # (here a lost publish; likewise a retry or an expired lease) named none, so every
    # tenant's republished runs were one tenant, "", to the executors.
    [job] = await insert_jobs(pool, Schedule(IntervalSpec(timedelta(days=1))), first_due=T0)
    await add_tenant(pool, "other")
    [other] = await insert_jobs(
        pool, Schedule(IntervalSpec(timedelta(days=1))), first_due=T0, tenant_id="other"
    )
    await pool.execute("UPDATE tenants SET fair_weight = 3 WHERE tenant_id = $1", TENANT)
    await parts.tick(0)
    _, after_first = await read_dispatches(bus.jetstream, 1)
    await pool.execute("DELETE FROM dispatch_acks")
    await pool.execute("UPDATE job_runs SET check_at = $1", T0)
    await parts.sweeper.sweep_once()
    republished, _ = await read_dispatches(bus.jetstream, after_first)
    named = {
        uuid.UUID(run.job_id): (body.tenants[i], body.tenant_weights[i])
        for body in republished
        for run, i in zip(body.runs, body.run_tenants, strict=True)
    }
    # The weight in force: the tenant's own, else the operator's default (1).
    assert named == {job: (TENANT, 3), other: ("other", 1)}


async def test_a_due_retry_waits_for_its_tenants_window_as_a_dispatchs_run_does(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str
) -> None:
    # A failing target's retries were republished whatever the tenant's window held, so
    # a retry storm filled the stream ahead of other tenants' runs (and passed its
    # rate-limit key's bucket). Now a due retry is admitted as a dispatch's run is.
    clock = ManualClock(T0)
    config = scheduler_config(migrated_database_url, stack, tenant_window=1)
    store = SchedulerStore(pool)
    publisher = RunPublisher(bus.jetstream, "test")
    parts = Parts(
        Dispatcher(store, publisher, lambda: ALL, config, clock),
        Sweeper(store, publisher, lambda: ALL, config, clock),
        clock,
    )
    day = Schedule(IntervalSpec(timedelta(days=1)))
    first, second = await insert_jobs(pool, day, first_due=T0, count=2)
    await add_tenant(pool, "other")
    [other] = await insert_jobs(pool, day, first_due=T0, tenant_id="other")
    await parts.dispatcher.dispatch_once()
    [queued] = [j for j in (first, second) if (await runs_of(pool, j))[0]["dispatch_seq"]]
    [waiting] = [j for j in (first, second) if j != queued]
    # Both tenants' published runs failed and their retries are due; the tenant's other
    # run waits for its window of one.
    await pool.execute(
        "UPDATE job_runs SET status = 'retrying', attempt = 1, check_at = $1,"
        " lateness_ms = 7 WHERE job_id = ANY($2::uuid[])",
        T0,
        [queued, other],
    )
    _, start = await read_dispatches(bus.jetstream, 1)
    await parts.sweeper.sweep_once()
    published, _ = await read_dispatches(bus.jetstream, start)
    sent = {uuid.UUID(run.job_id) for body in published for run in body.runs}
    # The waiting run took the window's room; the retry waits behind it, unpublished,
    # as a dispatch's waiting run does. The other tenant's retry goes out at once.
    assert sent == {waiting, other}
    [retry] = await runs_of(pool, queued)
    assert (retry["status"], retry["dispatch_seq"], retry["check_at"]) == ("queued", 0, None)
    waits = await pool.fetch("SELECT job_id, tenant_id, due_at FROM run_waits")
    assert [tuple(w) for w in waits] == [(queued, TENANT, T0)]
    # The waiting run is leased: the retry is admitted by the next pass, its run's
    # lateness (its first dispatch's) kept.
    await pool.execute("UPDATE job_runs SET status = 'running' WHERE job_id = $1", waiting)
    await parts.sweeper.sweep_once()
    [retry] = await runs_of(pool, queued)
    assert retry["status"] == "queued" and retry["dispatch_seq"] > 0
    assert retry["lateness_ms"] == 7
    assert await pool.fetchval("SELECT count(*) FROM run_waits") == 0


async def test_a_due_retry_under_a_rate_limited_key_waits_for_its_token(
    pool: asyncpg.Pool, parts: Parts, bus: Bus
) -> None:
    [job] = await insert_jobs(
        pool,
        Schedule(IntervalSpec(timedelta(days=1))),
        first_due=T0 + timedelta(days=1),
        policies=JobPolicies(rate_limit_key="crm"),
    )
    await pool.execute(
        "INSERT INTO flow_limits (tenant_id, key, rate_per_s, burst, tokens, refilled_at)"
        " VALUES ($1, 'crm', 1, 1, 0, $2)",
        TENANT,
        T0,
    )
    await pool.execute(
        "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
        " attempt, check_at, dispatch_seq)"
        " SELECT $1, $2, tenant_id, partition_id, 'retrying', 1, $2, 5 FROM jobs"
        " WHERE job_id = $1",
        job,
        T0,
    )
    _, start = await read_dispatches(bus.jetstream, 1)
    await parts.sweeper.sweep_once()  # the bucket is empty: the retry waits, throttled
    assert (await read_dispatches(bus.jetstream, start))[0] == []
    [retry] = await runs_of(pool, job)
    assert (retry["status"], retry["dispatch_seq"], retry["check_at"]) == ("queued", 0, None)
    assert await pool.fetchval("SELECT throttled FROM run_waits WHERE job_id = $1", job)
    await parts.tick(1)  # a token: admitted and published
    published, _ = await read_dispatches(bus.jetstream, start)
    assert [uuid.UUID(run.job_id) for body in published for run in body.runs] == [job]
    [retry] = await runs_of(pool, job)
    # `throttled` describes the run's first start (its SLO), which did not wait for the
    # key: the retry's wait leaves it as it was.
    assert retry["dispatch_seq"] > 0 and not retry["throttled"]


async def test_an_acknowledged_publish_waits_for_the_lost_message_recheck(
    pool: asyncpg.Pool, parts: Parts
) -> None:
    [job] = await insert_jobs(pool, Schedule(IntervalSpec(timedelta(days=1))), first_due=T0)
    await parts.tick(0)
    seq = (await runs_of(pool, job))[0]["dispatch_seq"]
    # Unleased past the confirm deadline, but acknowledged: not published again, looked
    # at again at the recheck.
    await parts.tick(11)
    [run] = await runs_of(pool, job)
    assert run["dispatch_seq"] == seq and run["check_at"] == T0 + timedelta(seconds=120)
    # Still unleased at the recheck: the message was lost; published again.
    await parts.tick(110)
    [run] = await runs_of(pool, job)
    assert run["dispatch_seq"] > seq and run["status"] == "queued"
    # The old ack is gone once its recheck passed (purged by the sweep).
    acks = await pool.fetchval("SELECT count(*) FROM dispatch_acks WHERE dispatch_seq = $1", seq)
    assert acks == 0


async def test_lease_expired_on_the_last_attempt_is_dead_with_a_dead_letter(
    pool: asyncpg.Pool, parts: Parts, bus: Bus
) -> None:
    policies = JobPolicies(retry_max_attempts=1)
    schedule = Schedule(IntervalSpec(timedelta(days=1)))
    [job] = await insert_jobs(pool, schedule, first_due=T0, policies=policies)
    await parts.tick(0)
    await pool.execute(
        "UPDATE job_runs SET status='running', attempt=1, lease_until=$2, check_at=$2,"
        " executor_id='gone' WHERE job_id=$1",
        job,
        T0 + timedelta(seconds=30),
    )
    await parts.tick(31)
    [run] = await runs_of(pool, job)
    assert (run["status"], run["error_class"]) == ("dead", "lease_expired")
    assert await pool.fetchval("SELECT dead_count FROM job_stats WHERE job_id=$1", job) == 1
    letters = [d for d in await dead_letters(bus.jetstream) if d.run.job_id == str(job)]
    assert len(letters) == 1 and letters[0].error_class == run_pb2.ERROR_CLASS_LEASE_EXPIRED
    assert letters[0].target.http.url == "https://example.com/hook"


async def one_letter(bus: Bus, job: object) -> events_pb2.DeadLetter:
    """The job's only DeadLetter on SUNDIAL_DEAD (AssertionError while there is none)."""
    letters = [d for d in await dead_letters(bus.jetstream) if d.run.job_id == str(job)]
    assert len(letters) == 1, letters
    return letters[0]


async def test_dead_letter_lost_to_a_nats_outage_is_published_by_a_later_sweep(
    pool: asyncpg.Pool, parts: Parts, bus: Bus, stack: Stack, migrated_database_url: str
) -> None:
    policies = JobPolicies(retry_max_attempts=1)
    schedule = Schedule(IntervalSpec(timedelta(days=1)))
    [job] = await insert_jobs(pool, schedule, first_due=T0, policies=policies)
    await parts.tick(0)
    await pool.execute(
        "UPDATE job_runs SET status='running', attempt=1, lease_until=$2, check_at=$2,"
        " executor_id='gone' WHERE job_id=$1",
        job,
        T0 + timedelta(seconds=30),
    )
    # The run dies in a sweep while NATS is down: the letter is not acknowledged.
    down = NatsDown()
    config = scheduler_config(migrated_database_url, stack)
    store = SchedulerStore(pool)
    publisher = RunPublisher(down, "test")  # type: ignore[arg-type]
    cut_off = Sweeper(store, publisher, lambda: ALL, config, parts.clock)
    parts.clock.advance(31)
    await cut_off.sweep_once()
    [run] = await runs_of(pool, job)
    assert run["status"] == "dead" and down.attempts == 1
    assert run["check_at"] is not None  # the outbox entry outlives the failed publish
    assert [d for d in await dead_letters(bus.jetstream) if d.run.job_id == str(job)] == []
    # NATS is back: once the entry is due again, a sweep publishes it and clears it.
    parts.clock.advance(config.publish_confirm_s)
    await parts.sweeper.sweep_once()
    letter = await assert_eventually(lambda: one_letter(bus, job), what="dead letter")
    assert letter.run.attempt == 1 and letter.error_class == run_pb2.ERROR_CLASS_LEASE_EXPIRED
    assert letter.target.http.url == "https://example.com/hook"
    [run] = await runs_of(pool, job)
    assert run["check_at"] is None and run["status"] == "dead"


async def test_dead_letter_of_a_scheduler_that_crashed_after_commit_is_published(
    pool: asyncpg.Pool, parts: Parts, bus: Bus
) -> None:
    # The row state a crash between the commit of a death and its publish leaves behind.
    [job] = await insert_jobs(pool, Schedule(IntervalSpec(timedelta(days=1))), first_due=T0)
    await parts.tick(0)
    await pool.execute(
        "UPDATE job_runs SET status='dead', attempt=3, finished_at=$2, check_at=$2,"
        " last_error='503 from target', error_class='retryable' WHERE job_id=$1",
        job,
        T0,
    )
    await parts.sweeper.sweep_once()
    letter = await assert_eventually(lambda: one_letter(bus, job), what="dead letter")
    assert (letter.run.attempt, letter.last_error) == (3, "503 from target")
    assert (await runs_of(pool, job))[0]["check_at"] is None


async def test_passes_between_whole_sweeps_only_admit(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str
) -> None:
    """While runs wait for admission the sweeper passes every admit_interval_s, but
    only a whole sweep (every sweep_interval_s) acts on due checks: the passes in
    between admit and publish, and probe nothing else."""
    clock = ManualClock(T0)
    config = scheduler_config(
        migrated_database_url, stack, sweep_interval_s=60.0, admit_interval_s=0.05, tenant_window=1
    )
    store = SchedulerStore(pool)
    sweeper = Sweeper(store, RunPublisher(bus.jetstream, "test"), lambda: ALL, config, clock)
    # A run whose lease lapses (another tenant's: a running run takes room in its
    # tenant's window), and two runs waiting for a window of one.
    await add_tenant(pool, "other")
    [lapsed] = await insert_jobs(
        pool, Schedule(IntervalSpec(timedelta(days=1))), first_due=T0, tenant_id="other"
    )
    waiting = await insert_jobs(
        pool, Schedule(IntervalSpec(timedelta(days=1))), first_due=T0, count=2
    )
    for job in (lapsed, *waiting):
        await pool.execute(
            "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
            " dispatch_seq, check_at) SELECT job_id, $2, tenant_id, partition_id, 'queued', 0,"
            " NULL FROM jobs WHERE job_id = $1",
            job,
            T0,
        )
    await pool.execute(
        "INSERT INTO run_waits (job_id, scheduled_at, tenant_id, partition_id, priority,"
        " due_at, rate_key) SELECT job_id, $2, tenant_id, partition_id, 3, $2, ''"
        " FROM jobs WHERE job_id = ANY($1::uuid[])",
        waiting,
        T0,
    )
    # The first pass is whole: it admits one waiting run and looks again soon.
    assert await sweeper.pass_once() == 0.05
    admitted = [job for job in waiting if (await runs_of(pool, job))[0]["dispatch_seq"] > 0]
    assert len(admitted) == 1
    # That run ends (its window frees) and the other run's lease lapses.
    await finish_all(pool, admitted[0])
    await pool.execute(
        "UPDATE job_runs SET status = 'running', attempt = 1, lease_until = $2, check_at = $2,"
        " executor_id = 'gone' WHERE job_id = $1",
        lapsed,
        T0 - timedelta(seconds=1),
    )
    # A pass in between: the last waiting run is admitted; the lapsed lease waits for
    # the whole sweep.
    assert await sweeper.pass_once() == 0.05
    assert [(await runs_of(pool, job))[0]["dispatch_seq"] > 0 for job in waiting] == [True] * 2
    assert (await runs_of(pool, lapsed))[0]["status"] == "running"
    # Nothing waits any more: the next pass is the whole sweep, at its own interval.
    wait = await sweeper.pass_once()
    assert 50 < wait <= 60
    assert (await runs_of(pool, lapsed))[0]["status"] == "running"
    await sweeper.sweep_once()  # the whole sweep
    [run] = await runs_of(pool, lapsed)
    assert run["status"] == "queued" and run["error_class"] == "lease_expired"
