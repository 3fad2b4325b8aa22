"""The failure policy and the notification outbox where runs end (docs/design.md
section 12): the ledger's CompleteRuns and the sweeper's lease expiry count dead runs in
a row, pause the job in the same transaction when the threshold is reached, and write
the events for the tenant's channels; a herd of dead runs in a digest window becomes
one notification."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime, timedelta

import asyncpg
import pytest

from sundial.api.notifier import PER_CHANNEL, Notifier, SendResult
from sundial.core.bus import Bus
from sundial.core.clock import ManualClock
from sundial.devstack import Stack
from sundial.internal.v1 import ledger_pb2, ledger_pb2_grpc
from sundial.job import JobPolicies
from sundial.notify import MAX_EVENTS_PER_NOTIFICATION, late_run
from sundial.schedule import MisfirePolicy
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from sundial.scheduler.sweeper import Sweeper
from sundial.targets import AddressPolicy
from tests.helpers.eventually import assert_eventually
from tests.helpers.grpc_target import GrpcTargetServer
from tests.helpers.target_server import RecordingTarget
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import (
    TENANT,
    add_tenant,
    insert_jobs,
    insert_queued_runs,
)
from tests.integration.scheduler.test_dispatch import HOURLY, dispatcher
from tests.integration.scheduler.test_ledger import (  # the ledger on a real server
    ALL,
    DAILY,
    T0,
    clock,
    complete,
    lease,
    ledger,
    ref,
)

pytestmark = pytest.mark.timeout(120)
__all__ = ["clock", "dispatcher", "ledger"]  # fixtures, imported

FINAL = ledger_pb2.OUTCOME_STATUS_FAILED_FINAL
SUCCEEDED = ledger_pb2.OUTCOME_STATUS_SUCCEEDED


@pytest.fixture
def sweeper(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> Sweeper:
    config = scheduler_config(migrated_database_url, stack)
    return Sweeper(
        SchedulerStore(pool), RunPublisher(bus.jetstream, "test"), lambda: ALL, config, clock
    )


async def add_channel(
    pool: asyncpg.Pool,
    kinds: list[str],
    *,
    digest_window_s: int = 0,
    tenant: str = TENANT,
    url: str = "http://127.0.0.1:9/n",
    target: dict[str, object] | None = None,
) -> uuid.UUID:
    """A notification channel as CreateNotificationChannel stores it (``target``: the
    stored target document; an HTTP one to ``url`` by default)."""
    channel_id = uuid.uuid4()
    await pool.execute(
        "INSERT INTO notification_channels (channel_id, tenant_id, display_name, target,"
        " event_kinds, digest_window_s, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4::text::jsonb, $5, $6, $7, $7)",
        channel_id,
        tenant,
        f"ch-{channel_id.hex[:8]}",
        json.dumps(target or {"http": {"url": url, "method": "POST", "headers": {}}}),
        kinds,
        digest_window_s,
        T0,
    )
    return channel_id


def pause_after(n: int) -> JobPolicies:
    return JobPolicies(retry_max_attempts=1, pause_after_consecutive_dead=n)


async def die(
    stub: ledger_pb2_grpc.RunLedgerServiceStub, job: uuid.UUID, k: int, status: int = FINAL
) -> None:
    """Run ``k`` of ``job`` (due at T0 + k minutes) ends with ``status`` at attempt 1."""
    at = T0 + timedelta(minutes=k)
    [granted] = await lease(stub, [ref(job, at)])
    answer = await complete(stub, ref(job, at), granted.grant.attempt, status, error=f"boom {k}")
    assert answer.accepted


async def job_state(pool: asyncpg.Pool, job: uuid.UUID) -> asyncpg.Record:
    row = await pool.fetchrow(
        "SELECT j.paused, j.version, d.pause_note, s.consecutive_dead, s.pause_due"
        " FROM jobs j JOIN job_definitions d USING (job_id)"
        " LEFT JOIN job_stats s USING (job_id) WHERE j.job_id = $1",
        job,
    )
    assert row is not None
    return row


async def events(pool: asyncpg.Pool) -> list[tuple[str, str]]:
    rows = await pool.fetch(
        "SELECT kind, detail::text AS detail FROM notification_events ORDER BY event_id"
    )
    return [(r["kind"], json.loads(r["detail"]).get("run_key", "")) for r in rows]


async def test_three_dead_runs_in_a_row_pause_the_job_with_the_reason_and_one_event_each(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    await add_channel(pool, ["dead_run", "auto_paused"])
    await add_channel(pool, ["misfire_skipped"])  # wants none of these: gets nothing
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=pause_after(3))
    await insert_queued_runs(pool, job, [T0 + timedelta(minutes=k) for k in range(4)])
    before = (await job_state(pool, job))["version"]
    await die(ledger, job, 0)
    await die(ledger, job, 1)
    state = await job_state(pool, job)
    assert (state["paused"], state["consecutive_dead"]) == (False, 2)
    await die(ledger, job, 2)
    state = await job_state(pool, job)
    assert state["paused"] and not state["pause_due"]
    assert state["version"] == before + 1
    assert state["pause_note"] == (
        "paused by failure policy after 3 consecutive dead runs; last error: boom 2"
    )
    # The revision records who paused it (migration 0012's trigger).
    revision = await pool.fetchrow(
        "SELECT changed_fields, changed_by, paused FROM job_revisions WHERE job_id = $1"
        " ORDER BY version DESC LIMIT 1",
        job,
    )
    assert revision is not None
    assert revision["changed_by"] == "failure-policy" and revision["paused"]
    assert set(revision["changed_fields"]) == {"paused", "pause_note"}
    keys = [f"{job}@2030-01-01T12:0{k}:00Z" for k in range(3)]
    assert await events(pool) == [
        ("dead_run", keys[0]),
        ("dead_run", keys[1]),
        ("dead_run", keys[2]),
        ("auto_paused", ""),
    ]
    # Runs already created go on (as for any pause); a fourth dead run pauses nothing more.
    await die(ledger, job, 3)
    assert (await job_state(pool, job))["version"] == before + 1
    assert [kind for kind, _ in await events(pool)].count("auto_paused") == 1


async def test_a_long_last_error_is_cut_so_the_pause_note_stays_within_its_limit(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    """An HTML error page as the last error: the note still fits the API's 1,024 chars,
    so UpdateJob and ApplyJob (which check the note they keep) go on working."""
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=pause_after(1))
    await insert_queued_runs(pool, job, [T0])
    [granted] = await lease(ledger, [ref(job, T0)])
    body = "<html>" + "x" * 3000
    answer = await complete(ledger, ref(job, T0), granted.grant.attempt, FINAL, error=body)
    assert answer.accepted
    state = await job_state(pool, job)
    assert state["paused"]
    assert len(state["pause_note"]) == 1024
    assert state["pause_note"].startswith(
        "paused by failure policy after 1 consecutive dead runs; last error: <html>xxx"
    )


async def test_a_success_resets_the_count_and_zero_never_pauses(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=pause_after(2))
    [never] = await insert_jobs(pool, DAILY, first_due=T0, policies=pause_after(0))
    await insert_queued_runs(pool, job, [T0 + timedelta(minutes=k) for k in range(3)])
    await insert_queued_runs(pool, never, [T0 + timedelta(minutes=k) for k in range(3)])
    await die(ledger, job, 0)
    await die(ledger, job, 1, SUCCEEDED)
    await die(ledger, job, 2)
    state = await job_state(pool, job)
    assert (state["paused"], state["consecutive_dead"]) == (False, 1)
    for k in range(3):
        await die(ledger, never, k)
    state = await job_state(pool, never)
    assert (state["paused"], state["consecutive_dead"]) == (False, 3)


async def test_the_first_success_after_dead_runs_is_one_recovered_event(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub
) -> None:
    """RECOVERED: told once per streak, by the success that ended it, to the channels
    that want it; a success with no streak before it tells nothing."""
    await add_channel(pool, ["dead_run", "recovered"])
    await add_channel(pool, ["dead_run"])  # does not want RECOVERED
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    [healthy] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0 + timedelta(minutes=k) for k in range(5)])
    await insert_queued_runs(pool, healthy, [T0])
    await die(ledger, healthy, 0, SUCCEEDED)
    await die(ledger, job, 0)
    await die(ledger, job, 1)
    await die(ledger, job, 2, SUCCEEDED)
    await die(ledger, job, 3, SUCCEEDED)  # no streak before it: nothing
    keys = [f"{job}@2030-01-01T12:0{k}:00Z" for k in range(3)]
    assert await events(pool) == [
        ("dead_run", keys[0]),
        ("dead_run", keys[0]),
        ("dead_run", keys[1]),
        ("dead_run", keys[1]),
        ("recovered", keys[2]),
    ]
    detail = await pool.fetchval(
        "SELECT detail::text FROM notification_events WHERE kind = 'recovered'"
    )
    assert json.loads(detail)["dead_in_a_row"] == 2
    await die(ledger, job, 4)
    assert [kind for kind, _ in await events(pool)].count("recovered") == 1


async def test_a_locked_job_is_paused_by_the_next_sweep(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, sweeper: Sweeper
) -> None:
    """The ledger never waits for a jobs row after locking runs (lock order): a job whose
    row is held at that moment (here as an API write holds it, FOR NO KEY UPDATE) gets
    its pause from the sweeper's backstop, once the row is free."""
    await add_channel(pool, ["auto_paused"])
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=pause_after(1))
    await insert_queued_runs(pool, job, [T0])
    holder = await pool.acquire()
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM jobs WHERE job_id = $1 FOR NO KEY UPDATE", job)
        started = time.monotonic()
        await die(ledger, job, 0)
        assert time.monotonic() - started < 5  # did not wait for the row
        state = await job_state(pool, job)
        assert (state["paused"], state["pause_due"]) == (False, True)
        await tx.rollback()
    finally:
        await pool.release(holder)
    await sweeper.sweep_once()
    state = await job_state(pool, job)
    assert (state["paused"], state["pause_due"]) == (True, False)
    assert state["pause_note"].startswith("paused by failure policy after 1 consecutive dead")
    assert [kind for kind, _ in await events(pool)] == ["auto_paused"]


async def test_a_lease_that_expires_on_the_last_attempt_counts_as_dead(
    pool: asyncpg.Pool,
    ledger: ledger_pb2_grpc.RunLedgerServiceStub,
    sweeper: Sweeper,
    clock: ManualClock,
) -> None:
    await add_channel(pool, ["dead_run", "auto_paused"])
    [job] = await insert_jobs(pool, DAILY, first_due=T0, policies=pause_after(1))
    await insert_queued_runs(pool, job, [T0])
    [granted] = await lease(ledger, [ref(job, T0)])
    assert granted.WhichOneof("result") == "grant"
    clock.advance(600)  # the executor vanished: the lease lapses
    await sweeper.sweep_once()
    state = await job_state(pool, job)
    assert state["paused"]
    assert "last error: lease expired on the last attempt" in state["pause_note"]
    assert [kind for kind, _ in await events(pool)] == ["dead_run", "auto_paused"]


async def test_a_herd_of_a_thousand_dead_runs_is_one_digest_notification(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock
) -> None:
    """1,000 jobs of one tenant die at once (leased and completed 500 per call, as
    executors batch them): 2,000 events (a dead run and an auto-pause each) and, with a
    digest window, one notification that lists a bounded number of them."""
    digest = await add_channel(pool, ["dead_run", "auto_paused"], digest_window_s=60)
    jobs = await insert_jobs(pool, DAILY, first_due=T0, count=1000, policies=pause_after(1))
    await pool.execute("UPDATE tenants SET max_concurrent_runs = 10000")
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
            " dispatch_seq, check_at)"
            " SELECT j.job_id, $2, j.tenant_id, j.partition_id, 'queued', 1, $2"
            " FROM jobs j WHERE j.job_id = ANY($1)",
            jobs,
            T0,
        )
    started = time.monotonic()
    for i in range(0, 1000, 500):
        refs = [ref(job, T0) for job in jobs[i : i + 500]]
        granted = await lease(ledger, refs)
        outcomes = [
            ledger_pb2.Outcome(
                run=r,
                attempt=g.grant.attempt,
                status=FINAL,
                lease_id=g.grant.lease_id,
                error="HTTP 500",
            )
            for r, g in zip(refs, granted, strict=True)
        ]
        answer = await ledger.CompleteRuns(
            ledger_pb2.CompleteRunsRequest(executor_id="ex-1", outcomes=outcomes)
        )
        assert all(result.accepted for result in answer.results)
    elapsed = time.monotonic() - started
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE paused") == 1000
    assert await pool.fetchval("SELECT count(*) FROM notification_events") == 2000
    notifier = Notifier(pool, AddressPolicy(allow_loopback=True), clock)
    assert await notifier.make_notifications() == 0  # the window has not ended yet
    clock.advance(61)
    assert await notifier.make_notifications() == 1
    row = await pool.fetchrow("SELECT channel_id, event_count, body FROM notifications")
    assert row is not None
    assert (row["channel_id"], row["event_count"]) == (digest, 2000)
    body = json.loads(row["body"])
    assert body["event_count"] == 2000
    assert len(body["events"]) == MAX_EVENTS_PER_NOTIFICATION
    assert body["omitted"] == 2000 - MAX_EVENTS_PER_NOTIFICATION
    assert len(row["body"]) < 64 * 1024
    assert await pool.fetchval("SELECT count(*) FROM notification_events") == 0
    assert await notifier.make_notifications() == 0
    print(f"1,000 dead completions with the failure policy: {elapsed:.2f} s")


async def test_skipped_misfires_are_an_event_of_the_dispatch_that_skipped_them(
    pool: asyncpg.Pool, dispatcher: Dispatcher, clock: ManualClock
) -> None:
    """Three hourly occurrences missed under SKIP: one misfire_skipped event naming the
    count, for the channel that wants it; a dispatch that drops nothing writes none."""
    await add_channel(pool, ["misfire_skipped"])
    await add_channel(pool, ["dead_run"])
    policies = JobPolicies(misfire=MisfirePolicy.SKIP)
    [job] = await insert_jobs(pool, HOURLY, first_due=T0, policies=policies)
    [on_time] = await insert_jobs(pool, HOURLY, first_due=T0 + timedelta(hours=2, minutes=30))
    clock.advance(2.5 * 3600)
    await dispatcher.dispatch_once()
    rows = await pool.fetch("SELECT kind, job_id, detail::text AS detail FROM notification_events")
    assert [(r["kind"], r["job_id"]) for r in rows] == [("misfire_skipped", job)]
    detail = json.loads(rows[0]["detail"])
    assert detail["missed"] == 3 and detail["job_id"] == str(job)
    assert detail["job_name"].startswith("job-0-")
    assert on_time != job


async def test_record_events_writes_late_runs_for_the_jobs_own_tenant_only(
    pool: asyncpg.Pool,
) -> None:
    """The emitter the lateness threshold calls (``late_run``): one row per channel of the
    job's tenant that wants LATE_RUN; another tenant's channel gets nothing."""
    mine = await add_channel(pool, ["late_run"])
    await add_channel(pool, ["late_run"], tenant="someone-else")
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    key = f"{job}@2030-01-01T12:00:00Z"
    async with SchedulerStore(pool).transaction() as tx:
        await tx.record_events(
            [late_run(job, key, timedelta(seconds=90), timedelta(seconds=30))], T0
        )
    rows = await pool.fetch(
        "SELECT channel_id, tenant_id, kind, detail::text AS detail, due_at"
        " FROM notification_events"
    )
    assert [(r["channel_id"], r["tenant_id"], r["kind"]) for r in rows] == [
        (mine, TENANT, "late_run")
    ]
    detail = json.loads(rows[0]["detail"])
    assert (detail["run_key"], detail["lateness_ms"], detail["threshold_ms"]) == (
        key,
        90_000,
        30_000,
    )
    assert rows[0]["due_at"] == T0


async def test_a_scheduled_run_started_past_its_lateness_threshold_is_one_late_event(
    pool: asyncpg.Pool, ledger: ledger_pb2_grpc.RunLedgerServiceStub, clock: ManualClock
) -> None:
    """LeaseRuns writes LATE_RUN in the grant's transaction for a scheduled run whose
    first attempt starts more than its job's lateness_threshold (default 60 s) after its
    due time; an on-time start and a second attempt of a late run write nothing."""
    await add_channel(pool, ["late_run"])
    [late_job, on_time_job] = await insert_jobs(pool, DAILY, first_due=T0, count=2)
    late_at, on_time_at = T0 - timedelta(seconds=150), T0 - timedelta(seconds=59)
    await insert_queued_runs(pool, late_job, [late_at])
    await insert_queued_runs(pool, on_time_job, [on_time_at])
    granted = await lease(ledger, [ref(late_job, late_at), ref(on_time_job, on_time_at)])
    assert [g.WhichOneof("result") for g in granted] == ["grant", "grant"]
    rows = await pool.fetch("SELECT kind, detail::text AS detail FROM notification_events")
    assert [r["kind"] for r in rows] == ["late_run"]
    detail = json.loads(rows[0]["detail"])
    assert detail["run_key"] == f"{late_job}@{late_at.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    assert (detail["lateness_ms"], detail["threshold_ms"]) == (150_000, 60_000)
    # Its retry is not a new start: no second event.
    retry = await complete(
        ledger,
        ref(late_job, late_at),
        granted[0].grant.attempt,
        ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE,
    )
    assert retry.accepted
    clock.advance(3600)
    [again] = await lease(ledger, [ref(late_job, late_at)])
    assert again.grant.attempt == 2
    assert await pool.fetchval("SELECT count(*) FROM notification_events") == 1


async def test_notifiers_on_several_replicas_take_disjoint_work(
    pool: asyncpg.Pool, clock: ManualClock
) -> None:
    """Two notifiers making and claiming at once (SKIP LOCKED): every event becomes one
    notification and every notification is claimed by one of them (75 channels of 4:
    a claim takes at most PER_CHANNEL of a channel)."""
    assert PER_CHANNEL == 4
    for _ in range(75):
        channel = await add_channel(pool, ["dead_run"])
        await pool.execute(
            "INSERT INTO notification_events (channel_id, tenant_id, kind, detail, occurred_at,"
            " due_at) SELECT $1, $2, 'dead_run', jsonb_build_object('n', n), $3, $3"
            " FROM generate_series(1, 4) AS n",
            channel,
            TENANT,
            T0,
        )
    notifiers = [Notifier(pool, AddressPolicy(), clock) for _ in range(2)]
    made = await asyncio.gather(*(n.make_notifications() for n in notifiers))
    assert sum(made) == 300
    assert await pool.fetchval("SELECT count(*) FROM notifications") == 300
    claimed = await asyncio.gather(*(n.claim(200) for n in notifiers))
    ids = [d.notification_id for batch in claimed for d in batch]
    assert len(ids) == len(set(ids)) == 300


async def test_a_notifier_that_dies_mid_send_leaves_the_notification_due_again_unchanged(
    pool: asyncpg.Pool, clock: ManualClock
) -> None:
    """At least once: a claim that is never recorded (the notifier died after sending)
    comes due again when the claim ends, with the next attempt number, the same id (the
    Idempotency-Key) and the same body; before that no other notifier takes it."""
    channel = await add_channel(pool, ["dead_run"])
    await pool.execute(
        "INSERT INTO notification_events (channel_id, tenant_id, kind, detail, occurred_at,"
        " due_at) VALUES ($1, $2, 'dead_run', '{}', $3, $3)",
        channel,
        TENANT,
        T0,
    )
    first = Notifier(pool, AddressPolicy(), clock, claim_s=60)
    assert await first.make_notifications() == 1
    [taken] = await first.claim()
    assert taken.attempt == 1
    other = Notifier(pool, AddressPolicy(), clock, claim_s=60)
    assert await other.claim() == []  # claimed: nobody else sends it meanwhile
    clock.advance(61)
    [again] = await other.claim()
    assert (again.notification_id, again.body, again.attempt) == (
        taken.notification_id,
        taken.body,
        2,
    )


async def add_notifications(
    pool: asyncpg.Pool,
    channel: uuid.UUID,
    count: int,
    *,
    due: datetime = T0,
    tenant: str = TENANT,
) -> None:
    """``count`` pending notifications of ``channel``, due by ``due`` (1 µs apart)."""
    await pool.execute(
        "INSERT INTO notifications (notification_id, channel_id, tenant_id, body, event_count,"
        " next_attempt_at, created_at)"
        " SELECT gen_random_uuid(), $1, $2, '{}', 1,"
        " $3::timestamptz - n * interval '1 microsecond', $3"
        " FROM generate_series(1, $4) AS n",
        channel,
        tenant,
        due,
        count,
    )


async def test_a_claim_takes_every_tenants_first_and_of_a_tenant_no_more_than_its_room(
    pool: asyncpg.Pool, clock: ManualClock
) -> None:
    """The notifier claims what its slots can start now: of a tenant at most its share
    (``per_tenant``; less while its sends are in flight, ``room``), every tenant's first
    before any tenant's second, so a tenant's backlog or hanging targets never take the
    slots another tenant's notification needs."""
    await add_tenant(pool, "other")
    for _ in range(6):  # acme's twelve, all due before other's one
        await add_notifications(pool, await add_channel(pool, ["dead_run"]), 2)
    other = await add_channel(pool, ["dead_run"], tenant="other")
    await add_notifications(pool, other, 1, due=T0 + timedelta(seconds=1), tenant="other")
    clock.advance(1)
    notifier = Notifier(pool, AddressPolicy(), clock)
    claimed = await notifier.claim(3, per_tenant=2)
    assert sorted(d.tenant_id for d in claimed) == [TENANT, TENANT, "other"]
    assert await notifier.claim(10, per_tenant=2, room={TENANT: 0}) == []
    assert [d.tenant_id for d in await notifier.claim(10, per_tenant=2, room={TENANT: 1})] == [
        TENANT
    ]
    assert len(await notifier.claim(10)) == 9  # no share given: as many as due


@pytest.mark.parametrize("concurrency", [1, 16])
async def test_a_pass_claims_only_what_it_can_send_before_its_claim_ends(
    pool: asyncpg.Pool, clock: ManualClock, concurrency: int
) -> None:
    """ceil(claimed / concurrency) rounds of the send timeout, and one timeout more as a
    margin, fit in the claim: no claim ends while its pass may still be sending."""
    for _ in range(30):
        await add_notifications(pool, await add_channel(pool, ["dead_run"]), 4)
    notifier = Notifier(
        pool, AddressPolicy(), clock, timeout_s=10, concurrency=concurrency, claim_s=60
    )
    claimed = await notifier.claim()
    assert claimed
    rounds = -(-len(claimed) // concurrency)
    ends = await pool.fetch("SELECT DISTINCT next_attempt_at FROM notifications WHERE attempt = 1")
    [end] = [r["next_attempt_at"] for r in ends]
    assert (end - T0).total_seconds() >= (rounds + 1) * 10
    assert len(claimed) == min(100, concurrency * 5)


async def test_an_outcome_recorded_after_its_claim_ended_changes_nothing(
    pool: asyncpg.Pool, clock: ManualClock
) -> None:
    """A slow notifier whose claim ended records after another replica claimed the
    notification again and delivered it: the later 'delivered' stands (fenced on the
    attempt and on pending), so the notification is not sent yet again."""
    await add_notifications(pool, await add_channel(pool, ["dead_run"]), 1)
    slow = Notifier(pool, AddressPolicy(), clock, claim_s=60)
    fast = Notifier(pool, AddressPolicy(), clock, claim_s=60)
    [first] = await slow.claim()
    clock.advance(61)
    [second] = await fast.claim()
    assert (second.notification_id, second.attempt) == (first.notification_id, 2)
    assert await fast.record([second], [SendResult(True)]) == 1
    assert await slow.record([first], [SendResult(False, "HTTP 503", "http_5xx")]) == 0
    [row] = await pool.fetch("SELECT state, attempt, last_error FROM notifications")
    assert (row["state"], row["attempt"], row["last_error"]) == ("delivered", 2, None)
    # And a stale attempt cannot undo a later failure either (still pending, retried).
    await add_notifications(pool, await add_channel(pool, ["dead_run"]), 1, due=clock.now())
    [a] = await slow.claim()
    clock.advance(61)
    [b] = await fast.claim()
    assert await slow.record([a], [SendResult(True)]) == 0
    assert await fast.record([b], [SendResult(False, "HTTP 503", "http_5xx")]) == 1


async def test_a_channels_backlog_does_not_starve_other_channels(
    pool: asyncpg.Pool, clock: ManualClock
) -> None:
    """One channel with 3,000 due events and 6,000 due notifications, all older than the
    one event and the one notification of another: a pass makes and claims the other
    channel's too, and takes a bounded share of the backlog."""
    flood = await add_channel(pool, ["dead_run"])
    quiet = await add_channel(pool, ["dead_run"])
    await pool.execute(
        "INSERT INTO notification_events (channel_id, tenant_id, kind, detail, occurred_at,"
        " due_at) SELECT $1, $2, 'dead_run', '{}', $3::timestamptz - n * interval '1 ms',"
        " $3::timestamptz - n * interval '1 ms' FROM generate_series(1, 3000) AS n",
        flood,
        TENANT,
        T0 - timedelta(minutes=5),
    )
    await pool.execute(
        "INSERT INTO notification_events (channel_id, tenant_id, kind, detail, occurred_at,"
        " due_at) VALUES ($1, $2, 'dead_run', '{}', $3, $3)",
        quiet,
        TENANT,
        T0,
    )
    notifier = Notifier(pool, AddressPolicy(), clock)
    made = await notifier.make_notifications()
    rows = await pool.fetch("SELECT channel_id, count(*) AS n FROM notifications GROUP BY 1")
    counts = {r["channel_id"]: r["n"] for r in rows}
    assert counts.get(quiet) == 1, counts
    assert 1 <= counts[flood] <= 50 and made == counts[flood] + 1
    await pool.execute("DELETE FROM notifications")
    await add_notifications(pool, flood, 6000, due=T0 - timedelta(minutes=5))
    await add_notifications(pool, quiet, 1)
    claimed = await notifier.claim()
    by_channel = await pool.fetch(
        "SELECT channel_id, count(*) AS n FROM notifications WHERE attempt = 1 GROUP BY 1"
    )
    assert {r["channel_id"]: r["n"] for r in by_channel} == {flood: PER_CHANNEL, quiet: 1}
    assert len(claimed) == PER_CHANNEL + 1


async def test_each_send_is_recorded_as_it_completes(
    pool: asyncpg.Pool, clock: ManualClock
) -> None:
    """A hanging target does not hold back the record of a pass's other sends: the fast
    channel's notification is delivered while the slow one's call is still open."""
    async with RecordingTarget() as target:
        target.hold("/slow")
        slow = await add_channel(pool, ["dead_run"], url=f"{target.url}/slow")
        fast = await add_channel(pool, ["dead_run"], url=f"{target.url}/fast")
        for channel in (slow, fast):
            await add_notifications(pool, channel, 1)
        notifier = Notifier(pool, AddressPolicy(allow_loopback=True), clock, timeout_s=30)
        sending = asyncio.create_task(notifier.deliver_once())
        try:

            async def fast_delivered() -> None:
                assert len(target.calls_to("/slow")) == 1
                state = await pool.fetchval(
                    "SELECT state FROM notifications WHERE channel_id = $1", fast
                )
                assert state == "delivered"

            await assert_eventually(fast_delivered, timeout_s=10, what="the fast delivery")
            assert not sending.done()
            assert (
                await pool.fetchval("SELECT state FROM notifications WHERE channel_id = $1", slow)
                == "pending"
            )
            target.release("/slow")
            assert await asyncio.wait_for(sending, 10) == 2
        finally:
            sending.cancel()
            await notifier.aclose()
        states = await pool.fetch("SELECT DISTINCT state FROM notifications")
        assert [r["state"] for r in states] == ["delivered"]


async def test_a_flood_of_finished_notifications_is_purged_in_one_pass(
    pool: asyncpg.Pool, clock: ManualClock
) -> None:
    """More than one batch (5,000) of old finished notifications all go in one purge,
    and recent or pending ones stay."""
    channel = await add_channel(pool, ["dead_run"])
    await pool.execute(
        "INSERT INTO notifications (notification_id, channel_id, tenant_id, body, event_count,"
        " state, next_attempt_at, created_at, finished_at)"
        " SELECT gen_random_uuid(), $1, $2, '{}', 1, 'delivered', $3, $3, $3"
        " FROM generate_series(1, 12001)",
        channel,
        TENANT,
        T0 - timedelta(days=8),
    )
    await add_notifications(pool, channel, 3, due=T0 - timedelta(days=8))
    await pool.execute(
        "INSERT INTO notifications (notification_id, channel_id, tenant_id, body, event_count,"
        " state, next_attempt_at, created_at, finished_at)"
        " VALUES (gen_random_uuid(), $1, $2, '{}', 1, 'failed', $3, $3, $3)",
        channel,
        TENANT,
        T0 - timedelta(days=6),
    )
    assert await Notifier(pool, AddressPolicy(), clock).purge()
    rows = await pool.fetch("SELECT state, count(*) AS n FROM notifications GROUP BY 1")
    assert {r["state"]: r["n"] for r in rows} == {"pending": 3, "failed": 1}


async def test_a_grpc_channel_gets_the_notification_through_the_target_caller(
    pool: asyncpg.Pool, clock: ManualClock
) -> None:
    async with GrpcTargetServer() as server:
        channel = await add_channel(
            pool,
            ["dead_run"],
            target={"grpc": {"address": server.address, "plaintext": True, "metadata": {}}},
        )
        await add_notifications(pool, channel, 1)
        notifier = Notifier(pool, AddressPolicy(allow_loopback=True), clock, timeout_s=10)
        try:
            assert await notifier.deliver_once() == 1
        finally:
            await notifier.aclose()
        [call] = server.calls
        row = await pool.fetchrow(
            "SELECT notification_id, body, state FROM notifications WHERE channel_id = $1",
            channel,
        )
        assert row["state"] == "delivered"
        assert call.request.idempotency_key == str(row["notification_id"])
        assert call.request.payload == bytes(row["body"])
        assert "sundial-signature" in call.metadata
    # A target the operator's rules forbid is a final failure, not retried.
    forbidden = await add_channel(
        pool,
        ["dead_run"],
        target={"grpc": {"address": "127.0.0.1:9", "plaintext": True, "metadata": {}}},
    )
    await add_notifications(pool, forbidden, 1)
    strict = Notifier(pool, AddressPolicy(), clock, timeout_s=10)
    try:
        await strict.deliver_once()
    finally:
        await strict.aclose()
    state = await pool.fetchval("SELECT state FROM notifications WHERE channel_id = $1", forbidden)
    assert state == "failed"
