"""Schema, migrations, run partitions, the pool and SQLSTATE translation on real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from sundial.core import errors
from sundial.core.config import DatabaseConfig
from sundial.core.db import (
    MIGRATION_LOCK_KEY,
    Migration,
    MigrationError,
    close_pool,
    create_pool,
    drop_run_partitions_before,
    ensure_run_partitions,
    load_migrations,
    migrate,
    run_partition_name,
    translate_db_errors,
)
from tests.helpers.eventually import assert_eventually

LIBS = Path(__file__).resolve().parents[2] / "libs"
DAY = date(2031, 5, 17)


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to a freshly migrated database."""
    await migrate(database_url)
    connection = await asyncpg.connect(database_url)
    yield connection
    await connection.close()


async def _tenant(conn: asyncpg.Connection, tenant_id: str = "acme") -> str:
    await conn.execute(
        "INSERT INTO tenants (tenant_id, name, signing_secret) VALUES ($1, $1, $2)",
        tenant_id,
        os.urandom(32),
    )
    return tenant_id


async def _insert_run(
    conn: asyncpg.Connection, scheduled_at: datetime, status: str = "succeeded"
) -> str:
    """Insert a run (finished by default); return the name of the partition it landed in."""
    return await conn.fetchval(
        """
        INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status)
        VALUES ($1, $2, 'acme', 7, $3)
        RETURNING tableoid::regclass::text
        """,
        uuid.uuid4(),
        scheduled_at,
        status,
    )


def _at(day: date, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


# --- migrations ---------------------------------------------------------------------------


async def test_migrate_applies_everything_once_then_nothing(database_url: str) -> None:
    expected = [m.version for m in load_migrations()]
    assert expected[0] == "0001_initial"
    assert await migrate(database_url) == expected
    assert await migrate(database_url) == []

    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT version, checksum, applied_at FROM sundial_migrations")
        assert [r["version"] for r in rows] == expected
        assert all(len(r["checksum"]) == 64 and r["applied_at"] is not None for r in rows)
        tables = {
            r["relname"]
            for r in await conn.fetch(
                "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p') AND relnamespace = "
                "'public'::regnamespace"
            )
        }
    finally:
        await conn.close()
    assert {
        "tenants",
        "api_tokens",
        "jobs",
        "job_definitions",
        "job_stats",
        "job_requests",
        "job_runs",
        "job_runs_default",
        "sundial_migrations",
    } <= tables


async def test_two_processes_migrating_at_once_apply_each_migration_once(
    database_url: str,
) -> None:
    code = (
        "import asyncio, json, sys\n"
        "from sundial.core.db import migrate\n"
        "print(json.dumps(asyncio.run(migrate(sys.argv[1]))))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(LIBS))
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            database_url,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 60)
    assert [p.returncode for p in procs] == [0, 0], [err.decode() for _, err in outputs]
    applied = sorted((json.loads(out) for out, _ in outputs), key=len)
    assert applied == [[], [m.version for m in load_migrations()]]


async def test_a_second_migrator_waits_for_the_lock(database_url: str) -> None:
    holder = await asyncpg.connect(database_url)
    try:
        await holder.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
        waiting = asyncio.create_task(migrate(database_url))

        async def blocked_on_the_lock() -> None:
            count = await holder.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            assert count == 1

        await assert_eventually(blocked_on_the_lock, timeout_s=10, what="migrator waiting")
        assert not waiting.done()
        await holder.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
        assert await asyncio.wait_for(waiting, 30) == [m.version for m in load_migrations()]
    finally:
        await holder.close()


async def test_an_edited_migration_is_refused_naming_the_file(database_url: str) -> None:
    await migrate(database_url)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "UPDATE sundial_migrations SET checksum = repeat('0', 64)"
            " WHERE version = '0001_initial'"
        )
    finally:
        await conn.close()
    with pytest.raises(MigrationError, match=r"0001_initial\.sql changed after it was applied"):
        await migrate(database_url)


async def test_a_failing_migration_rolls_back_and_is_not_recorded(database_url: str) -> None:
    good = Migration.from_text("0001_good.sql", "CREATE TABLE good (id int);")
    bad = Migration.from_text("0002_bad.sql", "CREATE TABLE half (id int); SELECT 1 / 0;")
    with pytest.raises(asyncpg.DivisionByZeroError):
        await migrate(database_url, migrations=[good, bad])
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT to_regclass('good') IS NOT NULL")
        assert await conn.fetchval("SELECT to_regclass('half') IS NULL")
        versions = await conn.fetch("SELECT version FROM sundial_migrations")
        assert [r["version"] for r in versions] == ["0001_good"]
    finally:
        await conn.close()
    fixed = Migration.from_text("0002_bad.sql", "CREATE TABLE half (id int);")
    assert await migrate(database_url, migrations=[good, fixed]) == ["0002_bad"]


async def test_a_migration_added_before_an_applied_one_is_refused(database_url: str) -> None:
    first = Migration.from_text("0001_a.sql", "CREATE TABLE a (id int);")
    third = Migration.from_text("0003_c.sql", "CREATE TABLE c (id int);")
    assert await migrate(database_url, migrations=[first, third]) == ["0001_a", "0003_c"]
    late = Migration.from_text("0002_b.sql", "CREATE TABLE b (id int);")
    with pytest.raises(MigrationError, match=r"0002_b\.sql is not applied but the later 0003_c"):
        await migrate(database_url, migrations=[first, late, third])


def test_migration_files_must_be_numbered() -> None:
    with pytest.raises(MigrationError, match=r"NNNN_lowercase_name\.sql"):
        Migration.from_text("initial.sql", "SELECT 1;")


# --- schema -------------------------------------------------------------------------------


async def test_jobs_is_tuned_for_frequent_updates(conn: asyncpg.Connection) -> None:
    options = await conn.fetchval("SELECT reloptions FROM pg_class WHERE relname = 'jobs'")
    assert "fillfactor=80" in options
    assert "autovacuum_vacuum_scale_factor=0.02" in options
    due = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_due_idx'")
    assert "(partition_id, next_run_at) WHERE (NOT paused)" in due
    check = await conn.fetchval(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'job_runs_check_idx'"
    )
    assert "(partition_id, check_at)" in check and "'retrying'" in check


async def _plan(conn: asyncpg.Connection, sql: str, *args: object) -> str:
    return "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, *args))


async def _function_plan(conn: asyncpg.Connection, function: str) -> str:
    """The plan of the statement function ``function`` runs (its ``RETURN QUERY`` when
    it is PL/pgSQL) as the function keeps it (migration 0029: prepared once, its generic
    plan), its arguments as parameters."""
    body, names, types = await conn.fetchrow(
        "SELECT prosrc, proargnames[1:pronargs], proargtypes::oid[]::regtype[]::text[]"
        " FROM pg_proc WHERE proname = $1",
        function,
    )
    if "RETURN QUERY" in body:
        body = body.split("RETURN QUERY")[1].split(";")[0]
    for i, name in enumerate(names, start=1):
        body = body.replace(name, f"${i}")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await conn.execute(f"PREPARE function_plan ({', '.join(types)}) AS {body}")
    try:
        nulls = ", ".join("NULL" for _ in names)
        rows = await conn.fetch(f"EXPLAIN EXECUTE function_plan ({nulls})")
        return "\n".join(r[0] for r in rows)
    finally:
        await conn.execute("DEALLOCATE function_plan; RESET plan_cache_mode")


async def _partition_indexes(conn: asyncpg.Connection, index: str) -> set[str]:
    """The names of ``index`` on each partition of job_runs (what a plan shows)."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = $1::regclass",
        index,
    )
    return {r["relname"] for r in rows}


async def test_hot_path_counts_and_sweeps_read_their_partial_indexes(
    conn: asyncpg.Connection,
) -> None:
    """Migration 0025: one index serves the tenant's RUNNING count and its runs in
    flight, and the sweep's index holds only runs with a check. Planned with sequential
    scans off, so a table this small cannot hide a query whose conditions do not imply
    an index's predicate (the planner could not use the index at all)."""
    from sundial.scheduler.store._queries import queries  # noqa: PLC0415

    names = {
        r["indexname"]
        for r in await conn.fetch("SELECT indexname FROM pg_indexes WHERE tablename = 'job_runs'")
    }
    assert "job_runs_tenant_running_idx" not in names
    check = await conn.fetchval(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'job_runs_check_idx'"
    )
    assert "check_at IS NOT NULL" in check
    await conn.execute("SET enable_seqscan = off")
    inflight = await _partition_indexes(conn, "job_runs_tenant_inflight_idx")
    checks = await _partition_indexes(conn, "job_runs_check_idx")
    now = datetime.now(UTC)
    plans = {
        # tenant_lease_terms, admission_terms and concurrency_key_terms count in these
        # functions (migration 0029), planned as each caches its plan.
        "sundial_running_runs": (await _function_plan(conn, "sundial_running_runs"), inflight),
        "sundial_inflight_runs": (await _function_plan(conn, "sundial_inflight_runs"), inflight),
        "sundial_key_running_runs": (
            await _function_plan(conn, "sundial_key_running_runs"),
            inflight,
        ),
        "sundial_live_run_counts": (
            await _function_plan(conn, "sundial_live_run_counts"),
            await _partition_indexes(conn, "job_runs_unfinished_idx"),
        ),
        "lock_due_checks": (await _plan(conn, queries.lock_due_checks, [1, 2], 10, now), checks),
        "republish_queued": (await _plan(conn, queries.republish_queued, [1, 2], now), checks),
    }
    for name, (plan, indexes) in plans.items():
        assert any(index in plan for index in indexes), f"{name}:\n{plan}"
    # The plans above are the ones the functions keep because of their own settings.
    settings = dict(
        await conn.fetch(
            "SELECT proname, proconfig FROM pg_proc WHERE proname = ANY($1)",
            [name for name in plans if name.startswith("sundial_")],
        )
    )
    assert len(settings) == 4
    for name, config in settings.items():
        assert {"plan_cache_mode=force_generic_plan", "enable_seqscan=off"} <= set(config), name


async def test_cached_run_counts_count_every_partition_and_one_attached_later(
    conn: asyncpg.Connection,
) -> None:
    """Migration 0029: the counts of a LeaseRuns call, an admission pass and a dispatch
    keep one plan per connection, and still count the runs of every daily partition, of
    one attached after the plan was made too (attaching it makes the plan again)."""
    from sundial.scheduler.store._queries import queries  # noqa: PLC0415

    tenant = await _tenant(conn)
    job_id = uuid.uuid4()
    today = datetime.now(UTC).date()
    await ensure_run_partitions(conn, today - timedelta(days=20), today)

    async def insert(day: date, hour: int, status: str, seq: int = 0) -> None:
        await conn.execute(
            "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind,"
            " status, dispatch_seq) VALUES ($1, $2, $3, 0, 'manual', $4, $5)",
            job_id,
            _at(day, hour),
            tenant,
            status,
            seq,
        )

    async def counts() -> tuple[int, int, int, list[tuple[int, int]]]:
        terms = await conn.fetchrow(queries.tenant_lease_terms, [tenant])
        admission = await conn.fetchrow(queries.admission_terms, [tenant])
        key = await conn.fetchrow(queries.concurrency_key_terms, [tenant], ["crm"])
        live = await conn.fetch(queries.live_run_counts, [job_id, uuid.uuid4()])
        return (
            terms["running_runs"],
            admission["in_flight"],
            key["running_runs"],
            [(r["unfinished"], r["buffered"]) for r in live],
        )

    # The job names concurrency key "crm", which has a limit.
    await conn.execute(
        "INSERT INTO jobs (job_id, tenant_id, name, partition_id) VALUES ($1, $2, 'sync', 0)",
        job_id,
        tenant,
    )
    await conn.execute(
        "INSERT INTO job_definitions (job_id, schedule, target, policies, tenant_id)"
        " VALUES ($1, '{\"once\": {}}', '{\"http\": {}}', $2::text::jsonb, $3)",
        job_id,
        json.dumps({"flow": {"concurrency_key": "crm"}}),
        tenant,
    )
    await conn.execute(
        "INSERT INTO flow_limits (tenant_id, key, max_running) VALUES ($1, 'crm', 5)", tenant
    )
    await insert(today - timedelta(days=20), 1, "running", 3)
    await insert(today - timedelta(days=20), 2, "pending")
    await insert(today - timedelta(days=10), 1, "retrying", 2)
    await insert(today, 1, "running", 4)
    await insert(today, 2, "queued", 5)  # published, not leased: in flight
    await insert(today, 3, "queued")  # waiting for admission: not in flight
    await insert(today, 4, "succeeded", 6)
    # More calls than the five custom plans PostgreSQL makes before keeping one.
    for _ in range(7):
        assert await counts() == (2, 1, 2, [(6, 1)])
    ahead = today + timedelta(days=40)
    assert await ensure_run_partitions(conn, ahead, ahead) == [run_partition_name(ahead)]
    await insert(ahead, 1, "running", 7)
    await insert(ahead, 2, "queued", 8)
    assert await counts() == (3, 2, 3, [(8, 1)])


async def test_the_tenant_run_index_leaves_the_runs_in_flight_to_their_own(
    conn: asyncpg.Connection,
) -> None:
    """Migration 0026: job_runs_tenant_status_idx holds every run but those in flight
    (queued and published, or running), the rows job_runs_tenant_inflight_idx holds: each
    run is in exactly one of the two, and the API's tenant-wide counts read both (sequential
    scans off, as above)."""
    from sundial.api.store import queries  # noqa: PLC0415

    tenant = await _tenant(conn)
    job_id = uuid.uuid4()
    now = datetime.now(UTC)
    states = [
        ("queued", 0), ("queued", 3), ("running", 4), ("retrying", 0), ("pending", 0),
        ("succeeded", 5), ("dead", 6),
    ]  # fmt: skip
    for k, (status, seq) in enumerate(states):
        await conn.execute(
            "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind,"
            " status, dispatch_seq) VALUES ($1, $2, $3, 0, 'manual', $4, $5)",
            job_id,
            now - timedelta(minutes=k),
            tenant,
            status,
            seq,
        )
    waiting = "status <> 'running' AND (status <> 'queued' OR dispatch_seq <= 0)"
    flying = "status = 'running' OR (status = 'queued' AND dispatch_seq > 0)"
    held = await conn.fetchrow(
        f"SELECT count(*) FILTER (WHERE {waiting}) AS waiting,"
        f"       count(*) FILTER (WHERE {flying}) AS flying,"
        f"       count(*) FILTER (WHERE ({waiting}) = ({flying})) AS both_or_neither"
        "  FROM job_runs WHERE tenant_id = $1",
        tenant,
    )
    assert dict(held) == {"waiting": 5, "flying": 2, "both_or_neither": 0}
    # Not started yet: the waiting queued, the published queued, the retrying, the pending.
    assert await conn.fetchval(queries.count_waiting_requested_runs, tenant) == 4
    await conn.execute("SET enable_seqscan = off")
    plan = await _plan(conn, queries.count_waiting_requested_runs, tenant)
    for index in ("job_runs_tenant_status_idx", "job_runs_tenant_inflight_idx"):
        assert any(name in plan for name in await _partition_indexes(conn, index)), plan


async def test_schema_constraints_hold(conn: asyncpg.Connection) -> None:
    tenant = await _tenant(conn)
    job_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO jobs (job_id, tenant_id, name, partition_id, next_run_at) "
        "VALUES ($1, $2, 'nightly', 42, now())",
        job_id,
        tenant,
    )
    with pytest.raises(asyncpg.UniqueViolationError):
        await conn.execute(
            "INSERT INTO jobs (tenant_id, name, partition_id) VALUES ($1, 'nightly', 1)", tenant
        )
    with pytest.raises(asyncpg.CheckViolationError):
        await conn.execute(
            "INSERT INTO jobs (tenant_id, name, partition_id) VALUES ($1, 'p', 256)", tenant
        )
    with pytest.raises(asyncpg.CheckViolationError):
        await conn.execute(
            "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status) "
            "VALUES ($1, now(), $2, 1, 'bogus')",
            job_id,
            tenant,
        )
    with pytest.raises(asyncpg.CheckViolationError):  # an admin token belongs to no tenant
        await conn.execute(
            "INSERT INTO api_tokens (tenant_id, role, token_hash, prefix) "
            "VALUES ($1, 'admin', $2, 'sk_')",
            tenant,
            os.urandom(32),
        )
    with pytest.raises(asyncpg.CheckViolationError):  # NATS subject token
        await _tenant(conn, "has.dots")
    # Deleting a job removes its definition and stats with it.
    await conn.execute(
        "INSERT INTO job_definitions (job_id, schedule, target) VALUES ($1, '{}', '{}')", job_id
    )
    await conn.execute("INSERT INTO job_stats (job_id) VALUES ($1)", job_id)
    await conn.execute("DELETE FROM jobs WHERE job_id = $1", job_id)
    assert await conn.fetchval("SELECT count(*) FROM job_definitions") == 0
    assert await conn.fetchval("SELECT count(*) FROM job_stats") == 0


async def test_calendar_keys_are_backfilled_tenant_qualified(database_url: str) -> None:
    # Jobs written before migration 0017 get their schedule's calendar names qualified by
    # their tenant; a schedule naming none keeps NULL (outside the partial index).
    before = [m for m in load_migrations() if m.version < "0017"]
    assert await migrate(database_url, migrations=before)
    conn = await asyncpg.connect(database_url)
    try:
        jobs = {}
        for tenant, name, schedule in (
            ("acme", "a", {"cron": "0 9 * * *", "calendars": ["holidays", "closed"]}),
            ("other", "b", {"cron": "0 9 * * *", "calendars": ["holidays"]}),
            ("acme", "c", {"cron": "0 9 * * *"}),
        ):
            if not await conn.fetchval("SELECT 1 FROM tenants WHERE tenant_id = $1", tenant):
                await _tenant(conn, tenant)
            jobs[name] = await conn.fetchval(
                "INSERT INTO jobs (tenant_id, name, partition_id) VALUES ($1, $2, 1)"
                " RETURNING job_id",
                tenant,
                name,
            )
            await conn.execute(
                "INSERT INTO job_definitions (job_id, schedule, target, calendars)"
                " VALUES ($1, $2::jsonb, '{}', $3::jsonb)",
                jobs[name],
                json.dumps(schedule),
                "[]" if "calendars" in schedule else None,
            )
        assert [m.version for m in load_migrations() if m.version >= "0017"] == await migrate(
            database_url
        )
        rows = await conn.fetch(
            "SELECT j.name, d.calendar_keys FROM jobs j JOIN job_definitions d USING (job_id)"
            " ORDER BY j.name"
        )
        assert [tuple(r) for r in rows] == [
            ("a", ["acme/holidays", "acme/closed"]),
            ("b", ["other/holidays"]),
            ("c", None),
        ]
    finally:
        await conn.close()


async def test_revisions_written_before_0028_are_retired_by_their_jobs_history(
    database_url: str,
) -> None:
    # A live job's newest revision stays out of the retention index; its older ones and
    # every revision of a deleted job are in it (0 newest, 1 superseded, 2 job deleted).
    before = [m for m in load_migrations() if m.version < "0028"]
    assert await migrate(database_url, migrations=before)
    conn = await asyncpg.connect(database_url)
    try:
        await _tenant(conn)
        jobs = {}
        for name in ("live", "deleted"):
            jobs[name] = await conn.fetchval(
                "INSERT INTO jobs (tenant_id, name, partition_id) VALUES ('acme', $1, 1)"
                " RETURNING job_id",
                name,
            )
            await conn.execute(
                "INSERT INTO job_definitions (job_id, schedule, target)"
                " VALUES ($1, '{\"cron\": \"0 9 * * *\"}', '{}')",
                jobs[name],
            )
        for description in ("two", "three"):  # an API change: the version, then the row
            await conn.execute(
                "UPDATE jobs SET version = version + 1 WHERE job_id = $1", jobs["live"]
            )
            await conn.execute(
                "UPDATE job_definitions SET description = $2 WHERE job_id = $1",
                jobs["live"],
                description,
            )
        await conn.execute("DELETE FROM jobs WHERE job_id = $1", jobs["deleted"])
        assert [m.version for m in load_migrations() if m.version >= "0028"] == await migrate(
            database_url
        )
        rows = await conn.fetch(
            "SELECT job_id, version, retired FROM job_revisions ORDER BY job_id, version"
        )
        retired = {(r["job_id"], r["version"]): r["retired"] for r in rows}
        assert retired == {
            (jobs["live"], 1): 1,
            (jobs["live"], 2): 1,
            (jobs["live"], 3): 0,
            (jobs["deleted"], 1): 2,
        }
    finally:
        await conn.close()


# --- run partitions -----------------------------------------------------------------------


async def test_runs_land_in_their_daily_partition_or_the_default(conn: asyncpg.Connection) -> None:
    created = await ensure_run_partitions(conn, DAY, DAY + timedelta(days=1))
    assert created == [run_partition_name(DAY), run_partition_name(DAY + timedelta(days=1))]
    assert created == ["job_runs_20310517", "job_runs_20310518"]

    assert await _insert_run(conn, _at(DAY, 12)) == "job_runs_20310517"
    assert await _insert_run(conn, _at(DAY + timedelta(days=1))) == "job_runs_20310518"  # midnight
    assert await _insert_run(conn, _at(DAY) - timedelta(microseconds=1)) == "job_runs_default"
    assert await _insert_run(conn, _at(DAY + timedelta(days=30))) == "job_runs_default"
    # The day is the UTC day, whatever the session's time zone.
    await conn.execute("SET timezone = 'Pacific/Kiritimati'")
    assert await _insert_run(conn, _at(DAY, 23, 30)) == "job_runs_20310517"

    assert await ensure_run_partitions(conn, DAY, DAY + timedelta(days=1)) == []


async def test_partitions_carry_the_parent_indexes(conn: asyncpg.Connection) -> None:
    await ensure_run_partitions(conn, DAY, DAY)
    parent = await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE tablename = 'job_runs'")
    child = await conn.fetchval(
        "SELECT count(*) FROM pg_indexes WHERE tablename = $1", run_partition_name(DAY)
    )
    # Later migrations add indexes to job_runs (0003: pending runs); a partition must
    # carry every one of them.
    assert child == parent >= 4


async def test_creating_a_day_moves_its_rows_out_of_the_default(conn: asyncpg.Connection) -> None:
    assert await _insert_run(conn, _at(DAY, 9)) == "job_runs_default"
    assert await _insert_run(conn, _at(DAY, 23, 59)) == "job_runs_default"
    other_day = await _insert_run(conn, _at(DAY + timedelta(days=3)))
    assert other_day == "job_runs_default"

    assert await ensure_run_partitions(conn, DAY, DAY) == ["job_runs_20310517"]

    rows = await conn.fetch(
        "SELECT scheduled_at, tableoid::regclass::text AS part FROM job_runs ORDER BY scheduled_at"
    )
    assert [r["part"] for r in rows] == [
        "job_runs_20310517",
        "job_runs_20310517",
        "job_runs_default",
    ]
    assert await conn.fetchval("SELECT count(*) FROM job_runs_default") == 1


async def test_drop_removes_only_whole_days_before_the_cutoff(conn: asyncpg.Connection) -> None:
    days = [DAY + timedelta(days=i) for i in range(4)]
    await ensure_run_partitions(conn, days[0], days[-1])
    for day in days:
        await _insert_run(conn, _at(day, 6))
    await _insert_run(conn, _at(DAY - timedelta(days=400)))  # default partition, very old

    dropped = await drop_run_partitions_before(conn, days[2])
    assert dropped == [run_partition_name(days[0]), run_partition_name(days[1])]
    assert await drop_run_partitions_before(conn, days[2]) == []
    remaining = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'job_runs'::regclass ORDER BY 1"
    )
    assert [r["relname"] for r in remaining] == [
        "job_runs_20310519",
        "job_runs_20310520",
        "job_runs_default",
    ]
    assert await conn.fetchval("SELECT count(*) FROM job_runs") == 3


async def test_ensure_refuses_absurd_ranges(conn: asyncpg.Connection) -> None:
    assert await ensure_run_partitions(conn, DAY, DAY - timedelta(days=1)) == []
    with pytest.raises(asyncpg.InvalidParameterValueError):
        await ensure_run_partitions(conn, DAY, DAY + timedelta(days=3650))


async def test_concurrent_ensures_create_each_day_once(database_url: str) -> None:
    await migrate(database_url)
    conns = [await asyncpg.connect(database_url) for _ in range(4)]
    try:
        results = await asyncio.gather(
            *(ensure_run_partitions(c, DAY, DAY + timedelta(days=6)) for c in conns)
        )
    finally:
        for c in conns:
            await c.close()
    created = sorted(name for result in results for name in result)
    assert created == [run_partition_name(DAY + timedelta(days=i)) for i in range(7)]


# --- pool -----------------------------------------------------------------------------------


async def test_pool_sessions_are_utc_with_timeouts_and_json_codecs(database_url: str) -> None:
    config = DatabaseConfig(database_url=database_url, pool_min_size=1, pool_max_size=2)
    pool = await create_pool(config, application_name="sundial-test")
    try:
        async with pool.acquire() as c:
            assert await c.fetchval("SHOW timezone") == "UTC"
            assert await c.fetchval("SHOW statement_timeout") == "30s"
            assert await c.fetchval("SHOW idle_in_transaction_session_timeout") == "15s"
            assert await c.fetchval("SHOW transaction_timeout") == "30s"
            assert await c.fetchval("SHOW application_name") == "sundial-test"
            document = {"cron": "0 9 * * *", "time_zone": "Europe/Paris", "labels": [1, 2]}
            assert await c.fetchval("SELECT $1::jsonb", document) == document
            assert await c.fetchval("SELECT $1::json", [1, "a"]) == [1, "a"]
    finally:
        await close_pool(pool, timeout_s=10)


async def test_a_session_frozen_mid_statement_holds_its_locks_only_until_the_transaction_timeout(
    database_url: str,
) -> None:
    # A process stopped between writing a statement's Execute and its Sync (asyncpg's
    # write split by a full socket buffer, then SIGSTOP) leaves its session active and
    # reading: idle_in_transaction_session_timeout never starts and no statement runs
    # for statement_timeout to end, so only transaction_timeout frees the rows its
    # transaction locked (a scheduler's claimed jobs, which the other schedulers' SKIP
    # LOCKED claims would skip for as long as the process stays frozen). Found by
    # tests/fault/test_scheduler_faults.py's SIGSTOP test, about one run in ten.
    setup = await asyncpg.connect(database_url)
    config = DatabaseConfig(
        database_url=database_url,
        pool_min_size=0,
        pool_max_size=1,
        idle_in_transaction_timeout_s=0.5,
        transaction_timeout_s=5.0,
    )
    pool = await create_pool(config, application_name="sundial-frozen")
    try:
        await setup.execute(
            "CREATE TABLE frozen_rows (id int PRIMARY KEY); INSERT INTO frozen_rows VALUES (1)"
        )
        conn = await pool.acquire()
        await conn.execute("BEGIN")
        await conn.execute("SELECT id FROM frozen_rows WHERE id = 1 FOR UPDATE")
        locked_at = time.monotonic()
        # The frozen process: it reads nothing more, and of its next statement only
        # Parse, Bind and Execute reached the server (no Sync).
        transport = conn._con._transport  # type: ignore[attr-defined]
        transport.pause_reading()
        transport.write(
            _message(b"P", b"\0SELECT 1\0" + struct.pack("!h", 0))
            + _message(b"B", b"\0\0" + struct.pack("!hhh", 0, 0, 0))
            + _message(b"E", b"\0" + struct.pack("!i", 0))
        )

        async def claimable() -> bool:
            found = await setup.fetchval("SELECT id FROM frozen_rows FOR UPDATE SKIP LOCKED")
            return found == 1

        async def frozen_session() -> tuple[str, str] | None:
            row = await setup.fetchrow(
                "SELECT state, wait_event FROM pg_stat_activity WHERE application_name = $1",
                "sundial-frozen",
            )
            return None if row is None else (row["state"], row["wait_event"])

        async def reading() -> bool:
            return await frozen_session() == ("active", "ClientRead")

        await assert_eventually(reading, what="the session active, reading after Execute")
        # Three times the idle timeout, well before the transaction timeout (a stall of
        # the machine cannot free the row before these checks): still locked, active.
        while time.monotonic() < locked_at + 1.5:
            assert not await claimable()
        assert await reading()
        await assert_eventually(claimable, timeout_s=10, what="the frozen session's row freed")
        assert time.monotonic() - locked_at >= 4.5
        assert await frozen_session() is None
    finally:
        pool.terminate()
        await setup.close()


def _message(kind: bytes, body: bytes) -> bytes:
    """One message of PostgreSQL's frontend protocol."""
    return kind + struct.pack("!i", len(body) + 4) + body


async def test_close_pool_is_bounded_by_its_timeout(database_url: str) -> None:
    pool = await create_pool(
        DatabaseConfig(database_url=database_url), application_name="sundial-close-test"
    )
    await pool.acquire()  # never released: a graceful close would wait forever
    await asyncio.wait_for(close_pool(pool, timeout_s=0.2), timeout=10)
    assert pool.is_closing()

    observer = await asyncpg.connect(database_url)
    try:

        async def sessions_gone() -> None:
            count = await observer.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                "sundial-close-test",
            )
            assert count == 0

        await assert_eventually(sessions_gone, timeout_s=10, what="pool sessions closed")
    finally:
        await observer.close()


# --- SQLSTATE translation -----------------------------------------------------------------


async def test_unique_violation_is_already_exists(conn: asyncpg.Connection) -> None:
    await _tenant(conn)
    insert = "INSERT INTO jobs (tenant_id, name, partition_id) VALUES ('acme', 'nightly', 1)"
    await conn.execute(insert)
    with pytest.raises(errors.AlreadyExists) as caught:
        async with translate_db_errors():
            await conn.execute(insert)
    assert caught.value.message == "already exists"
    assert isinstance(caught.value.__cause__, asyncpg.UniqueViolationError)

    messages = {"jobs_tenant_id_name_key": "a job named nightly already exists"}
    with (
        pytest.raises(errors.AlreadyExists, match="a job named nightly already exists"),
        translate_db_errors(constraint_messages=messages),
    ):
        await conn.execute(insert)


async def test_foreign_key_violation_is_failed_precondition(conn: asyncpg.Connection) -> None:
    @translate_db_errors()
    async def create_job_for_missing_tenant() -> None:
        await conn.execute(
            "INSERT INTO jobs (tenant_id, name, partition_id) VALUES ('ghost', 'x', 1)"
        )

    with pytest.raises(errors.FailedPrecondition):
        await create_job_for_missing_tenant()


async def test_statement_timeout_is_deadline_exceeded(conn: asyncpg.Connection) -> None:
    await conn.execute("SET statement_timeout = '50ms'")
    with pytest.raises(errors.DeadlineExceeded):
        async with translate_db_errors():
            await conn.execute("SELECT pg_sleep(10)")


@pytest.mark.parametrize(
    ("sqlstate", "expected"),
    [
        ("40001", errors.Aborted),  # serialization_failure
        ("40P01", errors.Aborted),  # deadlock_detected
        ("55P03", errors.Aborted),  # lock_not_available
        ("57014", errors.DeadlineExceeded),  # query_canceled
        ("53300", errors.Unavailable),  # too_many_connections
        ("08006", errors.Unavailable),  # connection_failure (class 08)
        ("57P01", errors.Unavailable),  # admin_shutdown
        ("23505", errors.AlreadyExists),
        ("23503", errors.FailedPrecondition),
    ],
)
async def test_errors_are_translated_by_sqlstate_not_text(
    conn: asyncpg.Connection, sqlstate: str, expected: type[errors.SundialError]
) -> None:
    # The server raises the SQLSTATE with a misleading message: only the code may count.
    raise_it = (
        "DO $$ BEGIN RAISE EXCEPTION 'unique violation deadlock'"
        f" USING ERRCODE = '{sqlstate}'; END $$"
    )
    with pytest.raises(expected):
        async with translate_db_errors():
            await conn.execute(raise_it)


async def test_other_errors_pass_through_unchanged(conn: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.DivisionByZeroError):
        async with translate_db_errors():
            await conn.execute("SELECT 1 / 0")
    with pytest.raises(asyncpg.CheckViolationError), translate_db_errors():
        await conn.execute(
            "INSERT INTO tenants (tenant_id, name, signing_secret) VALUES ('x', 'x', 'short')"
        )


async def test_unreachable_database_is_unavailable() -> None:
    with pytest.raises(errors.Unavailable):
        async with translate_db_errors():
            # Port 1 on loopback: nothing listens there, the connection is refused.
            await asyncpg.connect("postgresql://nobody@127.0.0.1:1/none", timeout=5)
