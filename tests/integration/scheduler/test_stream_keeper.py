"""A lost SUNDIAL_RUNS is recreated, and the runs it held are published again
(docs/design.md section 6, "A lost stream"), against the session's real NATS and
PostgreSQL. The stream is deleted with the admin user, as an operator would.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NatsClient

from sundial.core.bus import DEAD_LETTERS_PER_TENANT, DEAD_STREAM, RUNS_STREAM, Bus, ensure_streams
from sundial.core.clock import ManualClock
from sundial.devstack import Stack
from sundial.run import RunRef
from sundial.schedule import IntervalSpec, Schedule
from sundial.scheduler.config import SchedulerConfig
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.publisher import RunPublisher, publish_dead_letter
from sundial.scheduler.store import SchedulerStore
from sundial.scheduler.streams import StreamKeeper
from sundial.scheduler.sweeper import Sweeper
from tests.helpers.letters import dead_letter_run
from tests.helpers.stack import nats_options
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import (
    dead_letters,
    insert_jobs,
    read_dispatches,
    runs_of,
)

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
EVERY_HOUR = Schedule(IntervalSpec(timedelta(hours=1)))
ALL = range(256)


@pytest.fixture
async def admin(stack: Stack) -> AsyncIterator[NatsClient]:
    client = await nats.connect(**nats_options(stack))
    yield client
    await client.close()


@pytest.fixture
def config(stack: Stack, migrated_database_url: str) -> SchedulerConfig:
    return scheduler_config(migrated_database_url, stack)


async def published_runs(bus: Bus, job: object) -> int:
    """How many times the stream holds a run of ``job``."""
    messages, _ = await read_dispatches(bus.jetstream, 1)
    return sum(r.job_id == str(job) for m in messages for r in m.runs)


async def test_a_failed_publish_recreates_the_stream_and_goes_through(
    pool: asyncpg.Pool, bus: Bus, admin: NatsClient, config: SchedulerConfig
) -> None:
    clock = ManualClock(T0)
    store = SchedulerStore(pool)
    keeper = StreamKeeper(bus.jetstream, store, lambda: ALL, clock=clock)
    dispatcher = Dispatcher(
        store, RunPublisher(bus.jetstream, "a", streams=keeper), lambda: ALL, config, clock
    )
    [job] = await insert_jobs(pool, EVERY_HOUR, first_due=T0)
    await admin.jetstream().delete_stream(RUNS_STREAM)

    await dispatcher.dispatch_once()

    assert keeper.recreated == 1
    assert dispatcher.dispatched == 1  # the publish after the recreation was acknowledged
    assert await published_runs(bus, job) == 1
    [run] = await runs_of(pool, job)
    # Confirmed: the ack holds the lost-message recheck.
    assert await acked_recheck(pool, run["dispatch_seq"]) == T0 + timedelta(
        seconds=config.unleased_republish_s
    )


async def acked_recheck(pool: asyncpg.Pool, seq: int) -> object:
    """The recheck time JetStream's ack of dispatch ``seq`` recorded (None: no ack)."""
    return await pool.fetchval("SELECT recheck_at FROM dispatch_acks WHERE dispatch_seq = $1", seq)


async def test_runs_the_lost_stream_held_are_republished_by_every_owner(
    pool: asyncpg.Pool, bus: Bus, admin: NatsClient, config: SchedulerConfig
) -> None:
    clock = ManualClock(T0)
    store = SchedulerStore(pool)
    # Two schedulers: "a" owns no partition and recreates the stream; "b" owns them all
    # and learns of the loss only from the new stream's creation time.
    keeper_a = StreamKeeper(bus.jetstream, store, lambda: (), clock=clock)
    keeper_b = StreamKeeper(bus.jetstream, store, lambda: ALL, clock=clock)
    publisher = RunPublisher(bus.jetstream, "b", streams=keeper_b)
    dispatcher = Dispatcher(store, publisher, lambda: ALL, config, clock)
    sweeper = Sweeper(store, publisher, lambda: ALL, config, clock)
    [job, jittered] = await insert_jobs(pool, EVERY_HOUR, first_due=T0, count=2)
    await dispatcher.dispatch_once()
    assert dispatcher.dispatched == 2
    # One run waits for a (jittered) first publish: nothing of it is in the stream.
    await pool.execute(
        "UPDATE job_runs SET dispatch_seq = 0, check_at = $2 WHERE job_id = $1",
        jittered,
        T0 + timedelta(minutes=5),
    )
    await keeper_a.check()
    await keeper_b.check()
    await admin.jetstream().delete_stream(RUNS_STREAM)  # the message goes with it

    clock.advance(1)
    await keeper_a.check()
    assert keeper_a.recreated == 1
    await keeper_b.check()
    assert keeper_b.recreated == 0
    [run] = await runs_of(pool, job)
    assert run["status"] == "queued" and run["check_at"] == clock.now()  # due at once
    # Its ack went with the stream's message: the sweeper must not trust it.
    assert await acked_recheck(pool, run["dispatch_seq"]) is None
    [waiting] = await runs_of(pool, jittered)
    assert waiting["check_at"] == T0 + timedelta(minutes=5)  # not published early

    outcome = await sweeper.sweep_once()
    assert [b.runs for b in outcome.batches] == [(RunRef(job, T0),)]
    assert await published_runs(bus, job) == 1
    # Checking again finds the same stream: nothing is republished a second time.
    await keeper_b.check()
    [run] = await runs_of(pool, job)
    assert run["check_at"] == clock.now() + timedelta(seconds=config.publish_confirm_s)
    assert await acked_recheck(pool, run["dispatch_seq"]) == clock.now() + timedelta(
        seconds=config.unleased_republish_s
    )


async def test_a_tenants_dead_letters_past_its_limit_replace_its_own_oldest_never_anothers(
    bus: Bus,
) -> None:
    # SUNDIAL_DEAD keeps at most dead_letters_per_tenant letters per tenant's subject: A's
    # failing runs replace A's oldest letters, B's letter stays (and the stream cannot
    # grow without bound on the storage SUNDIAL_RUNS shares).
    a, b = (f"tenant-{uuid.uuid4().hex[:8]}" for _ in range(2))
    await ensure_streams(bus.jetstream, dead_letters_per_tenant=3)
    try:
        info = await bus.jetstream.stream_info(DEAD_STREAM)
        assert info.config.max_msgs_per_subject == 3  # applied to the stream in place
        b_ref = RunRef(uuid.uuid4(), T0)
        assert await publish_dead_letter(bus.jetstream, dead_letter_run(b, b_ref), T0)
        a_refs = [RunRef(uuid.uuid4(), T0 + timedelta(minutes=i)) for i in range(5)]
        for ref in a_refs:
            assert await publish_dead_letter(bus.jetstream, dead_letter_run(a, ref), T0)
        kept = await dead_letters(bus.jetstream, a)
        assert [letter.run.run_key for letter in kept] == [ref.key for ref in a_refs[-3:]]
        assert [letter.run.run_key for letter in await dead_letters(bus.jetstream, b)] == [
            b_ref.key
        ]
    finally:
        await ensure_streams(bus.jetstream)
    info = await bus.jetstream.stream_info(DEAD_STREAM)
    assert info.config.max_msgs_per_subject == DEAD_LETTERS_PER_TENANT
