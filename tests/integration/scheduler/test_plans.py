"""The statements that find runs by their keys probe primary keys, whatever the statistics.

A daily partition of ``job_runs`` analyzed before a herd believes it holds no queued or
running run. A statement that said ``r.status = 'queued'`` beside its keys was then
planned as a scan of a partial or status-keyed index filtered per key: one admission of
128 runs took 0.2-0.5 s, growing with the herd (queries.sql's conventions;
docs/design.md section 8, "Plans that stay index probes"). These tests build that
moment (history analyzed, autovacuum off, then thousands of live runs) and ask
PostgreSQL for the plan it would run, custom (this call's 128 keys) and generic (the
plan a prepared statement keeps): no read of a run or waiting row may go through an
index other than the primary key (see ``_by_key``). The admission's read of the next
waiting runs, which is not by keys, must read what it returns, not the whole list.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from sundial.core.config import DatabaseConfig
from sundial.core.db import close_pool, create_pool
from sundial.core.db._partitions import ensure_run_partitions, run_partition_name
from sundial.core.partition import partition_of
from sundial.scheduler.store._queries import queries
from tests.integration.scheduler.support import TENANT, add_tenant

HISTORY = 6_000
LIVE = 4_000
KEYS = 128
LEASE = uuid.uuid4()
NOW = datetime.now(UTC).replace(microsecond=0)

ArgsOf = Callable[[list[uuid.UUID]], tuple[Any, ...]]


def _admit(keys: list[uuid.UUID]) -> tuple[Any, ...]:
    n = len(keys)
    return (keys, [NOW] * n, list(range(1, n + 1)), NOW, NOW + timedelta(seconds=10), [False] * n)


def _held(keys: list[uuid.UUID]) -> tuple[Any, ...]:
    n = len(keys)
    return (keys, [NOW] * n, [1] * n, [str(LEASE)] * n)


# Each statement, the status its live runs have, and its arguments for KEYS of them.
STATEMENTS: dict[str, tuple[str, ArgsOf]] = {
    "admit_runs": ("queued", _admit),
    "extend_leases": (
        "running",
        lambda k: (*_held(k), "ex", NOW + timedelta(seconds=30), NOW),
    ),
    "regrant_leases": (
        "running",
        lambda k: (k, [NOW] * len(k), [1] * len(k), "ex", NOW + timedelta(seconds=30), NOW),
    ),
    "cancel_requested": ("running", _held),
    "clear_dead_letters": ("dead", lambda k: (k, [NOW] * len(k), [1] * len(k))),
    "dead_letters_of": ("dead", lambda k: (k, [NOW] * len(k))),
    "grant_runs": (
        "queued",
        lambda k: (k, [NOW] * len(k), "ex", NOW + timedelta(seconds=30), NOW, str(LEASE)),
    ),
    "lock_runs": ("queued", lambda k: (k, [NOW] * len(k))),
    "lock_runs_for_completion": ("running", lambda k: (k, [NOW] * len(k))),
}


async def _stale_database(pool: asyncpg.Pool, status: str) -> list[uuid.UUID]:
    """History analyzed with autovacuum off, then LIVE runs in ``status`` (a waiting row
    each when queued); returns the live runs' job ids."""
    async with pool.acquire() as conn:
        await ensure_run_partitions(conn, NOW.date() - timedelta(days=1), NOW.date())
        part = run_partition_name(NOW.date())

        async def runs(count: int, run_status: str) -> list[uuid.UUID]:
            ids = [uuid.uuid4() for _ in range(count)]
            await conn.execute(
                "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
                " dispatch_seq, attempt, executor_id, lease_id, check_at)"
                " SELECT j, $3::timestamptz, 'acme', p, $4::text,"
                " CASE WHEN $4::text = 'queued' THEN 0 ELSE 1 END, 1, 'ex', $5::uuid,"
                " CASE WHEN $4::text = 'dead' THEN $3::timestamptz END"
                " FROM unnest($1::uuid[], $2::smallint[]) AS u(j, p)",
                ids,
                [partition_of(i) for i in ids],
                NOW,
                run_status,
                LEASE,
            )
            return ids

        await runs(HISTORY, "succeeded")
        for table in (part, "run_waits"):
            await conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            await conn.execute(f"VACUUM ANALYZE {table}")
        live = await runs(LIVE, status)
        if status == "queued":
            await conn.execute(
                "INSERT INTO run_waits (job_id, scheduled_at, tenant_id, partition_id,"
                " priority, due_at, rate_key) SELECT j, $2, 'acme', 0, 1, $2, ''"
                " FROM unnest($1::uuid[]) AS u(j)",
                live,
                NOW,
            )
        return live


def _scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "Relation Name" in plan:
        yield plan
    for child in plan.get("Plans", ()):
        yield from _scans(child)


async def _plans(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...]) -> list[dict]:
    """The plan of ``sql`` with ``args`` as a custom plan and as the generic one."""
    plans = []
    for mode in ("force_custom_plan", "force_generic_plan"):
        await conn.execute(f"SET plan_cache_mode = {mode}")
        (explained,) = await conn.fetchrow("EXPLAIN (FORMAT JSON) " + sql, *args)
        # The pool's connections decode json (sundial.core.db.init_connection).
        plans.append(explained[0]["Plan"])
    return plans


@pytest.mark.parametrize("name", sorted(STATEMENTS))
async def test_a_statement_by_run_keys_probes_primary_keys_under_stale_statistics(
    pool: asyncpg.Pool, name: str
) -> None:
    status, args_of = STATEMENTS[name]
    live = await _stale_database(pool, status)
    sql = getattr(queries, name)
    async with pool.acquire() as conn:
        for plan in await _plans(conn, sql, args_of(live[-KEYS:])):
            reads = [
                (scan["Node Type"], scan["Relation Name"], scan.get("Index Name", ""))
                for scan in _scans(plan)
                if scan["Relation Name"].startswith(("job_runs", "run_waits"))
                and scan["Node Type"] != "ModifyTable"
            ]
            assert reads, f"{name}: no read of runs in {plan}"
            assert not [read for read in reads if not _by_key(*read)], (
                f"{name} reads runs by other than their keys: {reads}"
            )


@pytest.mark.parametrize("name", ["lock_runs", "lock_runs_for_completion"])
async def test_a_lock_by_run_keys_never_scans_a_partition(pool: asyncpg.Pool, name: str) -> None:
    """The locks of LeaseRuns and CompleteRuns probe each key: a scan of the day's runs,
    which the planner may cost below a probe per key and run partition, is never run."""
    status, args_of = STATEMENTS[name]
    live = await _stale_database(pool, status)
    async with pool.acquire() as conn:
        for plan in await _plans(conn, getattr(queries, name), args_of(live[-KEYS:])):
            scanned = [
                scan["Relation Name"]
                for scan in _scans(plan)
                if scan["Relation Name"].startswith("job_runs")
                and scan["Node Type"] not in ("Index Scan", "ModifyTable")
            ]
            assert not scanned, f"{name} reads runs other than by a probe: {scanned}"


async def test_a_dispatch_advances_its_jobs_by_probes_not_a_scan_of_every_job(
    pool: asyncpg.Pool,
) -> None:
    """A batch of 500 claimed jobs among 20,000 analyzed is written one probe per job
    (a join was planned as a seq scan of every job per batch)."""
    async with pool.acquire() as conn:  # the fixture added TENANT
        await conn.execute(
            "INSERT INTO jobs (tenant_id, name, partition_id, next_run_at)"
            " SELECT $1, 'job-' || i, i % 256, $2 FROM generate_series(1, 20000) AS i",
            TENANT,
            NOW,
        )
        await conn.execute("ANALYZE jobs")
        batch = [r["job_id"] for r in await conn.fetch("SELECT job_id FROM jobs LIMIT 500")]
        batch.sort()
        n = len(batch)
        args = (batch, [NOW + timedelta(minutes=1)] * n, [1] * n, [NOW] * n, [0] * n)
        for plan in await _plans(conn, queries.advance_jobs, args):
            reads = [
                (scan["Node Type"], scan.get("Index Name", ""))
                for scan in _scans(plan)
                if scan["Relation Name"] == "jobs" and scan["Node Type"] != "ModifyTable"
            ]
            assert reads, f"no read of jobs in {plan}"
            assert set(reads) <= {("Index Scan", "jobs_pkey"), ("Tid Scan", "")}, reads


async def _blocks_read(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...]) -> int:
    """The buffers ``sql`` touched when run with ``args`` (a function's own statement
    included), after one run to warm the catalog caches."""
    await conn.fetch(sql, *args)
    (explained,) = await conn.fetchrow("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, *args)
    plan = explained[0]["Plan"]
    assert plan["Actual Rows"] == args[3], plan
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


async def test_an_admission_pass_reads_the_waiting_runs_it_takes_not_the_whole_list(
    pool: asyncpg.Pool,
) -> None:
    """The next waiting runs are read in the waiting list's index order: analyzed while
    the list was empty, the planner read every waiting row of the tenant with a bitmap
    scan and sorted them, for each pass of a herd (migration 0027). A pass's reads stay
    the same when four times as many runs wait."""
    await _stale_database(pool, "queued")  # LIVE waiting runs, run_waits analyzed empty
    args = ("acme", [0], None, KEYS, [])
    async with pool.acquire() as conn:
        await conn.execute("SET plan_cache_mode = force_custom_plan")
        first = await _blocks_read(conn, queries.next_waiting, args)
        # Three times as many runs again, due after the ones a pass takes first.
        await conn.execute(
            "INSERT INTO run_waits (job_id, scheduled_at, tenant_id, partition_id, priority,"
            " due_at, rate_key) SELECT j, $2, 'acme', 0, 1, $2, '' FROM unnest($1::uuid[]) AS u(j)",
            [uuid.uuid4() for _ in range(3 * LIVE)],
            NOW + timedelta(seconds=1),
        )
        pages = await conn.fetchval(
            "SELECT pg_relation_size('run_waits') / current_setting('block_size')::int"
        )
        for mode in ("force_custom_plan", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            read = await _blocks_read(conn, queries.next_waiting, args)
            assert read <= first + 2, f"{mode}: {read} buffers with 4x the runs, {first} before"
            assert read < pages / 10, f"{mode}: {read} buffers of a {pages}-page waiting list"


def _by_key(node: str, relation: str, index: str) -> bool:
    """A primary-key probe, or a fetch by the row address one returned; or a scan of a
    run partition, which the planner costs by the partition's real size (a waiting list
    is never scanned: an admission's cost must not grow with the herd)."""
    if node == "Tid Scan":
        return True
    if node in ("Index Scan", "Index Only Scan", "Bitmap Index Scan"):
        return index.endswith("_pkey")
    if node == "Bitmap Heap Scan":
        return True  # its Bitmap Index Scan child is judged
    return node == "Seq Scan" and relation.startswith("job_runs")


# Statements of a lease and a completion whose plan, made while the tables were small,
# scans them once a herd filled them, with arguments for queued runs `keys` due at NOW
# (grant_runs' lease runs until a minute later; the stats count one success each).
SMALL_THEN_HERD: dict[str, ArgsOf] = {
    "lock_runs": lambda k: (k, [NOW] * len(k)),
    "grant_runs": lambda k: (
        k,
        [NOW] * len(k),
        "ex",
        NOW + timedelta(minutes=1),
        NOW,
        str(LEASE),
    ),
    "record_completion_stats": lambda k: (
        k,
        [1] * len(k),
        [0] * len(k),
        [0] * len(k),
        [NOW] * len(k),
        [None] * len(k),
        NOW,
    ),
}


async def _jobs_with_queued_runs(conn: asyncpg.Connection, count: int) -> list[uuid.UUID]:
    """``count`` jobs of TENANT, each with its definition, its stats row and a queued run
    due at NOW (as a dispatch leaves them)."""
    ids = sorted(uuid.uuid4() for _ in range(count))
    parts = [partition_of(i) for i in ids]
    await conn.execute(
        "INSERT INTO jobs (job_id, tenant_id, name, partition_id)"
        " SELECT j, $3, 'job-' || j, p FROM unnest($1::uuid[], $2::smallint[]) AS u(j, p)",
        ids,
        parts,
        TENANT,
    )
    await conn.execute(
        "INSERT INTO job_definitions (job_id, schedule, target, policies, payload)"
        " SELECT j, $2, $3, $4, '\\x7b7d' FROM unnest($1::uuid[]) AS j",
        ids,
        {"cron": {"expr": "* * * * *"}},
        {"http": {"url": "https://crm.example.com/sync", "method": "POST", "timeout": "30s"}},
        {"retry": {"max_attempts": 3, "initial_backoff": "1s"}, "overlap": "allow"},
    )
    await conn.execute("INSERT INTO job_stats (job_id) SELECT unnest($1::uuid[])", ids)
    await conn.execute(
        "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
        " dispatch_seq) SELECT j, $3, $4, p, 'queued', 1"
        " FROM unnest($1::uuid[], $2::smallint[]) AS u(j, p)",
        ids,
        parts,
        NOW,
        TENANT,
    )
    return ids


SCANNED = "SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_xact_user_tables"
"""Rows read by sequential scans that this backend has not yet reported (at most every
second): read before and after a statement, the difference is the statement's."""


async def _rows_scanned(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...]) -> int:
    """Rows ``sql`` read by sequential scans of tables, run once with ``args`` as the
    pool runs it (a prepared statement of the connection's cache), then rolled back."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        before = await conn.fetchval(SCANNED)
        await conn.fetch(sql, *args)
        return int(await conn.fetchval(SCANNED) - before)
    finally:
        await transaction.rollback()


@pytest.mark.parametrize("name", sorted(SMALL_THEN_HERD))
async def test_a_plan_made_on_small_tables_is_made_again_once_a_herd_filled_them(
    migrated_database_url: str, name: str
) -> None:
    """A tenant creates a herd of 20,000 jobs minutes before they fire, into tables that
    held a few hundred rows when the lease's and completion's statements were first
    prepared. PostgreSQL kept the generic plan it made then (a scan of the small table
    was cheaper than probing it per key), and it kept scanning every job definition for
    each run of each lease, 70-110 ms a call, until autovacuum analyzed the tables
    (``bench_isolation.py --pgwork``). A statement is prepared again after
    ``plan_lifetime_s``, so the plan PostgreSQL keeps is made for the tables as they
    are. (The first five calls after a preparation are planned one by one, and those
    plans scan too for 128 keys: the test waits for the plan that is kept.)"""
    config = DatabaseConfig(database_url=migrated_database_url, plan_lifetime_s=5)
    pool = await create_pool(config, application_name="test-plans")
    try:
        await add_tenant(pool)
        sql, args_of = getattr(queries, name), SMALL_THEN_HERD[name]
        async with pool.acquire() as conn:
            # The partitions a scheduler keeps: today's and a week ahead.
            await ensure_run_partitions(conn, NOW.date(), NOW.date() + timedelta(days=7))
            tables = ("jobs", "job_definitions", "job_stats", run_partition_name(NOW.date()))
            for table in tables:
                await conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            small = await _jobs_with_queued_runs(conn, 200)
            for table in tables:
                await conn.execute(f"ANALYZE {table}")
            prepared = time.monotonic()
            for _ in range(8):  # past the five calls after which a generic plan may be kept
                await _rows_scanned(conn, sql, args_of(small[:KEYS]))
            herd = await _jobs_with_queued_runs(conn, 20_000)
            keys = herd[:: len(herd) // KEYS][:KEYS]
            scanned = await _rows_scanned(conn, sql, args_of(keys))
            if time.monotonic() - prepared < config.plan_lifetime_s:  # the plan made before
                assert scanned >= 20_000, f"{name} probed at once: the stale moment was not built"
            deadline = time.monotonic() + 10 * config.plan_lifetime_s
            while scanned and time.monotonic() < deadline:  # one call after another
                scanned = await _rows_scanned(conn, sql, args_of(keys))
            assert scanned == 0, f"{name} still scans {scanned} rows for {KEYS} runs"
    finally:
        await close_pool(pool, 5.0)
