"""Run-history partitions are created ahead and dropped after retention."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import aetcd
import asyncpg

from sundial.core.clock import ManualClock
from sundial.core.cluster import cluster_status
from sundial.core.coord import connect_etcd
from sundial.core.db import ensure_run_partitions, run_partition_name
from sundial.devstack import Stack
from sundial.schedule import CronSpec, Schedule
from sundial.scheduler.maintenance import Maintenance
from sundial.scheduler.store import SchedulerStore
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import insert_jobs

TODAY = date(2030, 3, 10)
T = datetime(2030, 3, 10, 8, 0, tzinfo=UTC)


async def partitions(pool: asyncpg.Pool) -> set[str]:
    rows = await pool.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'job_runs'::regclass"
    )
    return {r["relname"] for r in rows} - {"job_runs_default"}


async def test_partitions_ahead_and_retention(
    pool: asyncpg.Pool, stack: Stack, migrated_database_url: str
) -> None:
    old = [TODAY - timedelta(days=d) for d in (45, 31, 30, 29)]
    await ensure_run_partitions(pool, old[0], old[0])
    for day in old[1:]:
        await ensure_run_partitions(pool, day, day)
    clock = ManualClock(datetime(2030, 3, 10, 8, 0, tzinfo=UTC))
    config = scheduler_config(migrated_database_url, stack)
    maintenance = Maintenance(SchedulerStore(pool), lambda: {0}, config, clock)
    created, dropped = await maintenance.maintain_once()
    expected_ahead = {run_partition_name(TODAY + timedelta(days=d)) for d in range(8)}
    assert set(created) == expected_ahead
    # Retention 30 days: days before TODAY - 30 go; TODAY - 30 and later stay.
    assert set(dropped) == {run_partition_name(old[0]), run_partition_name(old[1])}
    assert await partitions(pool) == expected_ahead | {
        run_partition_name(old[2]),
        run_partition_name(old[3]),
    }
    assert await maintenance.maintain_once() == ([], [])  # idempotent


async def test_misfire_records_go_with_the_runs_of_their_age(
    pool: asyncpg.Pool, stack: Stack, migrated_database_url: str
) -> None:
    # The SLO's records of skipped misfires (migration 0016) are kept as long as runs.
    [job] = await insert_jobs(pool, Schedule(CronSpec("* * * * *")), first_due=T)
    horizon = datetime.combine(TODAY - timedelta(days=30), time(), UTC)
    recorded = [horizon - timedelta(days=1), horizon - timedelta(seconds=1), horizon, T]
    await pool.executemany(
        "INSERT INTO job_misfires (job_id, first_at, last_at, skipped, exact, recorded_at)"
        " VALUES ($1, $2, $2, 1, true, $2)",
        [(job, at) for at in recorded],
    )
    config = scheduler_config(migrated_database_url, stack)
    maintenance = Maintenance(SchedulerStore(pool), lambda: {0}, config, ManualClock(T))
    await maintenance.maintain_once()
    kept = await pool.fetch("SELECT recorded_at FROM job_misfires ORDER BY recorded_at")
    assert [r["recorded_at"] for r in kept] == [horizon, T]


async def test_cluster_status_reports_lag(pool: asyncpg.Pool, stack: Stack) -> None:
    now = await pool.fetchval("SELECT now()")
    await insert_jobs(pool, Schedule(CronSpec("* * * * *")), first_due=now - timedelta(seconds=42))
    await insert_jobs(pool, Schedule(CronSpec("* * * * *")), first_due=now + timedelta(hours=1))
    config = scheduler_config("postgresql://unused/x", stack)
    etcd: aetcd.Client = await connect_etcd(config)
    try:
        await etcd.put(f"/sundial/{config.cluster}/members/a".encode(), b"a")
        await etcd.put(f"/sundial/{config.cluster}/partitions/7".encode(), b"a")
        snapshot = await cluster_status(etcd, pool, config.cluster)
        await etcd.delete_prefix(f"/sundial/{config.cluster}/".encode())
    finally:
        await etcd.close()
    assert snapshot.members == ["a"]
    assert snapshot.owners[7] == "a" and snapshot.owners.count("") == 255
    assert snapshot.oldest_due == now - timedelta(seconds=42)
    assert timedelta(seconds=42) <= snapshot.dispatch_lag < timedelta(seconds=60)


async def test_retention_keeps_a_day_that_still_holds_live_runs(
    pool: asyncpg.Pool, stack: Stack, migrated_database_url: str
) -> None:
    days = [TODAY - timedelta(days=d) for d in (40, 39, 38, 37)]
    for day in days:
        await ensure_run_partitions(pool, day, day)
    [job] = await insert_jobs(pool, Schedule(CronSpec("0 0 * * *")), first_due=None, after=T)
    # One day holds a run still retrying (a long backoff), one a dead run whose dead
    # letter is not acknowledged yet, one only finished runs, one nothing.
    for day, status, check_at in [
        (days[0], "retrying", T),
        (days[1], "dead", T),
        (days[2], "succeeded", None),
    ]:
        await pool.execute(
            "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
            " check_at) VALUES ($1, $2, 'acme', 0, $3, $4)",
            job,
            datetime.combine(day, time(9), UTC),
            status,
            check_at,
        )
    config = scheduler_config(migrated_database_url, stack)
    maintenance = Maintenance(SchedulerStore(pool), lambda: {0}, config, ManualClock(T))
    _, dropped = await maintenance.maintain_once()
    assert set(dropped) == {run_partition_name(days[2]), run_partition_name(days[3])}
    assert {run_partition_name(days[0]), run_partition_name(days[1])} <= await partitions(pool)
    # The retry ends and the letter is acknowledged: the next pass drops both days.
    await pool.execute("UPDATE job_runs SET status = 'succeeded', check_at = NULL")
    _, dropped = await maintenance.maintain_once()
    assert set(dropped) == {run_partition_name(days[0]), run_partition_name(days[1])}
