"""Daily partitions of ``job_runs``: create ahead, drop after retention.

Thin wrappers over the SQL functions of migration ``0001_initial`` (which documents the
locking), so the scheduler's maintenance loop and tests call one statement each.
"""

from __future__ import annotations

from datetime import date

import asyncpg

__all__ = ["drop_run_partitions_before", "ensure_run_partitions", "run_partition_name"]


def run_partition_name(day: date) -> str:
    """The partition holding runs scheduled on UTC ``day``: ``job_runs_YYYYMMDD``."""
    return f"job_runs_{day:%Y%m%d}"


async def ensure_run_partitions(
    conn: asyncpg.Connection | asyncpg.Pool, start: date, end: date
) -> list[str]:
    """Create the missing daily partitions for every UTC day in ``[start, end]``.

    Idempotent and safe from several schedulers at once. Runs already stored in the
    default partition for a created day are moved into it.

    Returns:
        The names of the partitions created (empty if all existed).

    Raises:
        asyncpg.LockNotAvailableError: A needed lock was not granted within 5 s (the
            table is busy); try again on the next pass.
    """
    rows = await conn.fetch(
        "SELECT name FROM sundial_ensure_run_partitions($1::date, $2::date) AS name", start, end
    )
    return [row["name"] for row in rows]


async def drop_run_partitions_before(
    conn: asyncpg.Connection | asyncpg.Pool, cutoff: date
) -> list[str]:
    """Drop the daily partitions whose whole day is before UTC ``cutoff``.

    The default partition is never dropped, whatever it holds.

    Returns:
        The names of the partitions dropped.
    """
    rows = await conn.fetch(
        "SELECT name FROM sundial_drop_run_partitions_before($1::date) AS name", cutoff
    )
    return [row["name"] for row in rows]
