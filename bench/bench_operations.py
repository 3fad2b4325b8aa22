"""Benchmark operating many jobs (docs/design.md section 13, issue 28's done-when).

Run: ``python bench/bench_operations.py [--runs 10000000] [--run-jobs 100000]
[--jobs 1000000] [--pause 10000] [--calls 100]``.

Seeds, on a fresh database with daily run partitions over 30 days: ``--jobs`` jobs of
tenant ``bench`` (labels ``customer`` = i mod 300, so ``customer=42`` matches 1/300 of
them, and ``batch=pause`` on ``--pause`` of them), and ``--runs`` runs spread evenly over
the 30 days across the first ``--run-jobs`` jobs: 2 % dead, the newest 2,000 running,
the rest succeeded. Then, through the API's own code (RunManager, BulkActions, the
store), times:

* ``dead_last_hour``: tenant-wide ListRuns, status DEAD, scheduled in the last hour, a
  page of 50; ``running_now``: status RUNNING, a page of 50. Beside each, the same page
  as one plain indexed SELECT (``plain_*``), in the same run: the reference.
* ``count_selector``: CountJobs with ``customer=42`` over the ``--jobs`` jobs.
* ``pause_selector``: one PauseJobs call with ``batch=pause`` and a limit of
  ``--pause``: every job paused with a revision and an audit event (checked).
* ``retention_idle``: one retention pass (the API's, ``Retention.purge_once``) with
  nothing to delete, over the ``--jobs`` jobs' revisions; beside it ``plain_read_all``,
  one read of every revision (``count(*)``), what the pass did once per batch before
  migration 0028. ``retention_due``: one pass 91 days later, deleting the revisions
  the pause superseded (checked).

Each read: p50 and p99 wall time of ``--calls`` calls on one pool.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from _common import fresh_database  # bench/: the script's folder

from sundial.api.bulk import BulkActions
from sundial.api.model import JobFilter, RunFilter
from sundial.api.offload import Offload
from sundial.api.retention import Retention, RetentionPolicy
from sundial.api.runs import RunManager
from sundial.api.selector import parse_selector
from sundial.api.store import Store
from sundial.core.clock import ManualClock
from sundial.core.db import ensure_run_partitions, init_connection
from sundial.devstack import Stack
from sundial.job import JobPolicies, policies_to_json, schedule_to_json
from sundial.run import RunStatus
from sundial.schedule import CronSpec, Schedule

TENANT = "bench"
DAYS = 30
CHUNK = 1_000_000


async def seed(conn: asyncpg.Connection, args: argparse.Namespace, now: datetime) -> None:
    await conn.execute(
        "INSERT INTO tenants (tenant_id, name, signing_secret, max_jobs) VALUES ($1, $1, $2, $3)",
        TENANT,
        b"s" * 32,
        args.jobs,
    )
    schedule = json.dumps(schedule_to_json(Schedule(CronSpec("0 3 * * *"))))
    policies = json.dumps(policies_to_json(JobPolicies()))
    started = time.monotonic()
    for low in range(0, args.jobs, CHUNK):
        high = min(args.jobs, low + CHUNK)
        async with conn.transaction():
            await conn.execute(
                "CREATE TEMP TABLE seed ON COMMIT DROP AS"
                " SELECT i, gen_random_uuid() AS job_id FROM generate_series($1::int, $2::int) i",
                low,
                high - 1,
            )
            await conn.execute(
                "INSERT INTO jobs (job_id, tenant_id, name, partition_id, next_run_at)"
                " SELECT job_id, $1, 'job-' || lpad(i::text, 8, '0'), i % 256, $2 FROM seed",
                TENANT,
                now + timedelta(days=1),
            )
            await conn.execute(
                "INSERT INTO job_definitions (job_id, tenant_id, schedule, target, policies,"
                " labels)"
                " SELECT job_id, $1, $2::text::jsonb,"
                ' \'{"http": {"url": "https://example.com/hook"}}\'::jsonb, $3::text::jsonb,'
                " CASE WHEN i < $4 THEN jsonb_build_object('customer', (i % 300)::text,"
                "                                          'batch', 'pause')"
                "      ELSE jsonb_build_object('customer', (i % 300)::text) END"
                " FROM seed",
                TENANT,
                schedule,
                policies,
                args.pause,
            )
            await conn.execute("INSERT INTO job_stats (job_id) SELECT job_id FROM seed")
    await conn.execute("UPDATE tenants SET job_count = $2 WHERE tenant_id = $1", TENANT, args.jobs)
    print(f"seeded {args.jobs:,} jobs in {time.monotonic() - started:.0f} s", flush=True)
    started = time.monotonic()
    await conn.execute(
        "CREATE TABLE run_jobs AS SELECT job_id, (row_number() OVER (ORDER BY name) - 1)::int"
        " AS k FROM jobs WHERE name < 'job-' || lpad($1::int::text, 8, '0')",
        args.run_jobs,
    )
    span_s = DAYS * 86_400
    step = span_s / args.runs
    for low in range(0, args.runs, CHUNK):
        high = min(args.runs, low + CHUNK)
        await conn.execute(
            "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind, status,"
            " started_at, finished_at, attempt)"
            " SELECT j.job_id, $3::timestamptz - make_interval(secs => g * $4::float8),"
            "        $5, 0, 'scheduled',"
            "        CASE WHEN g < 2000 THEN 'running' WHEN g % 50 = 7 THEN 'dead'"
            "             ELSE 'succeeded' END,"
            "        $3::timestamptz - make_interval(secs => g * $4::float8 - 0.2),"
            "        CASE WHEN g < 2000 THEN NULL"
            "             ELSE $3::timestamptz - make_interval(secs => g * $4::float8 - 1) END,"
            "        1"
            "   FROM generate_series($1::bigint, $2::bigint) AS g"
            "   JOIN run_jobs j ON j.k = g % $6",
            low,
            high - 1,
            now,
            step,
            TENANT,
            args.run_jobs,
        )
        print(f"  {high:,} runs", flush=True)
    await conn.execute("ANALYZE")
    print(f"seeded {args.runs:,} runs in {time.monotonic() - started:.0f} s", flush=True)


async def timed(calls: int, call: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    await call()  # warm
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 2),
        "p99_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 2),
        "max_ms": round(samples[-1], 2),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    now = datetime.now(UTC).replace(microsecond=0)
    with Stack(durable=False) as stack:
        url = await fresh_database(stack, "operations")
        conn = await asyncpg.connect(url)
        try:
            await ensure_run_partitions(
                conn, (now - timedelta(days=DAYS + 1)).date(), (now + timedelta(days=2)).date()
            )
            await seed(conn, args, now)
        finally:
            await conn.close()
        pool = await asyncpg.create_pool(url, min_size=2, max_size=4, init=init_connection)
        try:
            store = Store(pool)
            clock = ManualClock(now)
            offload = Offload(share=1.0, burst_s=60.0)
            runs = RunManager(store, clock, offload=offload)
            bulk = BulkActions(store, clock, offload=offload)
            hour = RunFilter(
                statuses=frozenset({RunStatus.DEAD}), scheduled_after=now - timedelta(hours=1)
            )
            running = RunFilter(statuses=frozenset({RunStatus.RUNNING}))
            for name, run_filter, plain in (
                (
                    "dead_last_hour",
                    hour,
                    "SELECT * FROM job_runs WHERE tenant_id = $1 AND status = 'dead'"
                    " AND scheduled_at >= $2 ORDER BY scheduled_at DESC, job_id DESC LIMIT 51",
                ),
                (
                    "running_now",
                    running,
                    "SELECT * FROM job_runs WHERE tenant_id = $1 AND status = 'running'"
                    " AND $2::timestamptz IS NOT NULL"
                    " ORDER BY scheduled_at DESC, job_id DESC LIMIT 51",
                ),
            ):
                page = await runs.list_tenant_runs(
                    TENANT, run_filter, JobFilter(), page_size=50, page_token=""
                )
                results[name] = await timed(
                    args.calls,
                    lambda f=run_filter: runs.list_tenant_runs(
                        TENANT, f, JobFilter(), page_size=50, page_token=""
                    ),
                )
                results[name]["page"] = len(page.items)
                results[f"plain_{name}"] = await timed(
                    args.calls, lambda q=plain: pool.fetch(q, TENANT, now - timedelta(hours=1))
                )
            selector = JobFilter(selector=parse_selector("customer=42"))
            results["count_selector"] = await timed(
                min(args.calls, 50), lambda: bulk.count(TENANT, selector)
            )
            results["count_selector"]["count"] = await bulk.count(TENANT, selector)
            started = time.perf_counter()
            paused = await bulk.pause(
                TENANT,
                JobFilter(selector=parse_selector("batch=pause")),
                note="bench",
                until=None,
                dry_run=False,
                limit=args.pause,
            )
            seconds = time.perf_counter() - started
            revisions = await pool.fetchval(
                "SELECT count(*) FROM job_revisions WHERE tenant_id = $1 AND version = 2", TENANT
            )
            audited = await pool.fetchval(
                "SELECT count(*) FROM audit_events WHERE method LIKE '%/PauseJobs'"
            )
            results["pause_selector"] = {
                "seconds": round(seconds, 2),
                "affected": paused.affected,
                "remaining": paused.remaining,
                "revisions": revisions,
                "audit_events": audited,
            }
            retention = Retention(store, clock, RetentionPolicy(), interval_s=600)
            results["retention_idle"] = await timed(min(args.calls, 20), retention.purge_once)
            results["plain_read_all"] = await timed(
                min(args.calls, 5), lambda: pool.fetchval("SELECT count(*) FROM job_revisions")
            )
            clock.advance(91 * 86_400)
            started = time.perf_counter()
            purged = await retention.purge_once()
            results["retention_due"] = {
                "seconds": round(time.perf_counter() - started, 3),
                "deleted_revisions": purged["revisions"],
            }
            offload.close()
        finally:
            await pool.close()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000_000)
    parser.add_argument("--run-jobs", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--pause", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=100)
    parsed = parser.parse_args()
    print(json.dumps(vars(parsed)))
    out = asyncio.run(main(parsed))
    print(json.dumps(out, indent=2))
    sys.exit(0)
