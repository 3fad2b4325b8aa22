"""Benchmark a job's SLO read (DescribeJob's ``slo``) on a job with many runs.

Run: ``python bench/bench_slo.py [--days 30] [--others 20] [--calls 200] [--json]``.

Seeds, on a fresh database with daily run partitions: one job firing every minute for
``--days`` days (43,200 scheduled runs for 30 days, 1 % of them started late and 0.5 %
dead, plus one skipped-misfire record a day), the same with a 30 s jitter, and
``--others`` jobs with as many runs each in the same partitions. Then times, in one
process on one connection pool, the API store's reads:

* ``describe_rest``: what DescribeJob read before the SLO (the job, its 10 latest runs,
  its active-run count): the same-run reference.
* ``slo_default``: the SLO over the default windows (1 h, 24 h, 7 days).
* ``slo_30d``: over 30 days (the whole run retention); ``slo_30d_jitter`` for the
  jittered job (one more query, for the runs whose verdict needs their own jitter).

Last, ``slo_30d_with_a_covering_index``: the same read once an index on ``(job_id,
scheduled_at) INCLUDE (tenant_id, kind, status, started_at)`` allows index-only scans
(what it would save; it is not in the schema, since every dispatch, lease and completion
would write it).

Each: PostgreSQL's CPU per call (from /proc, its backends included) and this process's
(asyncpg and the Python summing), and the ratio to ``describe_rest`` measured in the same
run. Also the plan of the SLO's run query (``EXPLAIN``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
from _common import cpu_seconds, family_cpu, fresh_database  # bench/: the script's folder

from sundial.api import slo
from sundial.api.jobs import compiled_of
from sundial.api.model import RunFilter
from sundial.api.store import Store, queries
from sundial.core.db import ensure_run_partitions, init_connection
from sundial.core.partition import partition_of
from sundial.devstack import Stack
from sundial.job import JobPolicies, policies_to_json, schedule_to_json
from sundial.schedule import IntervalSpec, Schedule

TENANT = "bench"
MINUTE = timedelta(minutes=1)


async def _job(conn: asyncpg.Connection, name: str, jitter: timedelta) -> uuid.UUID:
    job_id = uuid.uuid4()
    schedule = Schedule(IntervalSpec(MINUTE), jitter=jitter)
    await conn.execute(
        "INSERT INTO jobs (job_id, tenant_id, name, partition_id) VALUES ($1, $2, $3, $4)",
        job_id,
        TENANT,
        name,
        partition_of(job_id),
    )
    await conn.execute(
        "INSERT INTO job_definitions (job_id, schedule, target, policies, payload)"
        " VALUES ($1, $2::text::jsonb, $3::text::jsonb, $4::text::jsonb, '\\x7b7d')",
        job_id,
        json.dumps(schedule_to_json(schedule)),
        json.dumps({"http": {"url": "https://example.com/hook"}}),
        json.dumps(policies_to_json(JobPolicies())),
    )
    return job_id


async def _runs(conn: asyncpg.Connection, job_id: uuid.UUID, start: datetime, days: int) -> None:
    """A run a minute for ``days`` days: started 0.2 s after its nominal time, every
    100th 2 min late, every 200th dead; one skipped misfire record a day."""
    await conn.execute(
        "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind, status,"
        " attempt, started_at, finished_at, created_at, updated_at)"
        " SELECT $1, t, $2, $3, 'scheduled',"
        "   CASE WHEN i % 200 = 0 THEN 'dead' ELSE 'succeeded' END, 1,"
        "   t + CASE WHEN i % 100 = 0 THEN interval '2 minutes' ELSE interval '0.2 s' END,"
        "   t + interval '3 minutes', t, t"
        " FROM generate_series(0, $5 - 1) AS i,"
        "      LATERAL (SELECT $4::timestamptz + i * interval '1 minute' AS t) AS x",
        job_id,
        TENANT,
        partition_of(job_id),
        start,
        days * 1440,
    )
    await conn.execute(
        "INSERT INTO job_misfires (job_id, first_at, last_at, skipped, exact, recorded_at)"
        " SELECT $1, $2::timestamptz + d * interval '1 day' + interval '30 s',"
        "        $2::timestamptz + d * interval '1 day' + interval '150 s', 3, true,"
        "        $2::timestamptz + d * interval '1 day' + interval '200 s'"
        " FROM generate_series(0, $3 - 1) AS d",
        job_id,
        start,
        days,
    )


async def _measure(postgres_pid: int, calls: int, call: object) -> dict[str, float]:
    fn = call  # an async callable of no arguments
    await fn()  # type: ignore[operator]  # warm the statement caches
    db0, me0, t0 = family_cpu(postgres_pid), cpu_seconds(os.getpid()), time.perf_counter()
    for _ in range(calls):
        await fn()  # type: ignore[operator]
    wall = time.perf_counter() - t0
    db, me = family_cpu(postgres_pid) - db0, cpu_seconds(os.getpid()) - me0
    return {
        "postgres_cpu_ms_per_call": round(db / calls * 1000, 2),
        "client_cpu_ms_per_call": round(me / calls * 1000, 2),
        "wall_ms_per_call": round(wall / calls * 1000, 2),
    }


async def main(days: int, others: int, calls: int) -> dict[str, object]:
    results: dict[str, object] = {}
    with Stack(durable=False) as stack:
        url = await fresh_database(stack, "slo")
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        start = now - days * 24 * 60 * MINUTE
        conn = await asyncpg.connect(url)
        try:
            await ensure_run_partitions(conn, start.date(), now.date() + timedelta(days=1))
            await conn.execute(
                "INSERT INTO tenants (tenant_id, name, signing_secret) VALUES ($1, $1, $2)",
                TENANT,
                b"s" * 32,
            )
            plain = await _job(conn, "plain", timedelta(0))
            jittered = await _job(conn, "jittered", timedelta(seconds=30))
            for job_id in [plain, jittered] + [
                await _job(conn, f"other-{i}", timedelta(0)) for i in range(others)
            ]:
                await _runs(conn, job_id, start, days)
            await conn.execute("VACUUM ANALYZE")
            results["runs"] = await conn.fetchval("SELECT count(*) FROM job_runs")
            results["runs_of_the_job"] = days * 1440
            plan = await conn.fetch(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + queries.slo_run_counts,
                plain,
                TENANT,
                [now - w for w in slo.DEFAULT_WINDOWS],
                now,
                timedelta(seconds=60),
                timedelta(0),
                now - max(slo.DEFAULT_WINDOWS),
            )
            lines = [str(r[0]) for r in plan]
            results["plan_default_windows"] = {
                "pkey_index_scans": sum("_pkey" in line and "Index" in line for line in lines),
                "seq_scans": sum("Seq Scan" in line for line in lines),
                "execution": next(line for line in lines if "Execution Time" in line).strip(),
            }
        finally:
            await conn.close()

        pool = await asyncpg.create_pool(url, min_size=1, max_size=1, init=init_connection)
        assert pool is not None
        store = Store(pool)
        postgres = stack.postgres._process
        assert postgres is not None and postgres.pid
        pid = postgres.pid
        job = await store.get_job(TENANT, plain)
        jittered_job = await store.get_job(TENANT, jittered)
        assert job is not None and jittered_job is not None

        async def rest() -> None:
            await store.get_job(TENANT, plain)
            await store.list_runs(TENANT, plain, RunFilter(), before=None, limit=10)
            await store.count_active_runs(plain)

        def slo_call(job_id: uuid.UUID, windows: tuple[timedelta, ...], compiled: object) -> object:
            async def call() -> None:
                at = datetime.now(UTC)
                counts, unsure, misfires = await store.slo_inputs(
                    TENANT,
                    job_id,
                    [at - w for w in windows],
                    at,
                    threshold=timedelta(seconds=60),
                    jitter=timedelta(seconds=30) if job_id == jittered else timedelta(0),
                )
                slo.summarise(
                    windows,
                    at,
                    timedelta(seconds=60),
                    compiled,  # type: ignore[arg-type]
                    counts=counts,
                    unsure=unsure,
                    misfires=misfires,
                )

            return call

        try:
            month = (timedelta(days=30),)
            reference = await _measure(pid, calls, rest)
            results["describe_rest"] = reference
            for name, call in (
                ("slo_default", slo_call(plain, slo.DEFAULT_WINDOWS, compiled_of(job))),
                ("slo_30d", slo_call(plain, month, compiled_of(job))),
                ("slo_30d_jitter", slo_call(jittered, month, compiled_of(jittered_job))),
            ):
                figures = await _measure(pid, calls, call)
                figures["postgres_cpu_ratio_to_describe_rest"] = round(
                    figures["postgres_cpu_ms_per_call"]
                    / max(reference["postgres_cpu_ms_per_call"], 0.01),
                    1,
                )
                results[name] = figures
            # What a covering index would save (not in the schema: every dispatch, lease
            # and completion would write it).
            await pool.execute(
                "CREATE INDEX bench_slo_covering ON job_runs (job_id, scheduled_at)"
                " INCLUDE (tenant_id, kind, status, started_at)"
            )
            await pool.execute("VACUUM ANALYZE job_runs")
            figures = await _measure(pid, calls, slo_call(plain, month, compiled_of(job)))
            figures["postgres_cpu_ratio_to_slo_30d"] = round(
                figures["postgres_cpu_ms_per_call"]
                / max(results["slo_30d"]["postgres_cpu_ms_per_call"], 0.01),  # type: ignore[index]
                2,
            )
            results["slo_30d_with_a_covering_index"] = figures
        finally:
            await pool.close()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--others", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = asyncio.run(main(args.days, args.others, args.calls))
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        print("SLO read of a job with a run a minute, beside DescribeJob's other reads")
        for key, value in out.items():
            print(f"  {key}: {value}")
