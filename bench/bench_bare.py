"""The reference for what a run costs: the seed's algorithm done bare (issue 29).

Run: ``python bench/bench_bare.py URL TARGET_URL COUNT [seed|sundial|rows]`` prints ``ready``
once its jobs are seeded, ``done`` once every run is recorded, then one JSON line;
normally ``bench_e2e.py`` runs it (``--bare``, on by default) in the same run as
Sundial's herd, on the same PostgreSQL and against the same target, and reports the
ratios.

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

``sundial`` (the fourth argument) is the same loop writing what Sundial's features write
per run, on copies of Sundial's own tables (``LIKE`` with their defaults, constraints,
indexes and fill factors; no foreign key): where the seed's loop costs less than
Sundial, this tells how much of the difference is the writes themselves and how much is
the way Sundial makes them. Per run, as Sundial's herd does (``bench/results/e2e.txt``):

* the claim transaction inserts the run *waiting* (``queued``, dispatch sequence 0) with
  its waiting-list row (``run_waits``) and advances the job (``fired_count``,
  ``last_fire_at``, lateness, as ``advance_jobs``);
* an admission transaction per 128 runs (the tenant window) deletes the waiting rows and
  gives the runs their dispatch sequence and publish deadline (``admit_runs``);
* the lease writes the grant's columns (``grant_runs``: attempt, a new lease id, the
  lease end as ``check_at``);
* the record writes the success's columns (``record_successes``) and adds it to the
  job's stats row (``record_completion_stats``), in one transaction.

Each is one plain statement over the batch's keys: none of Sundial's row locks before an
update, advisory locks, definition reads, fencing reads or NATS and gRPC hops.

``rows`` makes the same writes on the same tables with their primary keys only, and the
claim's due index the seed's loop has too (no other secondary index): what the number of
row writes costs whatever the indexes.
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


SUNDIAL_SCHEMA = """
DROP TABLE IF EXISTS bare_runs, bare_jobs, bare_waits, bare_stats;
DROP SEQUENCE IF EXISTS bare_seq;
CREATE TABLE bare_jobs (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)
    WITH (fillfactor = 80);
ALTER TABLE bare_jobs ADD COLUMN url text NOT NULL;
CREATE TABLE bare_runs (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS
                        INCLUDING INDEXES) PARTITION BY RANGE (scheduled_at);
CREATE TABLE bare_runs_all PARTITION OF bare_runs DEFAULT WITH (fillfactor = 90);
CREATE TABLE bare_waits (LIKE run_waits INCLUDING DEFAULTS INCLUDING CONSTRAINTS
                         INCLUDING INDEXES);
CREATE TABLE bare_stats (LIKE job_stats INCLUDING DEFAULTS INCLUDING CONSTRAINTS
                         INCLUDING INDEXES) WITH (fillfactor = 70);
CREATE SEQUENCE bare_seq;
"""

ROWS_SCHEMA = """
DROP TABLE IF EXISTS bare_runs, bare_jobs, bare_waits, bare_stats;
DROP SEQUENCE IF EXISTS bare_seq;
CREATE TABLE bare_jobs (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    WITH (fillfactor = 80);
ALTER TABLE bare_jobs ADD PRIMARY KEY (job_id), ADD COLUMN url text NOT NULL;
CREATE INDEX bare_jobs_due ON bare_jobs (partition_id, next_run_at) WHERE NOT paused;
CREATE TABLE bare_runs (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
                        PRIMARY KEY (job_id, scheduled_at)) PARTITION BY RANGE (scheduled_at);
CREATE TABLE bare_runs_all PARTITION OF bare_runs DEFAULT WITH (fillfactor = 90);
CREATE TABLE bare_waits (LIKE run_waits INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
                         PRIMARY KEY (job_id, scheduled_at));
CREATE TABLE bare_stats (LIKE job_stats INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
                         PRIMARY KEY (job_id)) WITH (fillfactor = 70);
CREATE SEQUENCE bare_seq;
"""

SUNDIAL_CLAIM = """
WITH due AS (
    SELECT job_id, partition_id, next_run_at, url
      FROM bare_jobs
     WHERE partition_id = ANY($1::smallint[]) AND NOT paused
       AND next_run_at <= now()
     ORDER BY next_run_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
), runs AS (
    INSERT INTO bare_runs (job_id, scheduled_at, tenant_id, partition_id, kind, status,
                           dispatch_seq, created_at, updated_at)
    SELECT job_id, next_run_at, 'bare', partition_id, 'scheduled', 'queued', 0, now(), now()
      FROM due
), waits AS (
    INSERT INTO bare_waits (job_id, scheduled_at, tenant_id, partition_id, priority, due_at,
                            rate_key)
    SELECT job_id, next_run_at, 'bare', partition_id, 3, next_run_at, '' FROM due
), advanced AS (
    UPDATE bare_jobs j
       SET next_run_at = NULL, fired_count = j.fired_count + 1, last_fire_at = due.next_run_at,
           last_lateness_ms = (extract(epoch FROM now() - due.next_run_at) * 1000)::bigint
      FROM due WHERE j.job_id = due.job_id
)
SELECT due.job_id, due.next_run_at, due.url FROM due
"""

SUNDIAL_ADMIT = """
WITH k AS (
    SELECT * FROM unnest($1::uuid[], $2::timestamptz[]) AS k(job_id, scheduled_at)
), gone AS (
    -- Each key probed (OFFSET 0), as admit_runs does: a join was planned as a scan of the
    -- whole waiting list per call.
    DELETE FROM bare_waits w
     USING k CROSS JOIN LATERAL (
               SELECT v.ctid AS wait_row FROM bare_waits v
                WHERE v.job_id = k.job_id AND v.scheduled_at = k.scheduled_at OFFSET 0) AS x
     WHERE w.ctid = x.wait_row
    RETURNING w.job_id, w.scheduled_at, w.due_at
)
UPDATE bare_runs r
   SET dispatch_seq = nextval('bare_seq'), check_at = now() + interval '30 seconds',
       updated_at = now(),
       lateness_ms = greatest(0, (extract(epoch FROM now() - g.due_at) * 1000)::bigint)
  FROM gone g
 WHERE r.job_id = g.job_id AND r.scheduled_at = g.scheduled_at
"""

SUNDIAL_LEASE = """
UPDATE bare_runs r
   SET status = 'running', attempt = r.attempt + 1,
       lease_until = now() + interval '60 seconds', check_at = now() + interval '60 seconds',
       executor_id = 'bare', lease_id = gen_random_uuid(), lease_token_id = $3::uuid,
       started_at = coalesce(r.started_at, now()), next_attempt_at = NULL, updated_at = now()
  FROM unnest($1::uuid[], $2::timestamptz[]) AS k(job_id, scheduled_at)
 WHERE r.job_id = k.job_id AND r.scheduled_at = k.scheduled_at
RETURNING r.job_id, r.scheduled_at, r.attempt
"""

SUNDIAL_RECORD = """
UPDATE bare_runs r
   SET status = CASE WHEN u.status = 'succeeded' THEN 'succeeded' ELSE 'dead' END,
       check_at = NULL, next_attempt_at = NULL, finished_at = now(),
       lease_until = NULL, last_http_status = 200, updated_at = now()
  FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::text[])
       AS u(job_id, scheduled_at, attempt, status)
 WHERE r.job_id = u.job_id AND r.scheduled_at = u.scheduled_at AND r.attempt = u.attempt
   AND CASE WHEN r.status = 'running' THEN true ELSE false END
RETURNING r.job_id, r.status
"""

SUNDIAL_STATS = """
UPDATE bare_stats s
   SET succeeded_count = s.succeeded_count + 1, last_success_at = now(), updated_at = now()
  FROM unnest($1::uuid[]) AS u(job_id)
 WHERE s.job_id = u.job_id
"""

ADMIT_CHUNK = 128
"""Runs per admission transaction: Sundial's tenant window."""


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def seed(pool: asyncpg.Pool, url: str, count: int, due: datetime, writes: str) -> None:
    async with pool.acquire() as conn:
        ids = [uuid.uuid4() for _ in range(count)]
        if writes == "seed":
            await conn.execute(SCHEMA)
            await conn.copy_records_to_table(
                "bare_jobs",
                records=[(job_id, i % PARTITIONS, due, url) for i, job_id in enumerate(ids)],
                columns=["job_id", "partition_id", "next_run_at", "url"],
            )
        else:
            await conn.execute(SUNDIAL_SCHEMA if writes == "sundial" else ROWS_SCHEMA)
            await conn.copy_records_to_table(
                "bare_jobs",
                records=[
                    (job_id, "bare", f"job-{i}", i % PARTITIONS, due, url)
                    for i, job_id in enumerate(ids)
                ],
                columns=["job_id", "tenant_id", "name", "partition_id", "next_run_at", "url"],
            )
            await conn.copy_records_to_table(
                "bare_stats", records=[(job_id,) for job_id in ids], columns=["job_id"]
            )
            await conn.execute("ANALYZE bare_stats")
        await conn.execute("ANALYZE bare_jobs")


async def run(database_url: str, url: str, count: int, writes: str = "seed") -> dict[str, object]:
    pool = await asyncpg.create_pool(database_url, min_size=CLAIMERS + 2, max_size=CLAIMERS + 2)
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    await seed(pool, url, count, due, writes)
    print("ready", flush=True)  # the caller starts measuring PostgreSQL's CPU here
    calls: asyncio.Queue[tuple[uuid.UUID, datetime, str, int]] = asyncio.Queue()
    results: asyncio.Queue[tuple[uuid.UUID, datetime, int, str]] = asyncio.Queue()
    claimed = done = 0
    finished = asyncio.Event()
    partitions = list(range(PARTITIONS))
    sundial = writes != "seed"  # Sundial's writes (on its indexes or on keys alone)
    claim = SUNDIAL_CLAIM if sundial else CLAIM
    chunk = ADMIT_CHUNK if sundial else BATCH
    token = uuid.uuid4()

    async def claimer() -> None:
        nonlocal claimed
        while claimed < count:
            async with pool.acquire() as conn:
                async with conn.transaction():
                    rows = await conn.fetch(claim, partitions, BATCH)
                if not rows:
                    await asyncio.sleep(0.002)  # nothing due yet: look again soon
                    continue
                leased = []
                for start in range(0, len(rows), chunk):
                    keys = (
                        [r["job_id"] for r in rows[start : start + chunk]],
                        [r["next_run_at"] for r in rows[start : start + chunk]],
                    )
                    if sundial:
                        await conn.execute(SUNDIAL_ADMIT, *keys)
                        leased += await conn.fetch(SUNDIAL_LEASE, *keys, token)
                    else:
                        leased += await conn.fetch(LEASE, *keys)
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
            cols = [list(c) for c in zip(*batch, strict=True)]
            if sundial:
                async with pool.acquire() as conn, conn.transaction():
                    ended = await conn.fetch(SUNDIAL_RECORD, *cols)
                    # Only the successes written count (Sundial's counts dead runs too, and
                    # its failure policy's streak; a herd here has none).
                    succeeded = [r["job_id"] for r in ended if r["status"] == "succeeded"]
                    await conn.execute(SUNDIAL_STATS, succeeded)
            else:
                await pool.execute(RECORD, *cols)
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
    await pool.execute("DROP TABLE IF EXISTS bare_runs, bare_jobs, bare_waits, bare_stats")
    await pool.execute("DROP SEQUENCE IF EXISTS bare_seq")
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
    writes = sys.argv[4] if len(sys.argv) > 4 else "seed"
    if writes not in ("seed", "sundial", "rows"):
        raise SystemExit(f"writes must be seed, sundial or rows, not {writes!r}")
    print(json.dumps(uvloop.run(run(database_url, url, count, writes))), flush=True)


if __name__ == "__main__":
    main()
