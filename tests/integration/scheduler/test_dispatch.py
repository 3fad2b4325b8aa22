"""Dispatch transaction: one run per occurrence, misfire rules, max_runs, end_time."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from sundial.core.bus import RUNS_STREAM, Bus, runs_subject
from sundial.core.clock import ManualClock
from sundial.core.telemetry import DISPATCH_LAG, DISPATCH_LATENESS, OCCURRENCES_SKIPPED
from sundial.devstack import Stack
from sundial.internal.v1 import events_pb2
from sundial.job import JobPolicies, OverlapPolicy, policies_to_json, schedule_to_json
from sundial.schedule import CronSpec, IntervalSpec, MisfirePolicy, Schedule
from sundial.scheduler import dispatcher as dispatcher_module
from sundial.scheduler import planning
from sundial.scheduler.dispatcher import (
    AHEAD_REST,
    IDLE_POLLS,
    MIN_WAIT_S,
    WAKE_STAGGER_S,
    Dispatcher,
)
from sundial.scheduler.model import ClaimedJob, DispatchOutcome
from sundial.scheduler.planning import DefinitionCache
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore, queries
from sundial.scheduler.store._tx import EARLIEST
from sundial.scheduler.sweeper import Sweeper
from tests.helpers.eventually import assert_eventually
from tests.helpers.metrics import meter_and_reader, points
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import (
    TENANT,
    add_tenant,
    insert_jobs,
    runs_of,
    set_schedule,
)

ALL = range(256)
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HOURLY = Schedule(CronSpec("0 * * * *"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def dispatcher(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> Dispatcher:
    config = scheduler_config(migrated_database_url, stack)
    return Dispatcher(
        SchedulerStore(pool), RunPublisher(bus.jetstream, "test"), lambda: ALL, config, clock
    )


async def test_runs_of_many_partitions_go_out_in_one_message(
    pool: asyncpg.Pool, dispatcher: Dispatcher, bus: Bus
) -> None:
    jobs = await insert_jobs(pool, HOURLY, first_due=T0, count=120)
    await add_tenant(pool, "other")
    others = await insert_jobs(pool, HOURLY, first_due=T0, count=5, tenant_id="other")
    partitions = set(
        await pool.fetchval("SELECT array_agg(DISTINCT partition_id) FROM jobs")  # type: ignore[arg-type]
    )
    assert len(partitions) > 50  # the jobs hash over many partitions
    outcome = await dispatcher.dispatch_once()
    # One message, not one per partition: an executor with one free slot takes all of
    # them in one fetch (a message per partition reached it a fetch and a lease apiece).
    [batch] = outcome.batches
    assert {ref.job_id for ref in batch.runs} == set(jobs) | set(others)
    assert batch.partition in partitions
    message = await bus.jetstream.get_last_msg(RUNS_STREAM, runs_subject(batch.partition))
    assert message.headers is not None
    assert message.headers["Nats-Msg-Id"] == f"{batch.runs[0].key}#{batch.dispatch_seq}"
    # Each run's tenant, named once: an executor orders its slots by tenant before it
    # leases (docs/design.md section 7, "Flow control").
    body = events_pb2.RunDispatch.FromString(message.data)
    assert sorted(body.tenants) == sorted({TENANT, "other"})
    tenant_of = {
        uuid.UUID(run.job_id): body.tenants[i]
        for run, i in zip(body.runs, body.run_tenants, strict=True)
    }
    assert tenant_of == {job: TENANT for job in jobs} | {job: "other" for job in others}


async def test_due_job_gets_one_run_and_advances(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    [job] = await insert_jobs(pool, HOURLY, first_due=T0)
    outcome = await dispatcher.dispatch_once()
    assert (outcome.claimed, outcome.inserted) == (1, 1)
    assert len(outcome.batches) == 1 and outcome.batches[0].dispatch_seq > 0
    again = await dispatcher.dispatch_once()
    assert again.claimed == 0
    [run] = await runs_of(pool, job)
    assert run["scheduled_at"] == T0 and run["status"] == "queued"
    # The acknowledged publish is one dispatch_acks row (recheck after the lost-message
    # wait), not a run-row update: check_at is still the confirm deadline.
    assert run["check_at"] == T0 + timedelta(seconds=10)
    acks = await pool.fetch("SELECT dispatch_seq, recheck_at FROM dispatch_acks")
    assert [(a["dispatch_seq"], a["recheck_at"]) for a in acks] == [
        (outcome.batches[0].dispatch_seq, T0 + timedelta(seconds=120))
    ]
    assert run["lateness_ms"] == 0
    job_row = await pool.fetchrow(
        "SELECT next_run_at, fired_count, last_fire_at, last_lateness_ms FROM jobs"
        " WHERE job_id = $1",
        job,
    )
    assert job_row["next_run_at"] == T0 + timedelta(hours=1)
    assert job_row["fired_count"] == 1
    assert (job_row["last_fire_at"], job_row["last_lateness_ms"]) == (T0, 0)
    # Nothing dropped or skipped: the dispatch wrote no stats row and no misfire record.
    assert await pool.fetchval("SELECT count(*) FROM job_stats WHERE job_id = $1", job) == 0
    assert await pool.fetchval("SELECT count(*) FROM job_misfires") == 0


async def test_not_due_job_is_left_alone(pool: asyncpg.Pool, dispatcher: Dispatcher) -> None:
    await insert_jobs(pool, HOURLY, first_due=T0 + timedelta(seconds=1))
    assert (await dispatcher.dispatch_once()).claimed == 0


@pytest.mark.parametrize(
    ("policy", "expected"),
    [(MisfirePolicy.RUN_ONCE, 1), (MisfirePolicy.SKIP, 0), (MisfirePolicy.CATCH_UP, 3)],
)
async def test_outage_of_three_hourly_occurrences(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    clock: ManualClock,
    policy: MisfirePolicy,
    expected: int,
) -> None:
    # Due at 12:00, 13:00, 14:00; the scheduler comes back at 14:30.
    policies = JobPolicies(misfire=policy, overlap=OverlapPolicy.ALLOW_ALL)
    [job] = await insert_jobs(pool, HOURLY, first_due=T0, policies=policies)
    clock.advance(2.5 * 3600)
    await dispatcher.dispatch_once()
    runs = await runs_of(pool, job)
    assert len(runs) == expected
    if policy is MisfirePolicy.RUN_ONCE:
        assert runs[0]["scheduled_at"] == T0 + timedelta(hours=2)
    if policy is MisfirePolicy.CATCH_UP:
        assert [r["scheduled_at"] for r in runs] == [T0 + timedelta(hours=h) for h in range(3)]
    next_run_at = await pool.fetchval("SELECT next_run_at FROM jobs WHERE job_id = $1", job)
    assert next_run_at == T0 + timedelta(hours=3)
    # No stats row: nothing dropped (the API reads it as 0).
    missed = await pool.fetchval(
        "SELECT coalesce((SELECT missed_count FROM job_stats WHERE job_id = $1), 0)", job
    )
    assert missed == 3 - expected
    # The SLO's record of the skipped ones (migration 0016): their span and count.
    records = await pool.fetch(
        "SELECT first_at, last_at, skipped, exact, recorded_at FROM job_misfires WHERE job_id = $1",
        job,
    )
    spans = {
        MisfirePolicy.RUN_ONCE: [(T0, T0 + timedelta(hours=1), 2)],
        MisfirePolicy.SKIP: [(T0, T0 + timedelta(hours=2), 3)],
        MisfirePolicy.CATCH_UP: [],
    }
    assert [(r["first_at"], r["last_at"], r["skipped"]) for r in records] == spans[policy]
    assert all(r["exact"] and r["recorded_at"] == clock.now() for r in records)


async def test_max_runs_ends_the_schedule(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    schedule = Schedule(IntervalSpec(timedelta(minutes=1)), max_runs=2)
    policies = JobPolicies(overlap=OverlapPolicy.ALLOW_ALL)
    [job] = await insert_jobs(pool, schedule, first_due=T0, policies=policies)
    for _ in range(3):
        await dispatcher.dispatch_once()
        clock.advance(60)
    assert len(await runs_of(pool, job)) == 2
    row = await pool.fetchrow("SELECT next_run_at, fired_count FROM jobs WHERE job_id=$1", job)
    assert row["next_run_at"] is None and row["fired_count"] == 2


async def test_end_time_ends_the_schedule(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    schedule = Schedule(IntervalSpec(timedelta(minutes=1)), end_time=T0 + timedelta(seconds=30))
    [job] = await insert_jobs(pool, schedule, first_due=T0)
    await dispatcher.dispatch_once()
    assert len(await runs_of(pool, job)) == 1
    assert await pool.fetchval("SELECT next_run_at FROM jobs WHERE job_id=$1", job) is None


async def test_jittered_run_is_inserted_now_and_published_when_due(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    schedule = Schedule(CronSpec("0 * * * *"), jitter=timedelta(minutes=30))
    [job] = await insert_jobs(pool, schedule, first_due=T0)
    outcome = await dispatcher.dispatch_once()
    [run] = await runs_of(pool, job)
    assert run["scheduled_at"] == T0  # the run key keeps the nominal time
    if run["check_at"] > T0:  # jitter drew a delay: not published yet
        assert outcome.batches == [] and run["dispatch_seq"] == 0
    assert await pool.fetchval(
        "SELECT next_run_at FROM jobs WHERE job_id=$1", job
    ) == T0 + timedelta(hours=1)


async def test_jittered_run_records_its_lateness_when_first_published(
    *,
    pool: asyncpg.Pool,
    bus: Bus,
    stack: Stack,
    migrated_database_url: str,
    dispatcher: Dispatcher,
    clock: ManualClock,
) -> None:
    schedule = Schedule(CronSpec("0 * * * *"), jitter=timedelta(minutes=30))
    jobs = await insert_jobs(pool, schedule, first_due=T0, count=5)
    await dispatcher.dispatch_once()
    deferred = await pool.fetchrow(
        "SELECT job_id, check_at FROM job_runs WHERE check_at > $1 ORDER BY check_at LIMIT 1",
        T0,
    )
    assert deferred is not None, "no job drew a jitter delay"  # 5 jobs: never all zero
    config = scheduler_config(migrated_database_url, stack)
    sweeper = Sweeper(
        SchedulerStore(pool), RunPublisher(bus.jetstream, "test"), lambda: ALL, config, clock
    )
    clock.advance((deferred["check_at"] + timedelta(seconds=7) - clock.now()).total_seconds())
    await sweeper.sweep_once()
    [run] = await runs_of(pool, deferred["job_id"])
    assert run["dispatch_seq"] > 0 and run["lateness_ms"] == 7000
    assert deferred["job_id"] in jobs


async def test_unplannable_job_is_quarantined_and_the_rest_dispatch(
    pool: asyncpg.Pool,
    dispatcher: Dispatcher,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = await insert_jobs(pool, HOURLY, first_due=T0, count=3)
    [unreadable, failing] = await insert_jobs(pool, HOURLY, first_due=T0, count=2)
    # One stored definition no longer decodes; the other makes planning itself fail.
    await set_schedule(pool, unreadable, {"cron": 42})
    real_plan_job = planning._plan_job

    def plan_job(job: ClaimedJob, now: object, cache: object) -> object:
        if job.job_id == failing:
            raise ZeroDivisionError("a bug this job's definition triggers")
        return real_plan_job(job, now, cache)  # type: ignore[arg-type]

    monkeypatch.setattr(planning, "_plan_job", plan_job)
    outcome = await dispatcher.dispatch_once()
    assert outcome.claimed == 5
    for job in good:
        assert [r["scheduled_at"] for r in await runs_of(pool, job)] == [T0]
    for job in (unreadable, failing):
        assert await runs_of(pool, job) == []  # no run, and no off-schedule run key
        row = await pool.fetchrow(
            "SELECT next_run_at, dispatch_not_before FROM jobs WHERE job_id = $1", job
        )
        assert row["next_run_at"] == T0  # still the nominal occurrence
        assert row["dispatch_not_before"] == T0 + planning.QUARANTINE
        assert any(
            r.message == "job cannot be planned; quarantined"
            and getattr(r, "job_id", None) == str(job)
            for r in caplog.records
        )
    # Quarantined: not claimed again until the quarantine ends.
    clock.advance(60)
    assert (await dispatcher.dispatch_once()).claimed == 0
    # The bug is fixed; after the quarantine the missed occurrence runs (misfire RUN_ONCE).
    monkeypatch.setattr(planning, "_plan_job", real_plan_job)
    clock.advance((T0 + planning.QUARANTINE - clock.now()).total_seconds())
    assert (await dispatcher.dispatch_once()).claimed == 2  # the unreadable one again
    assert [r["scheduled_at"] for r in await runs_of(pool, failing)] == [T0]
    assert await runs_of(pool, unreadable) == []
    assert (
        await pool.fetchval("SELECT dispatch_not_before FROM jobs WHERE job_id = $1", failing)
        is None
    )


def test_definition_cache_never_pairs_a_job_with_a_schedule_it_no_longer_has() -> None:
    # A claim that read the new jobs row (version 2) with the old definition, then the
    # next claim with the new one: the second must not get the first's compiled schedule.
    job = uuid.uuid4()
    old = Schedule(CronSpec("0 * * * *"), jitter=timedelta(minutes=1))
    new = Schedule(CronSpec("30 * * * *"), jitter=timedelta(minutes=1))
    cache = DefinitionCache()

    def claimed(schedule: Schedule) -> ClaimedJob:
        return ClaimedJob(
            job_id=job,
            tenant_id="acme",
            partition_id=0,
            next_run_at=T0,
            fired_count=0,
            version=2,
            schedule=json.dumps(schedule_to_json(schedule)),
            policies=json.dumps(policies_to_json(JobPolicies())),
            unfinished=0,
            pending=0,
        )

    cache.get(claimed(old))
    compiled, _ = cache.get(claimed(new))
    fire = compiled.next_fire(T0)
    assert fire is not None and fire.at == T0 + timedelta(minutes=30)


async def test_update_of_the_schedule_takes_effect_at_the_next_dispatch(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    schedule = Schedule(CronSpec("0 * * * *"), jitter=timedelta(seconds=1))
    [job] = await insert_jobs(pool, schedule, first_due=T0)
    await dispatcher.dispatch_once()
    # UpdateJob: new definition, version + 1, next_run_at from the new schedule.
    new = Schedule(CronSpec("30 * * * *"), jitter=timedelta(seconds=1))
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "UPDATE jobs SET version = version + 1, next_run_at = $2 WHERE job_id = $1",
            job,
            T0 + timedelta(minutes=30),
        )
        await set_schedule(conn, job, schedule_to_json(new))
    clock.advance(31 * 60)
    assert (await dispatcher.dispatch_once()).claimed == 1
    assert [r["scheduled_at"] for r in await runs_of(pool, job)] == [
        T0,
        T0 + timedelta(minutes=30),
    ]
    next_run_at = await pool.fetchval("SELECT next_run_at FROM jobs WHERE job_id = $1", job)
    assert next_run_at == T0 + timedelta(minutes=90)


def rows_read_from(plan: dict[str, Any], relation: str) -> float:
    """Rows the plan's nodes on ``relation`` returned, over all their loops."""
    own = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)
    total = own if plan.get("Relation Name") == relation else 0
    return total + sum(rows_read_from(child, relation) for child in plan.get("Plans", []))


async def test_claim_reads_only_the_partitions_it_takes_from(pool: asyncpg.Pool) -> None:
    # A herd of 20,000 due jobs over 256 partitions: one batch of 500 must not read (and
    # sort) every due row, or dispatching a herd costs N^2 / 500 row reads.
    await pool.execute(
        "INSERT INTO jobs (job_id, tenant_id, name, partition_id, next_run_at)"
        " SELECT gen_random_uuid(), 'acme', 'herd-' || i, i % 256, $1"
        " FROM generate_series(1, 20000) AS i",
        T0,
    )
    await pool.execute("ANALYZE jobs")
    async with pool.acquire() as conn, conn.transaction():
        plan = await conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + queries.claim_due_jobs,
            list(ALL),
            500,
            T0,
            500,
            EARLIEST,
            T0,
            [],
        )
    # The pool decodes json values; a plain connection returns text.
    [explained] = json.loads(plan) if isinstance(plan, str) else plan
    read = rows_read_from(explained["Plan"], "jobs")
    assert 500 <= read <= 2_000, f"the claim read {read} job rows for a batch of 500"


async def claimed_of(pool: asyncpg.Pool, tenant: str) -> int:
    return await pool.fetchval("SELECT count(*) FROM job_runs WHERE tenant_id = $1", tenant)


async def behind_a_backlog(
    pool: asyncpg.Pool,
    bus: Bus,
    stack: Stack,
    database_url: str,
    clock: ManualClock,
    *,
    herd: int,
    later: int,
) -> Dispatcher:
    """A dispatcher of batches of 100 that has claimed the first 100 of tenant A's
    ``herd`` jobs due at T0 (a backlog as of T0); B's ``later`` jobs fall due a second
    after T0."""
    for tenant, count, due in (("tenant-a", herd, T0), ("b", later, T0 + timedelta(seconds=1))):
        await add_tenant(pool, tenant)
        await insert_jobs(pool, HOURLY, first_due=due, count=count, tenant_id=tenant)
    dispatcher, _ = measured_dispatcher(pool, bus, stack, database_url, clock, batch_size=100)
    assert (await dispatcher.dispatch_once()).claimed == 100
    return dispatcher


async def test_behind_a_herd_what_falls_due_later_is_claimed_first_and_alone(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    # A's herd of 250 due at T0 takes three batches of 100; B's 10 fall due a second
    # later, while it is being dispatched: the next pass takes them alone (a small
    # transaction), not with 90 more of A's.
    dispatcher = await behind_a_backlog(
        pool, bus, stack, migrated_database_url, clock, herd=250, later=10
    )
    clock.advance(2)
    assert (await dispatcher.dispatch_once()).claimed == 10
    assert await claimed_of(pool, "b") == 10
    assert await claimed_of(pool, "tenant-a") == 100
    while (await dispatcher.dispatch_once()).claimed:
        pass
    assert (await claimed_of(pool, "tenant-a"), await claimed_of(pool, "b")) == (250, 10)


async def test_other_tenants_jobs_due_with_a_herd_are_claimed_before_its_rest(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    # B's and C's jobs fall due at A's herd's own instant (a top-of-the-hour cron): in
    # due order they are part of A's backlog, claimed in whichever of its batches their
    # partitions come in. The pass after the backlog began takes what is left of them,
    # alone.
    for tenant, count in (("tenant-a", 1000), ("c", 30), ("b", 3)):
        await add_tenant(pool, tenant)
        await insert_jobs(pool, HOURLY, first_due=T0, count=count, tenant_id=tenant)
    dispatcher, _ = measured_dispatcher(
        pool, bus, stack, migrated_database_url, clock, batch_size=100
    )
    assert (await dispatcher.dispatch_once()).claimed == 100  # mostly A's: a backlog
    a_first = await claimed_of(pool, "tenant-a")
    assert a_first >= 100 - 33
    assert (await dispatcher.dispatch_once()).claimed == 33 - (100 - a_first)
    assert (await claimed_of(pool, "b"), await claimed_of(pool, "c")) == (3, 30)
    assert await claimed_of(pool, "tenant-a") == a_first
    # Then the herd's rest, in batches, as before.
    assert (await dispatcher.dispatch_once()).claimed == 100
    while (await dispatcher.dispatch_once()).claimed:
        pass
    assert await claimed_of(pool, "tenant-a") == 1000


async def test_a_backlog_keeps_a_share_of_every_batch_however_much_falls_due_after_it(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    dispatcher = await behind_a_backlog(
        pool, bus, stack, migrated_database_url, clock, herd=150, later=300
    )
    clock.advance(2)
    # B's 300, due after the backlog began, fill the batch; A's 50 left still get a fifth.
    assert (await dispatcher.dispatch_once()).claimed == 120
    assert (await claimed_of(pool, "tenant-a"), await claimed_of(pool, "b")) == (120, 100)


async def test_a_backlog_gets_one_pass_in_five_however_often_jobs_fall_due_after_it(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    dispatcher = await behind_a_backlog(
        pool, bus, stack, migrated_database_url, clock, herd=150, later=0
    )
    # Ten of B's fall due before every pass: each of four passes takes them alone...
    for second in range(1, 6):
        due = T0 + timedelta(seconds=second)
        await insert_jobs(
            pool, HOURLY, first_due=due, count=10, tenant_id="b", name_prefix=f"b{second}"
        )
        clock.advance(1)
        claimed = (await dispatcher.dispatch_once()).claimed
        if second < 5:
            assert claimed == 10
            assert await claimed_of(pool, "tenant-a") == 100
    # ...and the fifth takes the backlog's 50 with them.
    assert claimed == 60
    assert (await claimed_of(pool, "tenant-a"), await claimed_of(pool, "b")) == (150, 50)


async def behind_a_herd_of_four_windows(
    pool: asyncpg.Pool,
    bus: Bus,
    stack: Stack,
    database_url: str,
    clock: ManualClock,
    *,
    workers: int,
    poll_interval_s: float = 60.0,
    herd: bool = True,
) -> Dispatcher:
    """A dispatcher of ``workers`` (batches of 100, a tenant window of 10, a poll of
    60 s) and, with ``herd``, tenant A's herd (:func:`insert_herd`)."""
    dispatcher, _ = measured_dispatcher(
        pool,
        bus,
        stack,
        database_url,
        clock,
        batch_size=100,
        tenant_window=10,
        poll_interval_s=poll_interval_s,
        dispatch_workers=workers,
    )
    if herd:
        await insert_herd(pool)
    return dispatcher


async def insert_herd(pool: asyncpg.Pool) -> None:
    """Tenant A's herd of 400 due at T0: with a window of 10 its first batch fills A's
    window, every run of the next waits for admission."""
    await add_tenant(pool, "tenant-a")
    await insert_jobs(pool, HOURLY, first_due=T0, count=400, tenant_id="tenant-a")


async def test_a_backlog_that_only_fills_the_waiting_list_is_dispatched_at_a_pace(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    # A window of 10: A's herd of 400 fills it with its first batch, and every run of
    # the next waits for admission. Dispatching more of it at once would only lengthen
    # the waiting list: the worker rests, and (the only worker) no later than the next
    # job due after the backlog began (B's), whose batch is not rested after.
    dispatcher = await behind_a_herd_of_four_windows(
        pool, bus, stack, migrated_database_url, clock, workers=1
    )
    assert await dispatcher.pass_once() == 0.0  # 10 published, 90 held
    rested = await dispatcher.pass_once()  # 100 held
    assert 0.0 < rested < 60.0
    await add_tenant(pool, "b")
    soon = T0 + timedelta(milliseconds=1)
    await insert_jobs(pool, HOURLY, first_due=soon, count=10, tenant_id="b")
    assert await dispatcher.pass_once() == pytest.approx(0.001)  # B's due in 1 ms
    clock.advance(1)
    before = await claimed_of(pool, "tenant-a")
    # B's 10 alone, published; the backlog's next pass comes at once (not rested after).
    assert await dispatcher.pass_once() == MIN_WAIT_S
    assert await claimed_of(pool, "b") == 10
    assert await claimed_of(pool, "tenant-a") == before
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM job_runs WHERE tenant_id = 'b' AND dispatch_seq > 0"
        )
        == 10
    )


async def test_the_feeder_rests_longer_while_the_waiting_list_is_far_ahead(
    pool: asyncpg.Pool,
    bus: Bus,
    stack: Stack,
    migrated_database_url: str,
    clock: ManualClock,
    *,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Behind A's herd the worker feeding the waiting list rests as long as its pass
    # took; once AHEAD_RUNS of A's runs wait already (seconds of admission ahead), it
    # rests AHEAD_REST times as long, leaving the cores to other tenants' runs.
    dispatcher = await behind_a_herd_of_four_windows(
        pool, bus, stack, migrated_database_url, clock, workers=2
    )
    assert await dispatcher.pass_once() == 0.0  # 10 published, 90 held
    assert 0.0 < await dispatcher.pass_once() < 60.0  # 100 more held: 190 wait
    fed = DispatchOutcome(claimed=100, waiting=100, waiting_tenants=frozenset({"tenant-a"}))
    monkeypatch.setattr(dispatcher_module, "AHEAD_RUNS", 191)
    assert await dispatcher._backlog_pace(fed, 0.01) == pytest.approx(0.01)
    monkeypatch.setattr(dispatcher_module, "AHEAD_RUNS", 190)
    assert await dispatcher._backlog_pace(fed, 0.01) == pytest.approx(0.01 * AHEAD_REST)
    # Never beyond the poll interval; and a pass that published is never rested.
    assert await dispatcher._backlog_pace(fed, 30.0) == 60.0
    assert await dispatcher._backlog_pace(DispatchOutcome(claimed=100), 0.01) == 0.0


class Worker:
    """One dispatch worker: a task of its own that runs the dispatcher's passes asked
    of it (a worker is known to the dispatcher by its task)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._asks: asyncio.Queue[asyncio.Future[float]] = asyncio.Queue()
        self._task = asyncio.create_task(self._serve(dispatcher))

    async def _serve(self, dispatcher: Dispatcher) -> None:
        while True:
            answer = await self._asks.get()
            try:
                answer.set_result(await dispatcher.pass_once())
            except Exception as exc:  # handed to the asker
                answer.set_exception(exc)

    async def pass_once(self) -> float:
        answer: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        await self._asks.put(answer)
        return await answer

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def test_one_worker_alone_claims_a_backlog_that_only_fills_the_waiting_list(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    # Two workers behind A's herd. Once a pass of it only filled the waiting list, the
    # worker that made it claims the rest alone; the other takes only jobs due since the
    # backlog began (B's) and waits for the next of them, so the herd's dispatch takes
    # one worker's share of the event loop and the database, not all of them.
    dispatcher = await behind_a_herd_of_four_windows(
        pool, bus, stack, migrated_database_url, clock, workers=2
    )
    feeder, other = Worker(dispatcher), Worker(dispatcher)
    try:
        assert await feeder.pass_once() == 0.0  # 10 published, 90 held
        assert 0.0 < await feeder.pass_once() < 60.0  # 100 held: it rests
        assert await claimed_of(pool, "tenant-a") == 200
        # Nothing due since the backlog began: the other worker claims nothing of it and
        # waits its poll interval (no job due after the backlog began).
        assert await other.pass_once() == 60.0
        assert await claimed_of(pool, "tenant-a") == 200
        await add_tenant(pool, "b")
        await insert_jobs(
            pool, HOURLY, first_due=T0 + timedelta(seconds=1), count=10, tenant_id="b"
        )
        # B's next, due in a second: the other worker waits for it...
        assert await other.pass_once() == pytest.approx(1.0)
        clock.advance(1)
        # ...and claims B's ten alone (published), still none of the backlog.
        await other.pass_once()
        assert (await claimed_of(pool, "b"), await claimed_of(pool, "tenant-a")) == (10, 200)
        # The worker that claims the backlog goes on with it.
        await feeder.pass_once()
        assert await claimed_of(pool, "tenant-a") == 300
    finally:
        await feeder.stop()
        await other.stop()


async def test_the_worker_feeding_a_backlog_hands_polling_to_another(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    # The poller is the worker that wakes first at the next due instant. The first to
    # wake at a herd's instant was the poller, and it went on to feed the backlog: while
    # it fed, no worker woke at B's instants (every other one WAKE_STAGGER_S late, all
    # at once, splitting B's jobs). Now the next idle worker polls in its place.
    dispatcher = await behind_a_herd_of_four_windows(
        pool, bus, stack, migrated_database_url, clock, workers=2, poll_interval_s=0.5, herd=False
    )
    feeder, other = Worker(dispatcher), Worker(dispatcher)
    try:
        assert await feeder.pass_once() == 0.5  # nothing stored: it polls
        await insert_herd(pool)
        assert await feeder.pass_once() == 0.0  # 10 published, 90 held
        assert 0.0 < await feeder.pass_once() < 0.5  # 100 held: it feeds, at a pace
        await add_tenant(pool, "b")
        await insert_jobs(
            pool, HOURLY, first_due=T0 + timedelta(seconds=2), count=10, tenant_id="b"
        )
        # B's next is due in 2 s: the other worker polls (it waited 2 s + the stagger)...
        assert await other.pass_once() == 0.5
        clock.advance(1.75)
        # ...so it is the first to wait for B's instant, and wakes at it...
        assert await other.pass_once() == pytest.approx(0.25)
        clock.advance(0.25)
        await other.pass_once()
        # ...and claims B's ten alone: published, none on the waiting list.
        published = "SELECT count(*) FROM job_runs WHERE tenant_id = 'b' AND dispatch_seq > 0"
        assert await pool.fetchval(published) == 10
        assert await pool.fetchval("SELECT count(*) FROM run_waits WHERE tenant_id = 'b'") == 0
    finally:
        await feeder.stop()
        await other.stop()


async def test_workers_waiting_for_one_instant_wake_one_after_the_other(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    # Woken together, two workers split the jobs due at that instant, and the claim that
    # found their tenant's admission lock taken by the other put its share on the
    # waiting list. The second waits a little longer: the first claims them all.
    dispatcher, _ = measured_dispatcher(
        pool, bus, stack, migrated_database_url, clock, poll_interval_s=60.0, dispatch_workers=2
    )
    await insert_jobs(pool, HOURLY, first_due=T0 + timedelta(seconds=1), count=20)
    first, second = Worker(dispatcher), Worker(dispatcher)
    try:
        assert await first.pass_once() == pytest.approx(1.0)
        assert await second.pass_once() == pytest.approx(1.0 + WAKE_STAGGER_S)
        clock.advance(1)
        await first.pass_once()
        published = "SELECT count(*) FROM job_runs WHERE dispatch_seq > 0"
        assert await pool.fetchval(published) == 20
        assert await pool.fetchval("SELECT count(*) FROM run_waits") == 0
        # Later, the second finds nothing left and waits for the next (an hour on): the
        # first looks again every poll interval, the second waits longer.
        clock.advance(WAKE_STAGGER_S)
        assert await second.pass_once() == 60.0 * IDLE_POLLS
        assert await pool.fetchval("SELECT count(*) FROM job_runs") == 20
    finally:
        await first.stop()
        await second.stop()


async def test_one_idle_worker_polls_and_a_backlog_it_finds_wakes_the_others(
    pool: asyncpg.Pool,
    bus: Bus,
    stack: Stack,
    migrated_database_url: str,
    clock: ManualClock,
    *,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With nothing due within a poll interval, each worker polling every interval cost
    # PostgreSQL a claim and a next-due probe of every owned partition per worker: one
    # worker polls, the others wait for the next due job (or IDLE_POLLS intervals).
    dispatcher, _ = measured_dispatcher(
        pool,
        bus,
        stack,
        migrated_database_url,
        clock,
        poll_interval_s=0.5,
        dispatch_workers=3,
        batch_size=10,
    )
    woken: list[bool] = []
    monkeypatch.setattr(dispatcher, "wake", lambda: woken.append(True))
    first, second, third = Worker(dispatcher), Worker(dispatcher), Worker(dispatcher)
    try:
        assert await first.pass_once() == 0.5  # nothing stored: the first polls
        assert await second.pass_once() == 0.5 * IDLE_POLLS
        await insert_jobs(pool, HOURLY, first_due=T0 + timedelta(seconds=2), count=1)
        # Until its next due job, after the poller (which wakes at it).
        assert await third.pass_once() == pytest.approx(2.0 + WAKE_STAGGER_S)
        assert await first.pass_once() == 0.5  # still the poller
        await first.stop()  # the poller gone, the next idle worker polls
        assert await second.pass_once() == 0.5
        assert not woken
        # A backlog the poller finds (more than a batch due) ends the others' waits.
        await insert_jobs(pool, HOURLY, first_due=T0, count=11)
        assert await second.pass_once() == 0.0  # a full batch: more is due at once
        assert woken == [True]
    finally:
        await first.stop()
        await second.stop()
        await third.stop()


def measured_dispatcher(
    pool: asyncpg.Pool,
    bus: Bus,
    stack: Stack,
    database_url: str,
    clock: ManualClock,
    **settings: Any,
) -> tuple[Dispatcher, InMemoryMetricReader]:
    """A dispatcher of every partition whose instruments ``reader`` collects."""
    meter, reader = meter_and_reader()
    config = scheduler_config(database_url, stack, **settings)
    publisher = RunPublisher(bus.jetstream, "test")
    return Dispatcher(
        SchedulerStore(pool), publisher, lambda: ALL, config, clock, meter=meter
    ), reader


async def test_dispatch_records_each_runs_lateness(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    dispatcher, reader = measured_dispatcher(pool, bus, stack, migrated_database_url, clock)
    await insert_jobs(pool, HOURLY, first_due=T0, count=3)
    clock.advance(30)  # found 30 s after the due time, within the misfire threshold
    assert (await dispatcher.dispatch_once()).inserted == 3
    [point] = points(reader, DISPATCH_LATENESS)
    assert point.count == 3
    assert point.sum == pytest.approx(90.0)


@pytest.fixture
def patient_dispatcher(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> Dispatcher:
    """A dispatcher whose poll interval (60 s) is far longer than any wait below."""
    config = scheduler_config(migrated_database_url, stack, poll_interval_s=60.0)
    return Dispatcher(
        SchedulerStore(pool), RunPublisher(bus.jetstream, "test"), lambda: ALL, config, clock
    )


async def test_between_passes_the_dispatcher_sleeps_until_the_next_due_instant(
    pool: asyncpg.Pool, patient_dispatcher: Dispatcher, clock: ManualClock
) -> None:
    # Nothing scheduled: the poll interval.
    assert await patient_dispatcher.pass_once() == 60.0
    [soon] = await insert_jobs(pool, HOURLY, first_due=T0 + timedelta(seconds=3.25))
    [paused] = await insert_jobs(pool, HOURLY, first_due=T0 + timedelta(seconds=1))
    await pool.execute("UPDATE jobs SET paused = true WHERE job_id = $1", paused)
    # The paused job does not count; the next due one does, to the microsecond.
    assert await patient_dispatcher.pass_once() == 3.25
    clock.advance(3.25)
    # Dispatched on the instant; the next fire (13:00) is beyond the poll interval.
    assert await patient_dispatcher.pass_once() == 60.0
    [run] = await runs_of(pool, soon)
    assert run["scheduled_at"] == T0 + timedelta(seconds=3.25) and run["lateness_ms"] == 0


async def test_a_quarantined_job_wakes_the_dispatcher_when_its_quarantine_ends(
    pool: asyncpg.Pool, patient_dispatcher: Dispatcher, clock: ManualClock
) -> None:
    [job] = await insert_jobs(pool, HOURLY, first_due=T0 - timedelta(minutes=1))
    await pool.execute(
        "UPDATE jobs SET dispatch_not_before = $2 WHERE job_id = $1", job, T0 + timedelta(seconds=2)
    )
    assert await patient_dispatcher.pass_once() == 2.0


async def test_a_due_job_another_transaction_holds_is_looked_at_again_soon(
    pool: asyncpg.Pool, patient_dispatcher: Dispatcher
) -> None:
    [job] = await insert_jobs(pool, HOURLY, first_due=T0)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM jobs WHERE job_id = $1 FOR UPDATE", job)
        # Skipped (SKIP LOCKED) yet due: neither the poll interval nor a busy spin.
        assert await patient_dispatcher.pass_once() == MIN_WAIT_S


async def test_a_herd_sharing_one_document_is_planned_from_one_read(
    pool: asyncpg.Pool, dispatcher: Dispatcher
) -> None:
    jobs = await insert_jobs(pool, HOURLY, first_due=T0, count=40)
    [legacy] = await insert_jobs(pool, HOURLY, first_due=T0, digest=False)
    outcome = await dispatcher.dispatch_once()
    assert (outcome.claimed, outcome.inserted) == (41, 41)
    for job in [*jobs, legacy]:
        [run] = await runs_of(pool, job)
        assert run["scheduled_at"] == T0
    # One document, one digest: one cache entry serves the whole herd.
    assert len(dispatcher._documents._entries) == 1


async def test_a_changed_definition_is_planned_with_its_new_document(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    [job, other] = await insert_jobs(pool, HOURLY, first_due=T0, count=2)
    await dispatcher.dispatch_once()  # the hourly document is cached now
    # As UpdateJob writes it: the new schedule and its digest (queries.sql update_job).
    every_minute = schedule_to_json(Schedule(CronSpec("* * * * *")))
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE jobs SET version = version + 1 WHERE job_id = $1", job)
        await set_schedule(conn, job, every_minute)
    clock.advance(3600)
    await dispatcher.dispatch_once()
    next_of = "SELECT next_run_at FROM jobs WHERE job_id = $1"
    assert await pool.fetchval(next_of, job) == T0 + timedelta(hours=1, minutes=1)
    assert await pool.fetchval(next_of, other) == T0 + timedelta(hours=2)


async def test_dispatch_lag_is_the_age_of_the_oldest_due_job_left_and_skips_are_counted(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    dispatcher, reader = measured_dispatcher(
        pool, bus, stack, migrated_database_url, clock, batch_size=2, poll_interval_s=60.0
    )
    skip = JobPolicies(misfire=MisfirePolicy.SKIP, overlap=OverlapPolicy.ALLOW_ALL)
    # Three hourly jobs due since 12:00 that missed their 12:00, 13:00 and 14:00 (SKIP:
    # none runs), and one due a second ago: a batch of two leaves others due.
    await insert_jobs(pool, HOURLY, first_due=T0, count=3, policies=skip)
    await insert_jobs(pool, HOURLY, first_due=T0 + timedelta(hours=2, seconds=599))
    clock.advance(2 * 3600 + 600)
    assert await dispatcher.pass_once() == 0.0  # a full batch: more is due
    # At least one of the two claimed is a 12:00 job (three of the four are).
    [lag] = points(reader, DISPATCH_LAG)
    assert lag.value == pytest.approx(2 * 3600 + 600)
    passes = 1
    while await dispatcher.pass_once() == 0.0:
        passes += 1
        assert passes < 5
    [lag] = points(reader, DISPATCH_LAG)
    assert lag.value == 0.0  # nothing due any more (the next is 15:00)
    [skipped] = points(reader, OCCURRENCES_SKIPPED)
    assert (dict(skipped.attributes or {}), skipped.value) == ({"reason": "misfire"}, 9)


async def test_runs_a_busy_admission_lock_put_on_the_waiting_list_are_admitted_at_once(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> None:
    # No whole sweep for a minute: only the dispatcher's call can bring the next pass.
    config = scheduler_config(migrated_database_url, stack, sweep_interval_s=60.0)
    publisher = RunPublisher(bus.jetstream, "test")
    sweeper = Sweeper(SchedulerStore(pool), publisher, lambda: ALL, config, clock)
    dispatcher = Dispatcher(
        SchedulerStore(pool),
        publisher,
        lambda: ALL,
        config,
        clock,
        runs_waiting=sweeper.runs_waiting,
    )
    sweeping = asyncio.create_task(sweeper.run(lambda: None))
    try:
        # The sweeper's first pass (a whole one, nothing waiting) is behind it.
        await assert_eventually(lambda: sweeper._next_whole > 0, what="first sweep")
        [job] = await insert_jobs(pool, HOURLY, first_due=T0)
        # Another dispatch of the tenant holds its admission lock: this one does not wait
        # for it, the run waits for admission instead.
        async with pool.acquire() as other, other.transaction():
            await other.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('sundial.admit:' || $1, 0))",
                TENANT,
            )
            await dispatcher.pass_once()
            [run] = await runs_of(pool, job)
            assert run["dispatch_seq"] == 0
        # The lock is free: the sweeper, woken by the dispatcher, admits and publishes the
        # run within moments, not at its next whole sweep a minute away.
        await assert_eventually(lambda: _published(pool, job), what="the run admitted")
    finally:
        await sweeper.stop()
        await sweeping


async def _published(pool: asyncpg.Pool, job: uuid.UUID) -> bool:
    [run] = await runs_of(pool, job)
    return bool(run["dispatch_seq"] > 0)
