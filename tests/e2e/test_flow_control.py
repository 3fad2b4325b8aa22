"""Flow control end to end (issue 26, docs/design.md section 7 "Flow control"): fair
sharing by admission, weights, priority, rate limits, a target's 429, concurrency keys,
and the guarantees kept with fairness on while a scheduler and an executor are killed.

API, schedulers and executors run as real processes; a recording target on loopback
sees the calls. The classes share one deployment each (started once, its settings
differ from the others'); every test acts through tenants of its own and waits for
all of its runs to end, so the next one starts on an idle deployment.

Assertions are about order and counts (who reached the target before whom, how many
were called, how many at once), not durations, except where a duration is the
contract (a rate, a Retry-After), and there they are bounds a slower machine keeps.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from sundial.devstack import Services, Stack
from sundial.v1 import flow_pb2, job_pb2, job_service_pb2
from tests.e2e.test_executor_runs import http_job, once
from tests.helpers.cluster import Cluster, Tenant, connected, shared_services
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import Call, RecordingTarget

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


# --- helpers ------------------------------------------------------------------------


def herd(
    prefix: str,
    url: str,
    due: datetime,
    count: int,
    flow: job_pb2.FlowPolicy | None = None,
) -> list[job_pb2.Job]:
    """``count`` one-time HTTP jobs ``{prefix}-{i}`` due at ``due``, under the flow
    policy ``flow``; a failed attempt is retried within 2 s (or after the target's
    Retry-After)."""
    jobs = []
    for i in range(count):
        job = http_job(f"{prefix}-{i}", url, once(due), base_delay_s=1, max_delay_s=2)
        if flow is not None:
            job.policies.flow.CopyFrom(flow)
        jobs.append(job)
    return jobs


async def create_all(tenant: Tenant, jobs: list[job_pb2.Job]) -> None:
    """Create ``jobs`` for ``tenant`` in batches (BatchCreateJobs takes 1,000)."""
    for start in range(0, len(jobs), 1000):
        await tenant.jobs.BatchCreateJobs(
            job_service_pb2.BatchCreateJobsRequest(
                jobs=jobs[start : start + 1000], request_id=str(uuid.uuid4())
            ),
            metadata=tenant.metadata,
            timeout=60,
        )


def soon(seconds: float = 0.0) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


async def statuses(db: asyncpg.Connection, *tenants: Tenant) -> collections.Counter[str]:
    rows = await db.fetch(
        "SELECT status, count(*) AS n FROM job_runs WHERE tenant_id = ANY($1::text[])"
        " GROUP BY status",
        [t.tenant_id for t in tenants],
    )
    return collections.Counter({r["status"]: r["n"] for r in rows})


async def all_succeeded(
    db: asyncpg.Connection, count: int, *tenants: Tenant, timeout_s: float
) -> None:
    """Wait until the runs of ``tenants`` are ``count`` and every one SUCCEEDED."""

    async def done() -> None:
        by_status = await statuses(db, *tenants)
        assert by_status == {"succeeded": count}, dict(by_status)

    await assert_eventually(done, timeout_s=timeout_s, interval_s=0.2, what="every run done")


async def throttled(db: asyncpg.Connection, *tenants: Tenant) -> int:
    """Runs of ``tenants`` marked throttled: late by their tenant's own limits (their
    lateness is counted apart), not by Sundial's fair share."""
    return await db.fetchval(
        "SELECT count(*) FROM job_runs WHERE tenant_id = ANY($1::text[]) AND throttled",
        [t.tenant_id for t in tenants],
    )


def called_once_each(calls: list[Call], count: int) -> None:
    """``count`` runs, each called exactly once (at attempt 1)."""
    keys = collections.Counter(c.key for c in calls)
    assert len(keys) == count, f"{len(keys)} run keys called, {count} runs"
    twice = {k: n for k, n in keys.items() if n > 1}
    assert not twice, f"called more than once: {twice}"
    assert {c.attempt for c in calls} == {1}


async def set_limit(
    tenant: Tenant,
    key: str,
    *,
    rate_per_second: float = 0.0,
    burst: int = 0,
    max_running: int = 0,
) -> None:
    """The tenant's limits of ``key`` (SetFlowLimit: a new or changed rate starts with a
    full bucket; a target's Retry-After block stays)."""
    limit = flow_pb2.FlowLimit(
        key=key, rate_per_second=rate_per_second, burst=burst, max_running=max_running
    )
    await tenant.call("SetFlowLimit", flow_pb2.SetFlowLimitRequest(limit=limit))


async def flow_limit(tenant: Tenant, key: str) -> flow_pb2.FlowLimit:
    """The key's limit as ListFlowLimits shows it, with its state."""
    answer = await tenant.jobs.ListFlowLimits(
        flow_pb2.ListFlowLimitsRequest(), metadata=tenant.metadata, timeout=10
    )
    [limit] = [x for x in answer.limits if x.key == key]
    return limit


@pytest.fixture(scope="class")
def deployment(
    request: pytest.FixtureRequest,
    stack: Stack,
    class_database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Services]:
    """The services the requesting class's tests share: its ``ENV`` on top of the e2e
    settings, ``REPLICAS`` schedulers and as many executors."""
    cls = request.cls
    log_dir = tmp_path_factory.mktemp(cls.__name__)
    with shared_services(
        stack, class_database_url, log_dir, replicas=cls.REPLICAS, **cls.ENV
    ) as services:
        yield services


@pytest.fixture
async def deployed(deployment: Services) -> AsyncIterator[Cluster]:
    async with connected(deployment) as cluster:
        yield cluster


@pytest.fixture
async def db(class_database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(class_database_url)
    yield conn
    await conn.close()


# --- one contended executor: fairness, weights, priority ------------------------------

WINDOW = 4
"""SUNDIAL_TENANT_WINDOW of the contended deployment: a tenant of weight 1 has at most
this many runs published and not leased (weight w: w times as many)."""
SLOTS = 8
"""SUNDIAL_MAX_IN_FLIGHT of its one executor: fewer than the windows of the tenants
that compete for it, so their runs queue for it."""
TENANT_SLOTS = SLOTS - 1
"""Slots one tenant may hold there: one (an eighth, SUNDIAL_SLOTS_KEPT_FREE's bound) is
kept for another tenant's runs."""


class TestContendedExecutor:
    """One scheduler with a small window, one executor with few call slots."""

    ENV = {"SUNDIAL_TENANT_WINDOW": str(WINDOW), "SUNDIAL_MAX_IN_FLIGHT": str(SLOTS)}
    REPLICAS = 1
    HERD = 300
    QUIET = 10

    async def test_a_quiet_tenants_runs_start_before_a_herd_is_half_done(
        self, deployed: Cluster, target: RecordingTarget, db: asyncpg.Connection
    ) -> None:
        # A's window (20) is more than the executor's slots: A alone keeps it busy.
        a, b = await deployed.tenant(fair_weight=5), await deployed.tenant()
        # A's calls take 0.1 s, so A's herd goes at most SLOTS / 0.1 = 80 calls a second
        # however fast the machine: the assertion counts A's calls during B's wait,
        # part of which (the dispatcher's poll, the sweeper's interval) is fixed time.
        target.script("/a", delay_s=0.1)
        await create_all(a, herd("a", f"{target.url}/a", soon(1), self.HERD))

        def herd_under_way() -> None:
            assert len(target.calls_to("/a")) >= 10

        await assert_eventually(herd_under_way, timeout_s=30, what="A's herd started")
        # B's runs fall due while A has almost all of its herd left. Without admission
        # they would queue in the stream behind every run of A's herd (all published
        # when it fell due), and reach the target after A's last; with it, behind at
        # most A's window.
        await create_all(b, herd("b", f"{target.url}/b", soon(), self.QUIET))
        await all_succeeded(db, self.HERD + self.QUIET, a, b, timeout_s=90)
        a_calls, b_calls = target.calls_to("/a"), target.calls_to("/b")
        b_done = max(c.started for c in b_calls)
        a_before = sum(c.started < b_done for c in a_calls)
        a_times = sorted(c.started for c in a_calls)
        print(
            f"A's calls before B's last: {a_before} of {self.HERD};"
            f" A's drain {a_times[-1] - a_times[0]:.2f} s"
        )
        assert a_before < self.HERD // 2, f"{a_before} of A's runs went before B's last"
        called_once_each(a_calls, self.HERD)
        called_once_each(b_calls, self.QUIET)
        assert await throttled(db, a, b) == 0  # the fair share held them, no limit of theirs
        assert not await db.fetchval(
            "SELECT count(*) FROM run_waits WHERE tenant_id = ANY($1::text[])",
            [a.tenant_id, b.tenant_id],
        )

    async def test_weights_1_and_3_share_the_calls_25_75(
        self, deployed: Cluster, target: RecordingTarget, db: asyncpg.Connection
    ) -> None:
        c, d = await deployed.tenant(fair_weight=1), await deployed.tenant(fair_weight=3)
        # Equal backlogs of 150, due at one instant; counted: the first 150 calls once
        # both tenants are called (a herd created late would start behind the other).
        # Both stay backlogged over the range the assertion allows (D's share up to
        # 0.9, C's up to 0.4). Without weights (or without admission: both herds in
        # the stream at once) each would get about half of them.
        counted = 150
        due = soon(2)
        await asyncio.gather(
            create_all(c, herd("c", f"{target.url}/c", due, counted)),
            create_all(d, herd("d", f"{target.url}/d", due, counted)),
        )
        await all_succeeded(db, 2 * counted, c, d, timeout_s=90)
        c_calls, d_calls = target.calls_to("/c"), target.calls_to("/d")
        both = max(c_calls[0].started, d_calls[0].started)
        calls = sorted((x for x in c_calls + d_calls if x.started >= both), key=lambda x: x.started)
        share = sum(x.path == "/d" for x in calls[:counted]) / counted
        print(f"weight 3's share of the first {counted} calls: {share:.3f}")
        assert 0.6 <= share <= 0.9, share

    async def test_a_tenant_whose_calls_hang_leaves_a_slot_for_another_tenants_run(
        self, deployed: Cluster, target: RecordingTarget, db: asyncpg.Connection
    ) -> None:
        a, b = await deployed.tenant(), await deployed.tenant()
        # A's calls never end while the test runs: A holds every slot it may, and a
        # window of its runs waits in the stream.
        target.hold("/hang")
        await create_all(a, herd("hang", f"{target.url}/hang", soon(), TENANT_SLOTS + WINDOW))

        def a_holds_its_slots() -> None:
            assert len(target.calls_to("/hang")) == TENANT_SLOTS

        await assert_eventually(a_holds_its_slots, timeout_s=30, what="A's calls hanging")
        # B's run takes the slot kept free, while every call of A's still hangs (with
        # every slot A's, it would start only after one of them ended).
        await create_all(b, herd("kept", f"{target.url}/kept", soon(), 1))
        await all_succeeded(db, 1, b, timeout_s=30)
        assert len(target.calls_to("/hang")) == TENANT_SLOTS
        assert all(c.finished is None for c in target.calls_to("/hang"))
        target.release("/hang")
        await all_succeeded(db, TENANT_SLOTS + WINDOW, a, timeout_s=60)

    async def test_high_priority_runs_start_before_low_priority_ones_due_with_them(
        self, deployed: Cluster, target: RecordingTarget, db: asyncpg.Connection
    ) -> None:
        tenant = await deployed.tenant()
        # Every slot the tenant may hold holds a call first, and a window of runs waits in
        # the stream behind them, so every run below waits for admission, whatever
        # dispatch transaction its job was claimed in.
        target.hold("/block")
        await create_all(
            tenant, herd("block", f"{target.url}/block", soon(), TENANT_SLOTS + WINDOW)
        )

        async def window_full() -> None:
            assert len(target.calls_to("/block")) == TENANT_SLOTS
            in_stream = await db.fetchval(
                "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status = 'queued'"
                " AND dispatch_seq > 0",
                tenant.tenant_id,
            )
            assert in_stream == WINDOW, in_stream

        await assert_eventually(
            window_full, timeout_s=30, what="the slots held and a window in the stream"
        )
        low = herd("low", f"{target.url}/low", soon(), 20, job_pb2.FlowPolicy(priority=5))
        high = herd("high", f"{target.url}/high", soon(), 20, job_pb2.FlowPolicy(priority=1))
        await create_all(tenant, low + high)

        async def all_waiting() -> None:
            waiting = await db.fetchval(
                "SELECT count(*) FROM run_waits WHERE tenant_id = $1", tenant.tenant_id
            )
            assert waiting == 40, waiting

        await assert_eventually(all_waiting, timeout_s=30, what="40 runs waiting")
        target.release("/block")
        await all_succeeded(db, 40 + TENANT_SLOTS + WINDOW, tenant, timeout_s=60)
        last_high = max(c.started for c in target.calls_to("/high"))
        early_low = sum(c.started < last_high for c in target.calls_to("/low"))
        print(f"low-priority calls before the last high-priority one: {early_low}")
        # The last admission of a high-priority run may take low-priority ones with it
        # (the window's free room), which can reach the target first.
        assert early_low <= WINDOW, f"{early_low} low-priority runs before the last high"


# --- two schedulers and two executors: limits per key, faults --------------------------


class TestTwoOfEach:
    """Two schedulers and two executors with fairness on: the limits of a key hold
    across every process, and nothing is lost or run twice when a scheduler and an
    executor are killed mid-herd. That test kills processes of the class's deployment,
    so it comes last."""

    ENV = {
        "SUNDIAL_CLUSTER": f"flow-{uuid.uuid4().hex[:8]}",
        "SUNDIAL_TENANT_WINDOW": "50",
        # A killed scheduler's partitions move within 3 s; the messages a killed
        # executor fetched and never leased come back after 4 s.
        "SUNDIAL_LEASE_TTL_S": "3",
        "SUNDIAL_MEMBERSHIP_POLL_S": "0.5",
        "SUNDIAL_ACK_WAIT_S": "4",
    }
    REPLICAS = 2
    RATE = 20.0
    BURST = 5
    RUNS = 140
    """A drain of (140 - 5) / 20 = 6.75 s: the bound on the rate (10 % over the limit)
    leaves 0.6 s for the first call to be slower than the last from admission to
    target (a cold start; 0.3 s seen on a loaded machine, where 100 runs left 0.43 s)."""
    FAULT_HERD = 1000
    FAULT_QUIET = 20

    async def test_a_rate_limit_holds_across_the_processes_and_fails_no_run(
        self, deployed: Cluster, target: RecordingTarget, db: asyncpg.Connection
    ) -> None:
        tenant = await deployed.tenant()
        await set_limit(tenant, "crm", rate_per_second=self.RATE, burst=self.BURST)
        crm = job_pb2.FlowPolicy(rate_limit_key="crm")
        await create_all(tenant, herd("r", f"{target.url}/r", soon(), self.RUNS, crm))
        await all_succeeded(db, self.RUNS, tenant, timeout_s=60)
        calls = target.calls_to("/r")
        called_once_each(calls, self.RUNS)
        arrivals = sorted(c.started for c in calls)
        # The burst goes at once, the rest as the bucket refills. Over the whole drain,
        # not from the first call after the burst: admissions come in clumps (one per
        # admission pass), and the first clump's delay would count as a faster rate.
        drain = arrivals[-1] - arrivals[0]
        rate = (self.RUNS - self.BURST) / drain
        print(f"calls/s after the burst: {rate:.2f}; drain {drain:.2f} s")
        assert rate <= self.RATE * 1.1, rate
        assert drain >= (self.RUNS - self.BURST) / self.RATE * 0.9, drain
        # Every run waited for the key (the burst's too: a limited key's runs always go
        # through the waiting list), so none of them counts as late by Sundial.
        assert await throttled(db, tenant) == self.RUNS

    async def test_a_429_with_retry_after_holds_the_keys_waiting_runs_until_then(
        self, deployed: Cluster, target: RecordingTarget, db: asyncpg.Connection
    ) -> None:
        tenant = await deployed.tenant()
        origin = target.url  # http://127.0.0.1:<port>: the default rate-limit key
        # One call every 5 s: the first run goes, the others wait for tokens.
        await set_limit(tenant, origin, rate_per_second=0.2, burst=1)
        target.script("/k", status=429, headers={"Retry-After": "3"}, times=1)
        await create_all(tenant, herd("k", f"{target.url}/k", soon(), 10))

        async def blocked() -> None:
            limit = await flow_limit(tenant, origin)
            assert limit.HasField("blocked_until"), "the key is not blocked"
            assert limit.waiting_runs == 9, limit

        await assert_eventually(blocked, timeout_s=30, what="the 429 blocks the key")
        [answered_429] = target.calls_to("/k")
        assert answered_429.status == 429
        # Lift the rate limit: from now on only the target's Retry-After holds the runs.
        await set_limit(tenant, origin, rate_per_second=1000, burst=100)
        await all_succeeded(db, 10, tenant, timeout_s=60)
        first, *later = target.calls_to("/k")
        assert first is answered_429 and len(later) == 10, len(later)
        gaps = [c.started - answered_429.started for c in later]
        print(f"first call after the 429: {min(gaps):.2f} s later")
        assert min(gaps) >= 2.5, sorted(gaps)
        attempts = await db.fetch(
            "SELECT attempt, count(*) AS n FROM job_runs WHERE tenant_id = $1 GROUP BY attempt",
            tenant.tenant_id,
        )
        assert {r["attempt"]: r["n"] for r in attempts} == {1: 9, 2: 1}
        assert await throttled(db, tenant) == 10

    async def test_a_concurrency_key_never_has_more_runs_at_once_than_its_limit(
        self, deployed: Cluster, target: RecordingTarget, db: asyncpg.Connection
    ) -> None:
        tenant = await deployed.tenant()
        await set_limit(tenant, "customer=42", max_running=3)
        target.script("/c42", delay_s=0.5)
        customer = job_pb2.FlowPolicy(concurrency_key="customer=42")
        await create_all(tenant, herd("c", f"{target.url}/c42", soon(), 15, customer))
        await all_succeeded(db, 15, tenant, timeout_s=60)
        called_once_each(target.calls_to("/c42"), 15)
        assert target.max_active_by_path["/c42"] == 3

    async def test_a_scheduler_and_an_executor_killed_mid_herd_lose_nothing_run_nothing_twice(
        self, deployed: Cluster, target: RecordingTarget, db: asyncpg.Connection
    ) -> None:
        a, b = await deployed.tenant(), await deployed.tenant()
        # Each call of A's takes a while, so the executors hold runs when one is killed.
        target.script("/a", delay_s=0.1)
        due = soon(2)
        await asyncio.gather(
            create_all(a, herd("a", f"{target.url}/a", due, self.FAULT_HERD)),
            create_all(
                b, herd("b", f"{target.url}/b", due + timedelta(seconds=1), self.FAULT_QUIET)
            ),
        )
        scheduler = deployed.services.processes["scheduler"]
        executor = deployed.services.processes["executor"]
        node = (executor.process.env or {})["SUNDIAL_NODE_ID"]

        async def mid_herd() -> None:
            assert len(target.calls_to("/a")) >= self.FAULT_HERD // 5
            holds = await db.fetchval(
                "SELECT count(*) FROM job_runs WHERE status = 'running' AND executor_id LIKE $1",
                f"{node}/%",
            )
            assert holds, "the victim holds no run"

        await assert_eventually(mid_herd, timeout_s=60, interval_s=0.02, what="A's herd under way")
        for victim in (scheduler, executor):
            assert victim.process.proc is not None
            victim.process.proc.send_signal(signal.SIGKILL)
        for victim in (scheduler, executor):
            assert victim.process.proc is not None
            victim.process.proc.wait(10)
        killed_at = len(target.calls_to("/a"))
        # The runs the killed executor held: leased, not reported. Only these may take a
        # second attempt (their lease lapses); nothing else may run twice.
        held = {
            (r["job_id"], r["scheduled_at"])
            for r in await db.fetch(
                "SELECT job_id, scheduled_at FROM job_runs WHERE status = 'running'"
                " AND executor_id LIKE $1",
                f"{node}/%",
            )
        }
        print(f"killed after {killed_at} of A's calls; the executor held {len(held)} runs")
        await all_succeeded(db, self.FAULT_HERD + self.FAULT_QUIET, a, b, timeout_s=90)
        tenants = [a.tenant_id, b.tenant_id]
        assert not await db.fetchval(
            "SELECT count(*) FROM run_waits WHERE tenant_id = ANY($1::text[])", tenants
        )
        runs = await db.fetch(
            "SELECT job_id, scheduled_at, attempt FROM job_runs WHERE tenant_id = ANY($1::text[])",
            tenants,
        )
        assert held, "the killed executor held no run"
        again = [
            r for r in runs if r["attempt"] != 1 and (r["job_id"], r["scheduled_at"]) not in held
        ]
        assert not again, f"{len(again)} runs not held by the killed executor took 2+ attempts"
        assert all(r["attempt"] <= 2 for r in runs)
        print(f"{sum(r['attempt'] == 2 for r in runs)} runs took a second attempt")
        calls = target.calls_to("/a") + target.calls_to("/b")
        assert len({c.key for c in calls}) == self.FAULT_HERD + self.FAULT_QUIET
        # No attempt of a run was called twice (a run published twice is leased once).
        repeated = collections.Counter((c.key, c.attempt) for c in calls)
        twice = [key for key, n in repeated.items() if n > 1]
        assert not twice, twice
