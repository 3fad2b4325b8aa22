"""Benchmark Sundial end to end: schedule -> dispatch -> lease -> target call -> outcome.

Run: ``python bench/bench_e2e.py [--rates 200,1000] [--seconds 20] [--herd 20000]
[--executors 1] [--json]``.

Everything is real: ``sundial-api``, ``sundial-scheduler`` and ``sundial-executor``
processes on the local stack, and an HTTP target in this process (the demo target's
server) that timestamps every call. Reported, all in the same run:

* ``bare_http``: the machine's limit for the last hop. A pooled httpx client (64 calls
  in flight) posting to the same target for 5 s: calls per second.
* ``steady_<rate>``: jobs created so that ``rate`` runs fall due every second (interval
  schedules of 10 s with whole-second offsets: ``rate`` jobs per offset). After a warm-up,
  for ``--seconds``: runs per second seen by the target and end-to-end lateness p50/p99
  (arrival at the target minus the run's scheduled time, which includes dispatch,
  leasing and the call).
* ``herd``: ``--herd`` one-time jobs all due at one instant: seconds from that instant
  until the target saw the last run, and until the last run was SUCCEEDED in the
  database.

Each phase has its own tenant (quotas raised) and pauses its jobs when done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import grpc
import httpx

from sundial.devstack import HttpRequest, HttpResponse, HttpTargetServer, Services, Stack
from sundial.v1 import admin_pb2, admin_pb2_grpc, job_pb2, job_service_pb2, job_service_pb2_grpc

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
PERIOD_S = 10  # interval of the steady-rate jobs; rate jobs share each offset second
WARMUP_S = 12.0


class Recorder:
    """The target's handler: arrival time and lateness per run key."""

    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}
        self.lateness: dict[str, float] = {}

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        now = time.time()
        key = request.headers.get("idempotency-key", "")
        scheduled = request.headers.get("sundial-scheduled-at")
        if key and key not in self.arrivals:
            self.arrivals[key] = now
            if scheduled:
                at = datetime.fromisoformat(scheduled.replace("Z", "+00:00")).timestamp()
                self.lateness[key] = now - at
        return HttpResponse(200, b"{}")


def quantile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return round(values[0], 3) if values else float("nan")
    return round(statistics.quantiles(values, n=100)[q - 1], 3)


async def bare_http(url: str, seconds: float = 5.0, concurrency: int = 64) -> dict[str, float]:
    """The last hop's limit: a pooled client hammering the target."""
    done = 0
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(trust_env=False) as client:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                await client.post(url, content=b"{}")
                done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"calls_per_s": round(done / seconds)}


class Api:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.jobs = job_service_pb2_grpc.JobServiceStub(channel)

    async def tenant(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        tenant_id = f"bench-{uuid.uuid4().hex[:8]}"
        admin_md = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        quotas = admin_pb2.Quotas(max_jobs=100_000, max_concurrent_runs=1_000_000)
        await self.admin.CreateTenant(
            admin_pb2.CreateTenantRequest(
                tenant=admin_pb2.Tenant(tenant_id=tenant_id, display_name=tenant_id, quotas=quotas)
            ),
            metadata=admin_md,
        )
        token = await self.admin.CreateApiToken(
            admin_pb2.CreateApiTokenRequest(
                tenant_id=tenant_id, role=admin_pb2.TOKEN_ROLE_TENANT, description="bench"
            ),
            metadata=admin_md,
        )
        return tenant_id, (("authorization", f"Bearer {token.secret}"),)

    async def create(self, metadata: tuple[tuple[str, str], ...], jobs: list[job_pb2.Job]) -> None:
        for start in range(0, len(jobs), 1000):
            await self.jobs.BatchCreateJobs(
                job_service_pb2.BatchCreateJobsRequest(jobs=jobs[start : start + 1000]),
                metadata=metadata,
                timeout=120,
            )


def http_target(url: str) -> job_pb2.Target:
    return job_pb2.Target(http=job_pb2.HttpTarget(url=url))


async def pause_tenant(database_url: str, tenant_id: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("UPDATE jobs SET paused = true WHERE tenant_id = $1", tenant_id)
    finally:
        await conn.close()


async def steady(
    api: Api, recorder: Recorder, url: str, database_url: str, *, rate: int, seconds: float
) -> dict[str, float]:
    tenant_id, md = await api.tenant()
    jobs = []
    for i in range(rate * PERIOD_S):
        schedule = job_pb2.Schedule(interval=job_pb2.IntervalSchedule())
        schedule.interval.every.FromSeconds(PERIOD_S)
        schedule.interval.offset.FromSeconds(i % PERIOD_S)
        jobs.append(job_pb2.Job(name=f"steady-{i}", schedule=schedule, target=http_target(url)))
    await api.create(md, jobs)
    await asyncio.sleep(WARMUP_S)
    start = time.time()
    await asyncio.sleep(seconds)
    end = time.time()
    await pause_tenant(database_url, tenant_id)
    window = [
        recorder.lateness[k]
        for k, t in recorder.arrivals.items()
        if start <= t < end and k in recorder.lateness
    ]
    return {
        "target_runs_per_s": round(len(window) / (end - start)),
        "lateness_p50_s": quantile(window, 50),
        "lateness_p99_s": quantile(window, 99),
        "runs_measured": len(window),
    }


async def herd(
    api: Api, recorder: Recorder, url: str, database_url: str, count: int
) -> dict[str, float]:
    tenant_id, md = await api.tenant()
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=max(30, count // 250))
    jobs = []
    for i in range(count):
        schedule = job_pb2.Schedule()
        schedule.once.FromDatetime(due)
        jobs.append(job_pb2.Job(name=f"herd-{i}", schedule=schedule, target=http_target(url)))
    await api.create(md, jobs)
    created_late = datetime.now(UTC) > due
    key_suffix = "@" + due.strftime("%Y-%m-%dT%H:%M:%SZ")
    conn = await asyncpg.connect(database_url)
    try:
        deadline = time.time() + 900
        seen_all = None
        while time.time() < deadline:
            arrived = sum(1 for k in recorder.arrivals if k.endswith(key_suffix))
            if arrived >= count and seen_all is None:
                seen_all = max(t for k, t in recorder.arrivals.items() if k.endswith(key_suffix))
            succeeded = await conn.fetchval(
                "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status = 'succeeded'",
                tenant_id,
            )
            if succeeded >= count:
                break
            await asyncio.sleep(0.2)
        finished = time.time()
    finally:
        await conn.close()
    await pause_tenant(database_url, tenant_id)
    return {
        "runs": count,
        "all_called_s": round((seen_all or finished) - due.timestamp(), 2),
        "all_succeeded_s": round(finished - due.timestamp(), 2),
        "runs_per_s": round(count / max(finished - due.timestamp(), 1e-9)),
        "created_after_due": created_late,
    }


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def main(
    rates: list[int], seconds: float, herd_size: int, executors: int
) -> dict[str, object]:
    results: dict[str, object] = {}
    recorder = Recorder()
    with Stack(durable=False) as stack:  # fsync off, as the tests run it
        name = f"bench_e2e_{uuid.uuid4().hex[:8]}"
        admin = await asyncpg.connect(stack.database_url)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        database_url = with_database(stack.database_url, name)
        async with HttpTargetServer(recorder) as target:
            url = f"{target.url}/bench"
            results["bare_http"] = await bare_http(url)
            recorder.arrivals.clear()
            with tempfile.TemporaryDirectory(prefix="bench-e2e-") as logs:
                services = Services(
                    stack,
                    Path(logs),
                    extra_env={
                        "SUNDIAL_DATABASE_URL": database_url,
                        "SUNDIAL_ADMIN_TOKEN": ADMIN_TOKEN,
                        "SUNDIAL_ALLOW_LOOPBACK_TARGETS": "1",
                        "SUNDIAL_LOG_LEVEL": "WARNING",
                        "SUNDIAL_MAX_IN_FLIGHT": "256",
                    },
                )
                try:
                    await asyncio.to_thread(services.start)
                    for _ in range(executors - 1):
                        await asyncio.to_thread(services.add, "executor")
                    async with grpc.aio.insecure_channel(
                        services.processes["api"].address
                    ) as channel:
                        api = Api(channel)
                        for rate in rates:
                            results[f"steady_{rate}"] = await steady(
                                api, recorder, url, database_url, rate=rate, seconds=seconds
                            )
                        if herd_size:
                            results["herd"] = await herd(
                                api, recorder, url, database_url, herd_size
                            )
                finally:
                    await asyncio.to_thread(services.stop)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="200,1000")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--herd", type=int, default=20_000)
    parser.add_argument("--executors", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = asyncio.run(
        main([int(r) for r in args.rates.split(",") if r], args.seconds, args.herd, args.executors)
    )
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        print()
    else:
        for phase, values in figures.items():
            print(f"{phase:12s} {values}")
