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
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
from _common import (  # bench/: the script's folder
    cpu_seconds,
    family_cpu,
    fresh_database,
    peak_rss_mb,
    seed_jobs,
)

from sundial.devstack import Services, Stack

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"


async def seeded_database(stack: Stack, count: int) -> str:
    """A fresh migrated database holding ``count`` jobs, each due a day from now."""
    url = await fresh_database(stack, "idle")
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO tenants (tenant_id, name, signing_secret) VALUES ('bench', 'bench', $1)",
            b"s" * 32,
        )
        await seed_jobs(conn, count, next_run_at="now() + interval '1 day'", chunk=50_000)
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
