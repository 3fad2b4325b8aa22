"""The soak: a whole deployment as real processes, faults on a seeded schedule, a drain,
then the checks of :mod:`._checks` and the report.

The deployment is its own (never the test session's stack, since the soak restarts
servers): ``Stack(durable=False)`` in a folder of its own, the API, two schedulers and two
executors through :class:`~sundial.devstack.Services`, every service reaching
PostgreSQL, NATS and etcd through a :class:`~tests.helpers.tcp_proxy.TcpProxy` (one per
server), and a recording HTTP target in this process. Jobs have interval schedules of
1-3 s bounded by ``start_time`` (the soak's start) and ``end_time`` (the fault phase's
end), so what must exist is exactly each stored schedule's fire times in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from sundial.core.tls import dial
from sundial.devstack import Services, Stack, runtime_dir
from sundial.job import schedule_from_json
from sundial.run import ACTIVE_STATUSES, run_key
from sundial.schedule import compile_schedule
from sundial.v1 import job_pb2, job_service_pb2
from tests.fault.soak._checks import Findings, RunRow, analyse
from tests.fault.soak._faults import Deployment, FaultWindow, Injector, StackServers
from tests.fault.soak._plan import FaultKind, PlannedFault, PlanShape, kinds_for, plan_faults
from tests.fault.soak._report import render
from tests.fault.soak._target import SoakTarget
from tests.helpers.cluster import FAST_ENV, Cluster
from tests.helpers.eventually import assert_eventually
from tests.helpers.tcp_proxy import TcpProxy

SOAK_ENV = {
    "SUNDIAL_CLUSTER": "soak",
    # etcd lease of the schedulers: a frozen or killed one loses its partitions in 3 s.
    "SUNDIAL_LEASE_TTL_S": "3",
    "SUNDIAL_MEMBERSHIP_POLL_S": "0.5",
    # A message lost with a NATS crash comes back after this (default 120 s), and one
    # fetched by an executor that died before leasing it after the ack wait.
    "SUNDIAL_UNLEASED_REPUBLISH_S": "15",
    "SUNDIAL_ACK_WAIT_S": "10",
}
"""On top of the e2e tests' FAST_ENV (run lease 10 s, heartbeats 1 s, sweeps 0.5 s): the
bounds a drain of :data:`DRAIN_BOUND_S` covers."""

DRAIN_BOUND_S = 45.0
"""Longest wait after the fault phase for every occurrence to succeed: a lapsed run
lease (10 s) then its retry (backoff up to 2 s), or a lost message's republish (15 s),
plus a sweep, a fetch and the call, with room for a loaded machine."""

SUCCESS = "succeeded"


@dataclass(frozen=True)
class SoakConfig:
    """One soak run."""

    seed: int
    fault_seconds: float
    """Length of the fault phase: the jobs' schedules run for exactly this long."""
    jobs: int
    work_dir: Path
    """Service logs and the report go here."""
    intervals_s: tuple[int, ...] = (1, 2, 3)
    schedulers: int = 2
    executors: int = 2
    cluster_size: int = 1
    """1, or 3 for three-node NATS and etcd clusters (cluster faults then run too)."""
    drain_s: float = DRAIN_BOUND_S
    lead_s: float = 5.0
    """From the jobs' creation to their first occurrence (the soak's start)."""
    warmup_s: float = 5.0
    tail_s: float = 3.0
    gap_s: tuple[float, float] = (1.0, 3.0)
    every_victim: bool = True
    fill: bool = True
    durations_s: Mapping[FaultKind, tuple[float, float]] | None = None
    report_path: Path | None = None
    title: str = "soak"


@dataclass
class SoakResult:
    """What one soak did and found."""

    config: SoakConfig
    plan: list[PlannedFault]
    windows: list[FaultWindow]
    skipped: list[PlannedFault]
    findings: Findings
    report: str
    timings_s: dict[str, float]
    phase_start: float
    """Unix seconds: the soak's start (the jobs' first occurrences, the plan's zero)."""
    background_errors: list[str] = field(default_factory=list)

    @property
    def kinds_injected(self) -> set[FaultKind]:
        return {w.kind for w in self.windows}

    @property
    def failures(self) -> list[str]:
        """Each broken guarantee, and anything that kept the soak from being valid."""
        total = self.findings.total
        out = [
            f"{getattr(total, what)} {what}"
            for what in ("lost", "double", "stale", "reissued")
            if getattr(total, what)
        ]
        if self.findings.calls == 0:
            out.append("the target saw no call")
        out.extend(f"background error: {e}" for e in self.background_errors)
        return out


def plan_shape(config: SoakConfig) -> PlanShape:
    return PlanShape(
        seconds=config.fault_seconds,
        schedulers=config.schedulers,
        executors=config.executors,
        cluster_nodes=config.cluster_size,
        warmup_s=config.warmup_s,
        tail_s=config.tail_s,
        gap_s=config.gap_s,
        every_victim=config.every_victim,
        fill=config.fill,
        durations_s=config.durations_s,
    )


def stack_supports_clusters() -> bool:
    """Whether this version of the local stack can start three-node clusters."""
    return "cluster_size" in {f.name for f in dataclasses.fields(Stack)}


def run_soak(config: SoakConfig) -> SoakResult:
    """Start the deployment, run the faults and the drain, check, report, stop.

    Blocking (runs its own event loop); every child process is started from one
    long-lived thread.
    """
    plan = plan_faults(config.seed, plan_shape(config))
    config.work_dir.mkdir(parents=True, exist_ok=True)
    # PostgreSQL may run as another user: its folder must be reachable by it.
    data_dir = Path(tempfile.mkdtemp(prefix="soak-", dir=runtime_dir()))
    data_dir.chmod(0o755)
    stack_options: dict[str, Any] = {}
    if config.cluster_size != 1:
        stack_options["cluster_size"] = config.cluster_size
    stack = Stack(data_dir=data_dir, durable=False, **stack_options)
    timings: dict[str, float] = {}
    began = time.monotonic()
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="soak-processes")
    passed = False
    try:
        thread.submit(stack.start).result()
        timings["stack start"] = time.monotonic() - began
        result = asyncio.run(_soak(config, plan, stack, thread, timings))
        passed = not result.failures
    finally:
        stopping = time.monotonic()
        thread.submit(stack.stop).result()
        thread.shutdown()
        timings["stack stop"] = time.monotonic() - stopping
        if passed:
            shutil.rmtree(data_dir, ignore_errors=True)  # kept as evidence otherwise
    timings["total"] = time.monotonic() - began
    result.report = _render(result, data_dir)
    if config.report_path is not None:
        config.report_path.parent.mkdir(parents=True, exist_ok=True)
        config.report_path.write_text(result.report)
    return result


def _proxied_url(url: str, proxy: TcpProxy) -> str:
    return urlunsplit(urlsplit(url)._replace(netloc=_netloc(urlsplit(url), proxy)))


def _netloc(parts: Any, proxy: TcpProxy) -> str:
    user = f"{parts.username}@" if parts.username else ""
    return f"{user}127.0.0.1:{proxy.port}"


def _host_port(address: str) -> tuple[str, int]:
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    return parts.hostname or "127.0.0.1", int(parts.port or 0)


async def _start_proxies(stack: Stack) -> dict[str, list[TcpProxy]]:
    upstreams = {
        "postgres": [stack.database_url],
        "nats": [u.strip() for u in stack.nats_url.split(",") if u.strip()],
        "etcd": list(stack.etcd_endpoints),
    }
    proxies: dict[str, list[TcpProxy]] = {}
    for dependency, addresses in upstreams.items():
        proxies[dependency] = [
            await TcpProxy(*_host_port(a), name=f"{dependency}-{i}").start()
            for i, a in enumerate(addresses)
        ]
    return proxies


def _proxy_env(stack: Stack, proxies: dict[str, list[TcpProxy]]) -> dict[str, str]:
    """The services' SUNDIAL_DATABASE_URL, _NATS_URL and _ETCD_ENDPOINTS: the proxies."""
    return {
        "SUNDIAL_DATABASE_URL": _proxied_url(stack.database_url, proxies["postgres"][0]),
        "SUNDIAL_NATS_URL": ",".join(f"nats://{p.address}" for p in proxies["nats"]),
        "SUNDIAL_ETCD_ENDPOINTS": ",".join(p.address for p in proxies["etcd"]),
    }


def _job(
    index: int, url: str, *, every_s: int, offset_s: int, start: datetime, end: datetime
) -> job_pb2.Job:
    schedule = job_pb2.Schedule(interval=job_pb2.IntervalSchedule())
    schedule.interval.every.FromSeconds(every_s)
    schedule.interval.offset.FromSeconds(offset_s)
    schedule.start_time.FromDatetime(start)
    schedule.end_time.FromDatetime(end)
    job = job_pb2.Job(
        name=f"soak-{index}",
        schedule=schedule,
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=f"{url}/soak/{index}")),
        payload=b"{}",
    )
    policies = job.policies
    # Every occurrence must run: no overlap skipping, no misfire dropping (an hour's
    # lateness is far beyond any fault here), and retries that outlast every fault.
    policies.overlap = job_pb2.OVERLAP_POLICY_ALLOW_ALL
    policies.misfire_threshold.FromSeconds(3600)
    policies.retry.max_attempts = 100
    policies.retry.base_delay.FromSeconds(1)
    policies.retry.max_delay.FromSeconds(2)
    policies.run_timeout.FromSeconds(20)
    return job


async def _expected(pool: asyncpg.Pool, start: datetime) -> dict[str, float]:
    """Run key -> nominal time of every occurrence the stored schedules give."""
    expected: dict[str, float] = {}
    for row in await pool.fetch("SELECT job_id, schedule FROM job_definitions"):
        schedule = schedule_from_json(json.loads(row["schedule"]))
        compiled = compile_schedule(schedule, job_id=str(row["job_id"]))
        fire = compiled.next_fire(start - timedelta(seconds=1))
        while fire is not None:
            expected[run_key(row["job_id"], fire.at)] = fire.at.timestamp()
            fire = compiled.next_fire(fire.at)
    return expected


async def _rows(pool: asyncpg.Pool) -> list[RunRow]:
    return [
        RunRow(
            key=run_key(r["job_id"], r["scheduled_at"]),
            nominal=r["scheduled_at"].timestamp(),
            status=r["status"],
            attempt=r["attempt"],
            lease_id=r["lease_id"],
            finished_at=r["finished_at"].timestamp() if r["finished_at"] else None,
            last_http_status=r["last_http_status"],
        )
        for r in await pool.fetch(
            "SELECT job_id, scheduled_at, status, attempt, lease_id::text AS lease_id,"
            " finished_at, last_http_status FROM job_runs"
        )
    ]


async def _drained(pool: asyncpg.Pool, expected: int) -> bool:
    """Every expected occurrence succeeded and no run is left active."""
    row = await pool.fetchrow(
        "SELECT count(*) FILTER (WHERE status = $1) AS done,"
        " count(*) FILTER (WHERE status = ANY($2::text[])) AS active FROM job_runs",
        SUCCESS,
        [str(s) for s in ACTIVE_STATUSES],
    )
    assert row is not None
    assert row["done"] >= expected, f"{row['done']} of {expected} succeeded"
    assert row["active"] == 0, f"{row['active']} runs still active"
    return True


async def _soak(
    config: SoakConfig,
    plan: list[PlannedFault],
    stack: Stack,
    thread: ThreadPoolExecutor,
    timings: dict[str, float],
) -> SoakResult:
    loop = asyncio.get_running_loop()
    errors: list[str] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(_describe(context)))
    servers = StackServers.of(stack)
    proxies = await _start_proxies(stack)
    services = Services(
        stack,
        log_dir=config.work_dir / "logs",
        extra_env={**FAST_ENV, **SOAK_ENV, **_proxy_env(stack, proxies)},
    )
    deployment = Deployment(servers, stack.database_url, [], [], proxies, thread)
    windows: list[FaultWindow] = []
    skipped: list[PlannedFault] = []
    # Direct, never through a proxy; a pool, since PostgreSQL restarts under it.
    pool = await asyncpg.create_pool(stack.database_url, min_size=0, max_size=2)
    try:
        async with SoakTarget() as target:
            began = time.monotonic()
            try:
                # Side by side; executors know every ledger replica (design.md section 7)
                # and keep that address list when a fault restarts them.
                await deployment.in_process_thread(
                    lambda: services.start(config.schedulers, executors=config.executors)
                )
                for process in services.processes.values():
                    if process.name == "scheduler":
                        deployment.schedulers.append(process)
                    elif process.name == "executor":
                        deployment.executors.append(process)
                timings["services start"] = time.monotonic() - began
                start, end = await _create_jobs(config, services, target.url)
                expected = await _expected(pool, start)
                phase = start.timestamp()
                injector = Injector(deployment)
                for fault in plan:
                    await _sleep_until(phase + fault.at_s)  # the schedule, not an outcome
                    if time.time() + fault.duration_s > end.timestamp() - config.tail_s:
                        skipped.append(fault)  # earlier restarts took longer than planned
                        continue
                    windows.append(await injector.inject(fault))
                await _sleep_until(end.timestamp())
                calm = max([end.timestamp(), *(w.end for w in windows)])
                timings["fault phase"] = calm - phase
                # Whatever is not done by the deadline is counted lost by the checks.
                with contextlib.suppress(AssertionError):
                    await assert_eventually(
                        lambda: _drained(pool, len(expected)),  # type: ignore[arg-type,return-value]
                        timeout_s=max(0.0, calm + config.drain_s - time.time()),
                        interval_s=0.5,
                        what="the drain",
                    )
                timings["drain"] = time.time() - calm
                rows = await _rows(pool)
            finally:
                deployment.resume_all()
                stopping = time.monotonic()
                await deployment.in_process_thread(services.stop)
                timings["services stop"] = time.monotonic() - stopping
            final_rows = await _rows(pool)
            calls = list(target.calls)
    finally:
        await pool.close()
        for group in proxies.values():
            for proxy in group:
                await proxy.close()
    findings = analyse(expected, rows, final_rows, calls, windows)
    return SoakResult(
        config, plan, windows, skipped, findings, "", timings, phase, _meaningful(errors)
    )


async def _create_jobs(
    config: SoakConfig, services: Services, url: str
) -> tuple[datetime, datetime]:
    """A tenant and ``config.jobs`` jobs; returns the soak's start and the fault
    phase's end (the schedules' bounds)."""
    rng = random.Random(f"jobs-{config.seed}")
    async with dial(services.processes["api"].address, None) as channel:
        tenant = await Cluster(services, channel).tenant(max_concurrent_runs=1_000_000)
        start = datetime.fromtimestamp(math.ceil(time.time() + config.lead_s), UTC)
        end = start + timedelta(seconds=config.fault_seconds)
        jobs = []
        for i in range(config.jobs):
            every = rng.choice(config.intervals_s)
            jobs.append(
                _job(i, url, every_s=every, offset_s=rng.randrange(every), start=start, end=end)
            )
        for first in range(0, len(jobs), 1000):
            await tenant.call(
                "BatchCreateJobs",
                job_service_pb2.BatchCreateJobsRequest(
                    jobs=jobs[first : first + 1000], request_id=str(uuid.uuid4())
                ),
            )
    if time.time() >= start.timestamp():
        raise RuntimeError("the jobs were created after their first occurrence: raise lead_s")
    return start, end


async def _sleep_until(at: float) -> None:
    delay = at - time.time()
    if delay > 0:
        await asyncio.sleep(delay)


def _describe(context: dict[str, Any]) -> str:
    return f"{context.get('message', '')} {context.get('exception')!r}".strip()


def _meaningful(errors: list[str]) -> list[str]:
    # grpc.aio's process-wide poller waking a loop an earlier test closed (grpc issues
    # 25364 and 34139; see tests/conftest.py): nothing of the soak's.
    return [e for e in errors if "PollerCompletionQueue" not in e]


def _render(result: SoakResult, data_dir: Path) -> str:
    config = result.config
    findings = result.findings
    injected = {w.kind for w in result.windows}
    missing = [k.value for k in kinds_for(plan_shape(config)) if k not in injected]
    facts: dict[str, object] = {
        "seed": config.seed,
        "stack": f"cluster of {config.cluster_size}" if config.cluster_size > 1 else "single",
        "services": f"api, {config.schedulers} schedulers, {config.executors} executors",
        "jobs": f"{config.jobs} (every {'/'.join(map(str, config.intervals_s))} s)",
        "occurrences expected": findings.occurrences,
        "target calls": findings.calls,
        "faults": f"{len(result.windows)} injected, {len(result.skipped)} skipped for time",
        "kinds never injected": ", ".join(missing) or "none",
        "wall times (s)": ", ".join(f"{k} {v:.1f}" for k, v in result.timings_s.items()),
        "verdict": "; ".join(result.failures) or "0 lost, 0 double, 0 stale, 0 reissued",
    }
    if result.failures:
        facts["servers' data and logs kept in"] = data_dir
        facts["service logs in"] = config.work_dir / "logs"
    return render(config.title, findings, facts=facts, phase_start=result.phase_start)
