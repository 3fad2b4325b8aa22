"""Benchmark the scheduler's dispatch: N jobs due at one instant (default 100,000).

Run: ``python bench/bench_dispatch.py [--jobs 100000] [--json]``.

Reported, all in the same run on the same PostgreSQL:

* ``bare_sql_1`` / ``bare_sql_2``: the machine's limit. A plain asyncpg loop (one, then
  two concurrent connections) running the same claim-insert-advance transaction as the
  dispatcher (claim 500 due jobs FOR UPDATE SKIP LOCKED over 256 partitions, one
  per-partition index probe each as claim_due_jobs does, insert the
  runs with unnest ON CONFLICT DO NOTHING, advance next_run_at with unnest), without
  reading definitions, planning, publishing or confirming.
* ``scheduler_1`` / ``scheduler_2``: real ``sundial-scheduler`` processes (one, then two,
  sharing the partitions through etcd) dispatching the herd end to end: runs per second
  from the due instant until the last run arrived on JetStream, and dispatch lateness
  p50/p99 (arrival on JetStream minus the due instant).

No executor leases the runs, so the schedulers run with a tenant window of 1,000,000
(every run published at dispatch; the default of 128 would hold all but the first 128 in
the waiting list). Admission still counts the tenant's runs in the stream for each batch,
and here they are never leased: up to the whole herd, where a real tenant's are at most
its window. The figures since flow control are therefore not comparable to the earlier
ones (``bench/results/dispatch.txt``).

The stack (PostgreSQL, NATS, etcd) is started by ``sundial.devstack`` unless
``SUNDIAL_DATABASE_URL``/``SUNDIAL_NATS_URL``/``SUNDIAL_ETCD_ENDPOINTS`` point elsewhere.
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
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
from _common import (  # bench/: the script's folder
    cpu_seconds,
    family_cpu,
    fresh_database,
    peak_rss_mb,
    seed_jobs,
)

from sundial.core.bus import RUNS_STREAM, connect_bus, ensure_streams
from sundial.core.config import DatabaseConfig
from sundial.core.coord import connect_etcd
from sundial.core.db import close_pool, create_pool
from sundial.core.partition import PARTITION_COUNT
from sundial.core.wire import timestamp_in
from sundial.devstack import Stack
from sundial.devstack._services import Services
from sundial.internal.v1 import events_pb2
from sundial.job import JobPolicies, policies_to_json, schedule_to_json
from sundial.schedule import CronSpec, Schedule

BATCH = 500
SCHEDULE = schedule_to_json(Schedule(CronSpec("0 0 * * *")))
POLICIES = policies_to_json(JobPolicies())
TARGET = {"http": {"url": "https://example.com/hook"}}

# The dispatcher's claim shape (claim_due_jobs): one index probe per partition, so a
# batch reads the rows it locks instead of every due row.
CLAIM = """
SELECT j.* FROM unnest($1::smallint[]) AS p(id)
 CROSS JOIN LATERAL (
       SELECT job_id, tenant_id, partition_id, next_run_at FROM jobs
        WHERE partition_id = p.id AND NOT paused AND next_run_at <= $2
        ORDER BY next_run_at LIMIT $3 FOR UPDATE SKIP LOCKED) AS j
 LIMIT $3
"""
INSERT = """
INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status, dispatch_seq,
                      check_at)
SELECT r.*, 'queued', 1, $5 FROM unnest($1::uuid[], $2::timestamptz[], $3::text[],
                                         $4::smallint[]) AS r
ON CONFLICT (job_id, scheduled_at) DO NOTHING
"""
ADVANCE = """
UPDATE jobs j SET next_run_at = u.next_run_at, fired_count = j.fired_count + 1
  FROM unnest($1::uuid[], $2::timestamptz[]) AS u(job_id, next_run_at)
 WHERE j.job_id = u.job_id
"""


async def seed(url: str, count: int) -> None:
    """``count`` jobs (not yet due: next_run_at NULL) with realistic definitions."""
    pool = await create_pool(DatabaseConfig(database_url=url, pool_max_size=2))
    try:
        await pool.execute(
            "INSERT INTO tenants (tenant_id, name, signing_secret, max_concurrent_runs)"
            " VALUES ('bench', 'bench', $1, 100000)",
            b"s" * 32,
        )
        async with pool.acquire() as conn:
            await seed_jobs(conn, count)
        await pool.execute("VACUUM ANALYZE jobs")
    finally:
        await close_pool(pool, 5.0)


async def make_due(url: str, delay_s: float) -> datetime:
    """Make every job due at one instant ``delay_s`` from now; returns that instant."""
    conn = await asyncpg.connect(url)
    try:
        due: datetime = await conn.fetchval(
            "SELECT date_trunc('second', now()) + make_interval(secs => $1)", delay_s
        )
        await conn.execute("UPDATE jobs SET next_run_at = $1", due)
        await conn.execute("VACUUM ANALYZE jobs")
        return due
    finally:
        await conn.close()


async def bare_sql(url: str, count: int, connections: int, postgres: int) -> dict[str, float]:
    """Runs per second of the bare claim-insert-advance loop, and PostgreSQL's CPU."""
    await seed(url, count)
    due = await make_due(url, 0)
    partitions = list(range(PARTITION_COUNT))

    async def loop() -> int:
        conn = await asyncpg.connect(url)
        done = 0
        try:
            while True:
                async with conn.transaction():
                    rows = await conn.fetch(CLAIM, partitions, due, BATCH)
                    if not rows:
                        return done
                    ids = [r["job_id"] for r in rows]
                    at = [r["next_run_at"] for r in rows]
                    await conn.execute(
                        INSERT,
                        ids,
                        at,
                        [r["tenant_id"] for r in rows],
                        [r["partition_id"] for r in rows],
                        due + timedelta(minutes=2),
                    )
                    await conn.execute(ADVANCE, ids, [a + timedelta(days=1) for a in at])
                done += len(rows)
        finally:
            await conn.close()

    began, cpu = time.perf_counter(), family_cpu(postgres)
    runs = sum(await asyncio.gather(*(loop() for _ in range(connections))))
    elapsed, cpu = time.perf_counter() - began, family_cpu(postgres) - cpu
    assert runs == count, (runs, count)
    return {
        "runs": runs,
        "seconds": round(elapsed, 3),
        "runs_per_s": round(runs / elapsed),
        "postgres_cpu_ms_per_1k": round(cpu / count * 1e6, 1),
    }


async def scheduler_run(stack: Stack, url: str, count: int, replicas: int) -> dict[str, float]:
    """Dispatch the herd with ``replicas`` scheduler processes; rate and lateness."""
    await seed(url, count)
    cluster = f"bench{uuid.uuid4().hex[:8]}"
    env = {
        "SUNDIAL_DATABASE_URL": url,
        "SUNDIAL_CLUSTER": cluster,
        "SUNDIAL_LOG_LEVEL": "WARNING",
        "SUNDIAL_BATCH_SIZE": str(BATCH),
        # Dispatch alone: no executor leases, so the admission window (flow control) would
        # hold every run past a tenant's first 128 in the waiting list; this measures the
        # claim-insert-advance-publish path, every run published at dispatch.
        "SUNDIAL_TENANT_WINDOW": "1000000",
    }
    bus = await connect_bus(stack.nats_config("admin"), name="bench")
    await ensure_streams(bus.jetstream)
    await bus.jetstream.purge_stream(RUNS_STREAM)
    etcd = await connect_etcd(stack.etcd_config())
    with tempfile.TemporaryDirectory(prefix="bench-dispatch-") as logs:
        services = Services(stack, Path(logs), env)
        try:
            for _ in range(replicas):
                await asyncio.to_thread(services.add, "scheduler")
            deadline = time.monotonic() + 30
            while True:
                keys = await etcd.get_prefix(f"/sundial/{cluster}/partitions/".encode())
                owners = {kv.value for kv in keys}
                if len(keys) == PARTITION_COUNT and len(owners) == replicas:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("schedulers did not share the partitions")
                await asyncio.sleep(0.1)
            consumer = f"bench-{uuid.uuid4().hex[:8]}"
            sub = await bus.jetstream.pull_subscribe(
                "sundial.runs.>", durable=consumer, stream=RUNS_STREAM
            )
            due = await make_due(url, 3.0)
            schedulers = [p.process.pid for p in services.processes.values() if p.process.pid]
            assert stack.postgres is not None and stack.postgres._process is not None
            postgres = stack.postgres._process.pid
            assert postgres is not None
            cpu_before = (sum(map(cpu_seconds, schedulers)), family_cpu(postgres))
            arrivals: dict[str, float] = {}
            duplicates = 0
            deadline = time.monotonic() + 600
            while len(arrivals) < count and time.monotonic() < deadline:
                try:
                    messages = await sub.fetch(100, timeout=1)
                except TimeoutError:
                    continue
                now = time.time()
                for message in messages:
                    dispatch = events_pb2.RunDispatch.FromString(message.data)
                    for ref in dispatch.runs:
                        at = timestamp_in(ref.scheduled_at, "scheduled_at")
                        key = f"{ref.job_id}@{at.isoformat()}"
                        duplicates += key in arrivals
                        arrivals.setdefault(key, now)
                    await message.ack()
            # CPU from 3 s before the due instant to the last arrival: the idle wait is
            # negligible (bench_idle), so this is the herd's cost.
            cpu = (
                sum(map(cpu_seconds, schedulers)) - cpu_before[0],
                family_cpu(postgres) - cpu_before[1],
            )
            await sub.unsubscribe()
            await bus.jetstream.delete_consumer(RUNS_STREAM, consumer)
            peak_mb = max(
                peak_rss_mb(p.process.pid) for p in services.processes.values() if p.process.pid
            )
        finally:
            await asyncio.to_thread(services.stop)
            await etcd.close()
            await bus.close()
    if len(arrivals) < count:
        raise RuntimeError(f"only {len(arrivals)} of {count} runs arrived")
    rows = await run_rows(url)
    if rows != count:
        raise RuntimeError(f"{rows} run rows for {count} occurrences")
    lateness = sorted(t - due.timestamp() for t in arrivals.values())
    elapsed = lateness[-1]
    return {
        "runs": len(arrivals),
        "seconds": round(elapsed, 3),
        "runs_per_s": round(len(arrivals) / elapsed),
        "lateness_p50_s": round(statistics.quantiles(lateness, n=100)[49], 3),
        "lateness_p99_s": round(statistics.quantiles(lateness, n=100)[98], 3),
        "missing": count - len(arrivals),
        "duplicate_messages": duplicates,
        "scheduler_peak_rss_mb": peak_mb,
        # CPU per 1,000 runs dispatched: the scheduler processes, and PostgreSQL.
        "scheduler_cpu_ms_per_1k": round(cpu[0] / count * 1e6, 1),
        "postgres_cpu_ms_per_1k": round(cpu[1] / count * 1e6, 1),
    }


async def run_rows(url: str) -> int:
    """Run rows in the database: one per occurrence (the primary key is the run key)."""
    conn = await asyncpg.connect(url)
    try:
        count: int = await conn.fetchval("SELECT count(*) FROM job_runs")
        return count
    finally:
        await conn.close()


async def main(jobs: int, durable: bool) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    with Stack(durable=durable) as stack:
        for connections in (1, 2):
            url = await fresh_database(stack, f"sql{connections}")
            assert stack.postgres is not None and stack.postgres._process is not None
            postgres = stack.postgres._process.pid
            assert postgres is not None
            results[f"bare_sql_{connections}"] = await bare_sql(url, jobs, connections, postgres)
        for replicas in (1, 2):
            url = await fresh_database(stack, f"sched{replicas}")
            results[f"scheduler_{replicas}"] = await scheduler_run(stack, url, jobs, replicas)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs", default="10000,100000", help="herd sizes, comma-separated (default: 10k, 100k)"
    )
    parser.add_argument(
        "--settings",
        default="fast,durable",
        help="PostgreSQL settings to run under: fast (fsync and synchronous_commit off, as "
        "the tests run), durable (both on), or both (default)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    every: dict[str, dict[str, dict[str, float]]] = {}
    for settings in args.settings.split(","):
        for jobs in (int(n) for n in args.jobs.split(",")):
            figures = asyncio.run(main(jobs, durable=settings == "durable"))
            every[f"{settings}/{jobs}"] = figures
            if args.json:
                continue
            switches = "on" if settings == "durable" else "off"
            print(
                f"dispatch of {jobs} jobs due at one instant (batch {BATCH}), PostgreSQL "
                f"{settings} (fsync and synchronous_commit {switches})"
            )
            for name, values in figures.items():
                print(f"  {name:14s} " + "  ".join(f"{k}={v}" for k, v in values.items()))
            for replicas in (1, 2):
                rate = figures[f"scheduler_{replicas}"]["runs_per_s"]
                ratios = ", ".join(
                    f"{rate / figures[f'bare_sql_{n}']['runs_per_s']:.2f} x bare_sql_{n}"
                    for n in (1, 2)
                )
                print(f"  scheduler_{replicas}: {ratios}")
    if args.json:
        json.dump(every, sys.stdout, indent=2)
        print()
