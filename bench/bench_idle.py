"""Benchmark what Sundial costs while nothing is due, and what its services weigh.

Run: ``python bench/bench_idle.py [--jobs 10000,1000000] [--seconds 30] [--json]``.

For each stored-job count (default 10k and 1M, every job due a day from now, none
earlier), with the API, one scheduler and one executor running on the local stack:

* ``scheduler_core``, ``api_core``, ``executor_core``: CPU of each service process over a
  ``--seconds`` window after a warm-up, as a share of one core;
* ``postgres_core``: CPU of every PostgreSQL process over the same window (what the
  services' polling costs the database);
* ``*_rss_mb``: each service's peak resident memory (VmHWM) at the end.

The idle cost must not grow with the number of stored jobs: the dispatcher probes one
index entry per owned partition (next_due_at), the sweeper one index range per partition
of runs whose check is due; the ratio 1M / 10k is printed. PostgreSQL runs with the fast
settings (fsync and synchronous_commit off); no write happens while idle, so durable
settings would not change the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from sundial.core.db import migrate
from sundial.core.partition import partition_of
from sundial.devstack import Services, Stack
from sundial.run import JobPolicies, policies_to_json, schedule_to_json
from sundial.schedule import CronSpec, Schedule

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
SCHEDULE = schedule_to_json(Schedule(CronSpec("0 0 * * *")))
POLICIES = policies_to_json(JobPolicies())
TARGET = {"http": {"url": "https://example.com/hook"}}
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory (VmHWM) of process ``pid``, MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def family(root: int) -> list[int]:
    """``root`` and every live process whose parent it is (PostgreSQL's backends)."""
    pids = [root]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if int(stat.read().rsplit(") ", 1)[1].split()[1]) == root:
                    pids.append(int(entry))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return pids


def family_cpu(root: int) -> float:
    """CPU seconds of ``root`` and its children, those that exited included (a closed
    connection's backend is gone, its CPU counted in the postmaster's cutime/cstime)."""
    with open(f"/proc/{root}/stat") as stat:
        fields = stat.read().rsplit(") ", 1)[1].split()
    total = (int(fields[13]) + int(fields[14])) / TICKS
    for pid in family(root):
        try:
            total += cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name``."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def fresh_database(stack: Stack, label: str) -> str:
    """A new database on the stack's PostgreSQL, migrated; its URL."""
    name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(stack.database_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = with_database(stack.database_url, name)
    await migrate(url)
    return url


async def seeded_database(stack: Stack, count: int) -> str:
    """A fresh migrated database holding ``count`` jobs, each due a day from now."""
    url = await fresh_database(stack, "idle")
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO tenants (tenant_id, name, signing_secret) VALUES ('bench', 'bench', $1)",
            b"s" * 32,
        )
        for start in range(0, count, 50_000):
            ids = [uuid.uuid4() for _ in range(min(50_000, count - start))]
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO jobs (job_id, tenant_id, name, partition_id, next_run_at)"
                    " SELECT j, 'bench', 'job-' || j::text, p, now() + interval '1 day'"
                    " FROM unnest($1::uuid[], $2::smallint[]) AS u(j, p)",
                    ids,
                    [partition_of(i) for i in ids],
                )
                await conn.execute(
                    "INSERT INTO job_definitions (job_id, schedule, target, policies, payload)"
                    " SELECT j, $2, $3, $4, '\\x7b7d' FROM unnest($1::uuid[]) AS j",
                    ids,
                    json.dumps(SCHEDULE),
                    json.dumps(TARGET),
                    json.dumps(POLICIES),
                )
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
    return url


async def measure(stack: Stack, count: int, seconds: float) -> dict[str, float]:
    url = await seeded_database(stack, count)
    assert stack.postgres is not None and stack.postgres._process is not None
    postgres = stack.postgres._process.pid
    assert postgres is not None
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as logs:
        services = Services(
            stack,
            Path(logs),
            {
                "SUNDIAL_DATABASE_URL": url,
                "SUNDIAL_ADMIN_TOKEN": ADMIN_TOKEN,
                "SUNDIAL_CLUSTER": f"idle{uuid.uuid4().hex[:6]}",
                "SUNDIAL_LOG_LEVEL": "WARNING",
            },
        )
        try:
            await asyncio.to_thread(services.start)
            pids = {name: p.process.pid for name, p in services.processes.items()}
            await asyncio.sleep(5)  # membership settles, caches warm
            before = {name: cpu_seconds(pid) for name, pid in pids.items() if pid}
            pg_before = family_cpu(postgres)
            began = time.monotonic()
            await asyncio.sleep(seconds)
            elapsed = time.monotonic() - began
            figures: dict[str, float] = {"jobs": count}
            for name, pid in pids.items():
                assert pid is not None
                figures[f"{name}_core"] = round((cpu_seconds(pid) - before[name]) / elapsed, 4)
            figures["postgres_core"] = round((family_cpu(postgres) - pg_before) / elapsed, 4)
            for name, pid in pids.items():
                assert pid is not None
                figures[f"{name}_rss_mb"] = peak_rss_mb(pid)
        finally:
            await asyncio.to_thread(services.stop)
    return figures


async def main(counts: list[int], seconds: float) -> list[dict[str, float]]:
    with Stack(durable=False) as stack:
        return [await measure(stack, count, seconds) for count in counts]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="10000,1000000")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.jobs.split(",")]
    results = asyncio.run(main(counts, args.seconds))
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        raise SystemExit(0)
    print(f"idle cost, nothing due, {args.seconds:g} s window (share of one core)")
    for figures in results:
        print("  " + "  ".join(f"{k}={v}" for k, v in figures.items()))
    if len(results) >= 2:
        low, high = results[0], results[-1]
        for key in ("scheduler_core", "postgres_core"):
            ratio = high[key] / low[key] if low[key] else float("inf")
            print(f"  {key}: {ratio:.2f} x at {high['jobs']:.0f} jobs vs {low['jobs']:.0f}")
