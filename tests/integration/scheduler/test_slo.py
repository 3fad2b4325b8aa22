"""A job's SLO counts, from runs written through the real paths at chosen times.

The job is created through the API, its occurrences are dispatched by the real
dispatcher (an outage included, so the misfire policy skips some), started through the
real ledger's LeaseRuns and ended through CompleteRuns, every one of them on one manual
clock; DescribeJob then answers from what those paths wrote (docs/design.md section 11).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from google.protobuf import duration_pb2
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from sundial.core.bus import Bus
from sundial.core.clock import ManualClock
from sundial.core.telemetry import OCCURRENCES_STARTED
from sundial.devstack import Stack
from sundial.internal.v1 import ledger_pb2, ledger_pb2_grpc
from sundial.schedule import jitter_offset
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.ledger import RunLedgerServiceServicer
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.metrics import counts
from tests.integration.api.support import Api, Tenant, launch
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.test_ledger import complete, lease, ref, serve

pytestmark = pytest.mark.timeout(120)

T0 = datetime(2030, 1, 1, 12, 0, 30, tzinfo=UTC)
ALL = list(range(256))
MINUTE = timedelta(minutes=1)


def _d(seconds: float) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromTimedelta(timedelta(seconds=seconds))
    return message


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def api(migrated_database_url: str, clock: ManualClock) -> AsyncIterator[Api]:
    api = await launch(migrated_database_url, clock=clock)
    yield api
    await api.shutdown()


@pytest.fixture
async def tenant(api: Api) -> Tenant:
    return await api.tenant("slo-tenant")


class World:
    """The dispatcher and the ledger of one scheduler on the test's clock, and the
    ledger's metrics."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        ledger: ledger_pb2_grpc.RunLedgerServiceStub,
        clock: ManualClock,
        reader: InMemoryMetricReader,
    ) -> None:
        self.dispatcher = dispatcher
        self.ledger = ledger
        self.clock = clock
        self.reader = reader

    def at(self, instant: datetime) -> None:
        """Move the clock forward to ``instant``."""
        self.clock.advance((instant - self.clock.now()).total_seconds())

    async def start(self, job_id: str, scheduled_at: datetime, at: datetime) -> int:
        """Lease the run at ``at``; its attempt."""
        self.at(at)
        [result] = await lease(self.ledger, [ref(job_id, scheduled_at)])
        assert result.WhichOneof("result") == "grant", result
        return result.grant.attempt

    async def end(self, job_id: str, scheduled_at: datetime, attempt: int, *, dead: bool) -> None:
        status = (
            ledger_pb2.OUTCOME_STATUS_FAILED_FINAL if dead else ledger_pb2.OUTCOME_STATUS_SUCCEEDED
        )
        answer = await complete(
            self.ledger, ref(job_id, scheduled_at), attempt, status, error="boom" if dead else ""
        )
        assert answer.accepted, answer


@pytest.fixture
async def world(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str, clock: ManualClock
) -> AsyncIterator[World]:
    config = scheduler_config(migrated_database_url, stack)
    reader = InMemoryMetricReader()
    servicer = RunLedgerServiceServicer(
        SchedulerStore(pool),
        bus.jetstream,
        config,
        clock,
        random.Random(7),
        meter=MeterProvider(metric_readers=[reader]).get_meter("test"),
    )
    dispatcher = Dispatcher(
        SchedulerStore(pool), RunPublisher(bus.jetstream, "test"), lambda: ALL, config, clock
    )
    async with serve(servicer, pool) as stub:
        yield World(dispatcher, stub, clock, reader)


async def _create(api: Api, tenant: Tenant, name: str, **schedule: object) -> job_pb2.Job:
    job = job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(interval=job_pb2.IntervalSchedule(every=_d(60)), **schedule),  # type: ignore[arg-type]
        target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://example.com/hook")),
        policies=job_pb2.Policies(
            misfire=job_pb2.MISFIRE_POLICY_SKIP,
            overlap=job_pb2.OVERLAP_POLICY_ALLOW_ALL,
            lateness_threshold=_d(10),
            retry=job_pb2.RetryPolicy(max_attempts=1),
        ),
    )
    return (await api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=tenant.md)).job


def _counts(slo: pb.JobSlo) -> dict[str, int]:
    return {
        name: getattr(slo, name)
        for name in ("due", "on_time", "late", "missed", "skipped", "failed", "throttled")
    }


async def test_slo_counts_of_a_job_with_late_missed_and_failed_runs_are_exact(
    api: Api, tenant: Tenant, world: World
) -> None:
    job = await _create(api, tenant, "every-minute")
    first = job.next_run_at.ToDatetime(tzinfo=UTC)
    assert first == datetime(2030, 1, 1, 12, 1, tzinfo=UTC)
    uid = job.uid

    async def dispatch(at: datetime) -> None:
        world.at(at)
        await world.dispatcher.dispatch_once()

    def f(minutes: int) -> datetime:
        return first + minutes * MINUTE

    s = timedelta(seconds=1)
    # f0: started 2 s after its due time (on time), succeeds.
    await dispatch(f(0))
    await world.end(uid, f(0), await world.start(uid, f(0), f(0) + 2 * s), dead=False)
    # f1: started 25 s late (threshold 10 s), dies.
    await dispatch(f(1))
    await world.end(uid, f(1), await world.start(uid, f(1), f(1) + 25 * s), dead=True)
    # f2: started 10 s after (exactly the threshold: on time), dies.
    await dispatch(f(2))
    await world.end(uid, f(2), await world.start(uid, f(2), f(2) + 10 * s), dead=True)
    # An outage: the dispatcher is back at f6 + 30 s. f3, f4, f5 are over the misfire
    # threshold (60 s) and SKIP drops them; f6 is within it and runs, started 31 s late.
    await dispatch(f(6) + 30 * s)
    await world.end(uid, f(6), await world.start(uid, f(6), f(6) + 31 * s), dead=False)
    # f7: dispatched, never started.
    await dispatch(f(7))
    # A manual run is not part of the schedule's SLO.
    world.at(f(7) + 2 * s)
    await api.jobs.TriggerJob(pb.TriggerJobRequest(job_id=uid), metadata=tenant.md)

    async def describe(windows: list[float]) -> list[dict[str, int]]:
        answer = await api.jobs.DescribeJob(
            pb.DescribeJobRequest(job_id=uid, slo_windows=[_d(w) for w in windows]),
            metadata=tenant.md,
        )
        return [_counts(slo) for slo in answer.slo]

    # 5 s after f7's due time it is neither on time nor late yet.
    world.at(f(7) + 5 * s)
    [whole] = await describe([3600])
    assert whole == {
        "due": 8,
        "on_time": 2,
        "late": 2,
        "missed": 3,
        "skipped": 0,
        "failed": 2,
        "throttled": 0,
    }
    # 11 s after it, f7 still waits and is late.
    world.at(f(7) + 11 * s)
    now = f(7) + 11 * s
    answer = await api.jobs.DescribeJob(
        pb.DescribeJobRequest(
            job_id=uid,
            # Cut: 5 min 10 s back is f2 + 1 s (after f2, before the skipped f3..f5); 3 min
            # 41 s back is f3 + 30 s (inside the skipped span: f4 and f5 count).
            slo_windows=[_d(3600), _d(310), _d(221)],
        ),
        metadata=tenant.md,
    )
    assert [_counts(slo) for slo in answer.slo] == [
        {"due": 8, "on_time": 2, "late": 3, "missed": 3, "skipped": 0, "failed": 2, "throttled": 0},
        {"due": 5, "on_time": 0, "late": 2, "missed": 3, "skipped": 0, "failed": 0, "throttled": 0},
        {"due": 4, "on_time": 0, "late": 2, "missed": 2, "skipped": 0, "failed": 0, "throttled": 0},
    ]
    whole_slo = answer.slo[0]
    assert whole_slo.as_of.ToDatetime(tzinfo=UTC) == now
    assert whole_slo.window_start.ToDatetime(tzinfo=UTC) == now - timedelta(hours=1)
    assert whole_slo.lateness_threshold.ToTimedelta() == timedelta(seconds=10)
    # The default windows: 1 h, 24 h, 7 days, all holding every occurrence here.
    default = await api.jobs.DescribeJob(pb.DescribeJobRequest(job_id=uid), metadata=tenant.md)
    assert [s.window.ToTimedelta() for s in default.slo] == [
        timedelta(hours=1),
        timedelta(hours=24),
        timedelta(days=7),
    ]
    assert all(_counts(s) == _counts(whole_slo) for s in default.slo)
    # The ledger counted the same starts: two on time, two late (f7 never started).
    assert counts(world.reader, OCCURRENCES_STARTED) == {
        (("outcome", "late"),): 2,
        (("outcome", "on_time"),): 2,
    }


async def test_jittered_runs_are_judged_by_their_own_due_time(
    api: Api, tenant: Tenant, world: World
) -> None:
    job = await _create(api, tenant, "jittered", jitter=_d(20))
    uid = job.uid
    first = job.next_run_at.ToDatetime(tzinfo=UTC)
    s = timedelta(seconds=1)
    # Each run starts inside the band (threshold, threshold + jitter] after its nominal
    # time, where the SQL cannot judge it: only its own due time (nominal plus its
    # jitter) tells. On time: exactly the threshold after its due time; late: halfway
    # between the threshold and the band's end.
    threshold, bound = 10 * s, 20 * s
    for minute, on_time in [(0, True), (1, False), (2, True), (3, True)]:
        nominal = first + minute * MINUTE
        jitter = jitter_offset(uid, nominal, bound)
        delay = threshold if on_time else threshold + (bound - jitter) / 2
        assert threshold < jitter + delay <= threshold + bound
        world.at(nominal + jitter)
        await world.dispatcher.dispatch_once()
        started = nominal + jitter + delay
        await world.end(uid, nominal, await world.start(uid, nominal, started), dead=False)
    answer = await api.jobs.DescribeJob(pb.DescribeJobRequest(job_id=uid), metadata=tenant.md)
    assert _counts(answer.slo[0]) == {
        "due": 4,
        "on_time": 3,
        "late": 1,
        "missed": 0,
        "skipped": 0,
        "failed": 0,
        "throttled": 0,
    }
    assert counts(world.reader, OCCURRENCES_STARTED) == {
        (("outcome", "late"),): 1,
        (("outcome", "on_time"),): 3,
    }


async def test_a_run_late_by_the_tenants_own_rate_limit_is_counted_throttled_not_late(
    api: Api, tenant: Tenant, world: World, pool: asyncpg.Pool
) -> None:
    """Flow control (docs/design.md sections 7 and 11): a run held at admission by its
    rate-limit key (here a target's Retry-After block) and started past the threshold
    counts as throttled; a run late for any other reason still counts as late."""
    job = await _create(api, tenant, "limited")
    uid = job.uid
    first = job.next_run_at.ToDatetime(tzinfo=UTC)
    s = timedelta(seconds=1)
    # The key of the job's runs (the target's origin) is blocked until f0 + 20 s.
    await pool.execute(
        "INSERT INTO flow_limits (tenant_id, key, blocked_until) VALUES ($1, $2, $3)",
        tenant.tenant_id,
        "https://example.com:443",
        first + 20 * s,
    )
    world.at(first)
    outcome = await world.dispatcher.dispatch_once()
    assert (outcome.waiting, outcome.batches) == (1, [])  # held, not published
    store = SchedulerStore(pool)

    async def admit(at: datetime) -> int:
        async with store.transaction() as tx:
            done = await tx.admit_waiting(
                ALL, window=256, default_weight=1, limit=500, now=at, confirm_until=at + 10 * s
            )
        return sum(done.admitted.values())

    assert await admit(first + 10 * s) == 0  # still blocked
    assert await admit(first + 21 * s) == 1
    await world.end(uid, first, await world.start(uid, first, first + 25 * s), dead=False)
    # The next occurrence is not held (the block is over) and starts 30 s late.
    world.at(first + MINUTE)
    await world.dispatcher.dispatch_once()
    await world.end(
        uid,
        first + MINUTE,
        await world.start(uid, first + MINUTE, first + MINUTE + 30 * s),
        dead=False,
    )
    answer = await api.jobs.DescribeJob(
        pb.DescribeJobRequest(job_id=uid, slo_windows=[_d(3600)]), metadata=tenant.md
    )
    [slo] = answer.slo
    assert (slo.due, slo.on_time, slo.late, slo.throttled) == (2, 0, 1, 1)
    assert counts(world.reader, OCCURRENCES_STARTED) == {
        (("outcome", "late"),): 1,
        (("outcome", "throttled"),): 1,
    }
