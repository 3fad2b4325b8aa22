"""The reference for what a run costs: the seed's algorithm done bare (issue 29).

Run: ``python bench/bench_bare.py URL TARGET_URL COUNT`` prints ``ready`` once its jobs
are seeded, ``done`` once every run is recorded, then one JSON line; normally
``bench_e2e.py`` runs it (``--bare``, on by default) in the same run as Sundial's herd,
on the same PostgreSQL and against the same target, and reports the ratios.

One Python process (asyncpg and aiohttp on uvloop) on two tables of its own, each with
its primary key, and one partial index, nothing else:

* ``bare_jobs (job_id, partition_id, next_run_at, url)``, due index
  ``(partition_id, next_run_at) WHERE next_run_at IS NOT NULL``;
* ``bare_runs (job_id, scheduled_at, status, attempt, finished_at)``.

``COUNT`` one-time jobs over 256 partitions fall due at one instant. Claimers (4, as
Sundial's dispatch workers) loop: claim up to 500 due rows ``FOR UPDATE SKIP LOCKED``,
insert their runs and advance the jobs in one transaction, lease the batch (``UPDATE
... SET attempt = attempt + 1 ... RETURNING attempt``, durable), and hand the runs to 256
calls in flight, each a POST with the run's ``Idempotency-Key`` and
``Sundial-Scheduled-At``; results are recorded in batches, fenced on the attempt. Its
own CPU is this process's; PostgreSQL's is measured by the caller over the same span.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import aiohttp
import asyncpg

PARTITIONS = 256
BATCH = 500
CLAIMERS = 4
IN_FLIGHT = 256
RECORD_BATCH = 200
RECORD_WAIT_S = 0.005

SCHEMA = """
DROP TABLE IF EXISTS bare_runs, bare_jobs;
CREATE TABLE bare_jobs (
    job_id       uuid PRIMARY KEY,
    partition_id smallint NOT NULL,
    next_run_at  timestamptz,
    url          text NOT NULL
);
CREATE INDEX bare_jobs_due ON bare_jobs (partition_id, next_run_at)
    WHERE next_run_at IS NOT NULL;
CREATE TABLE bare_runs (
    job_id       uuid NOT NULL,
    scheduled_at timestamptz NOT NULL,
    status       text NOT NULL,
    attempt      integer NOT NULL DEFAULT 0,
    finished_at  timestamptz,
    PRIMARY KEY (job_id, scheduled_at)
);
"""

CLAIM = """
WITH due AS (
    SELECT job_id, next_run_at, url
      FROM bare_jobs
     WHERE partition_id = ANY($1::smallint[]) AND next_run_at IS NOT NULL
       AND next_run_at <= now()
     ORDER BY next_run_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
), runs AS (
    INSERT INTO bare_runs (job_id, scheduled_at, status)
    SELECT job_id, next_run_at, 'queued' FROM due
    RETURNING job_id, scheduled_at
), advanced AS (
    UPDATE bare_jobs j SET next_run_at = NULL FROM due WHERE j.job_id = due.job_id
)
SELECT due.job_id, due.next_run_at, due.url FROM due
"""

LEASE = """
UPDATE bare_runs r
   SET attempt = r.attempt + 1, status = 'running'
  FROM unnest($1::uuid[], $2::timestamptz[]) AS k(job_id, scheduled_at)
 WHERE r.job_id = k.job_id AND r.scheduled_at = k.scheduled_at
RETURNING r.job_id, r.scheduled_at, r.attempt
"""

RECORD = """
UPDATE bare_runs r
   SET status = u.status, finished_at = now()
  FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::text[])
       AS u(job_id, scheduled_at, attempt, status)
 WHERE r.job_id = u.job_id AND r.scheduled_at = u.scheduled_at AND r.attempt = u.attempt
"""


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def seed(pool: asyncpg.Pool, url: str, count: int, due: datetime) -> None:
    async with pool.acquire() as conn:
        await conn.execute(SCHEMA)
        ids = [uuid.uuid4() for _ in range(count)]
        await conn.copy_records_to_table(
            "bare_jobs",
            records=[(job_id, i % PARTITIONS, due, url) for i, job_id in enumerate(ids)],
            columns=["job_id", "partition_id", "next_run_at", "url"],
        )
        await conn.execute("ANALYZE bare_jobs")


async def run(database_url: str, url: str, count: int) -> dict[str, object]:
    pool = await asyncpg.create_pool(database_url, min_size=CLAIMERS + 2, max_size=CLAIMERS + 2)
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    await seed(pool, url, count, due)
    print("ready", flush=True)  # the caller starts measuring PostgreSQL's CPU here
    calls: asyncio.Queue[tuple[uuid.UUID, datetime, str, int]] = asyncio.Queue()
    results: asyncio.Queue[tuple[uuid.UUID, datetime, int, str]] = asyncio.Queue()
    claimed = done = 0
    finished = asyncio.Event()
    partitions = list(range(PARTITIONS))

    async def claimer() -> None:
        nonlocal claimed
        while claimed < count:
            async with pool.acquire() as conn:
                async with conn.transaction():
                    rows = await conn.fetch(CLAIM, partitions, BATCH)
                if not rows:
                    await asyncio.sleep(0.002)  # nothing due yet: look again soon
                    continue
                leased = await conn.fetch(
                    LEASE, [r["job_id"] for r in rows], [r["next_run_at"] for r in rows]
                )
            urls = {r["job_id"]: r["url"] for r in rows}
            claimed += len(leased)
            for r in leased:
                calls.put_nowait((r["job_id"], r["scheduled_at"], urls[r["job_id"]], r["attempt"]))

    async def caller(session: aiohttp.ClientSession) -> None:
        while True:
            job_id, scheduled_at, target, attempt = await calls.get()
            headers = {
                "Idempotency-Key": f"{job_id}@{_stamp(scheduled_at)}",
                "Sundial-Scheduled-At": _stamp(scheduled_at),
                "Content-Type": "application/json",
            }
            try:
                async with session.post(target, data=b"{}", headers=headers) as response:
                    await response.read()
                    status = "succeeded" if response.status < 300 else "failed"
            except aiohttp.ClientError:
                status = "failed"
            results.put_nowait((job_id, scheduled_at, attempt, status))

    async def recorder() -> None:
        nonlocal done
        while done < count:
            batch = [await results.get()]
            deadline = time.monotonic() + RECORD_WAIT_S
            while len(batch) < RECORD_BATCH:
                try:
                    batch.append(await asyncio.wait_for(results.get(), deadline - time.monotonic()))
                except TimeoutError:
                    break
            cols = list(zip(*batch, strict=True))
            await pool.execute(RECORD, *(list(c) for c in cols))
            done += len(batch)
        finished.set()

    connector = aiohttp.TCPConnector(limit=IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        await asyncio.sleep(max(0.0, due.timestamp() - time.time()))  # until the instant
        started = time.process_time()
        tasks = [asyncio.create_task(claimer()) for _ in range(CLAIMERS)]
        tasks += [asyncio.create_task(caller(session)) for _ in range(IN_FLIGHT)]
        tasks.append(asyncio.create_task(recorder()))
        await asyncio.wait_for(finished.wait(), timeout=600)
        cpu_s = time.process_time() - started
        # Before any connection closes: a backend that exits takes its CPU time with it.
        print("done", flush=True)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    last = await pool.fetchval("SELECT max(finished_at) FROM bare_runs")
    succeeded = await pool.fetchval("SELECT count(*) FROM bare_runs WHERE status = 'succeeded'")
    await pool.execute("DROP TABLE bare_runs, bare_jobs")
    await pool.close()
    seconds = last.timestamp() - due.timestamp()
    return {
        "runs": count,
        "succeeded": succeeded,
        "runs_per_s": round(count / seconds),
        "process_cpu_us_per_run": round(cpu_s / count * 1e6),
        "due": due.timestamp(),
    }


def main() -> None:
    import uvloop  # noqa: PLC0415 (the bare process's loop)

    database_url, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(json.dumps(uvloop.run(run(database_url, url, count))), flush=True)


if __name__ == "__main__":
    main()
