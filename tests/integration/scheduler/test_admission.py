"""Admission against PostgreSQL (docs/design.md section 7, "Flow control"): a rate-limit
key's token bucket is shared by every scheduler's sweeper, whatever order their passes
take its lock in."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from sundial.core.partition import PARTITION_COUNT, partition_of
from sundial.job import JobPolicies
from sundial.schedule import OnceSpec, Schedule
from sundial.scheduler.store import SchedulerStore
from tests.integration.scheduler.support import TENANT, insert_jobs

S = timedelta(seconds=1)
ALL = list(range(PARTITION_COUNT))


async def waiting_runs(pool: asyncpg.Pool, due: datetime, count: int, key: str) -> list[int]:
    """``count`` runs of key ``key`` waiting for admission since ``due``, as a dispatch
    leaves them; their partitions."""
    ids = await insert_jobs(
        pool,
        Schedule(OnceSpec(due)),
        first_due=due,
        count=count,
        policies=JobPolicies(rate_limit_key=key),
    )
    partitions = [partition_of(i) for i in ids]
    await pool.execute(
        "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
        " dispatch_seq, check_at)"
        " SELECT j, $2, $3, p, 'queued', 0, NULL"
        " FROM unnest($1::uuid[], $4::smallint[]) AS u(j, p)",
        ids,
        due,
        TENANT,
        partitions,
    )
    await pool.execute(
        "INSERT INTO run_waits (job_id, scheduled_at, tenant_id, partition_id, priority,"
        " due_at, rate_key, throttled)"
        " SELECT j, $2, $3, p, 3, $2, $5, true"
        " FROM unnest($1::uuid[], $4::smallint[]) AS u(j, p)",
        ids,
        due,
        TENANT,
        partitions,
        key,
    )
    return partitions


async def test_a_pass_that_waited_for_the_lock_does_not_wind_the_buckets_clock_back(
    pool: asyncpg.Pool,
) -> None:
    t0 = await pool.fetchval("SELECT date_trunc('second', now())")
    partitions = await waiting_runs(pool, t0, 40, "crm")
    # 10 calls a second, 5 at once; the bucket full at t0.
    await pool.execute(
        "INSERT INTO flow_limits (tenant_id, key, rate_per_s, burst, tokens, refilled_at)"
        " VALUES ($1, 'crm', 10, 5, 5, $2)",
        TENANT,
        t0,
    )
    store = SchedulerStore(pool)

    async def admit(owned: list[int], now: datetime) -> int:
        async with store.transaction() as tx:
            done = await tx.admit_waiting(
                owned, window=256, default_weight=1, limit=500, now=now, confirm_until=now + S
            )
        return sum(done.admitted.values())

    # Scheduler A owns the partition of one waiting run: it takes one token at t0 + 1 s
    # and gives the other four back.
    mine = sorted(p for p in set(partitions) if partitions.count(p) == 1)[:1]
    assert mine, "no partition holds a single run of the 40 (odds below 1e-10)"
    others = sorted(set(ALL) - set(mine))
    assert await admit(mine, t0 + S) == 1
    # Scheduler B's pass read its clock at t0 + 0.5 s, then waited for the admission
    # lock A held: it takes the four tokens left...
    assert await admit(others, t0 + 0.5 * S) == 4
    # ...and the bucket stays empty as of t0 + 1 s: nothing more then, the next token
    # 0.1 s later. Winding the bucket's clock back to B's instant would have credited
    # the half second between them again: five more calls at t0 + 1 s.
    assert await admit(ALL, t0 + S) == 0
    assert await admit(ALL, t0 + 1.1 * S) == 1
    tokens, refilled_at = await pool.fetchrow(
        "SELECT tokens, refilled_at FROM flow_limits WHERE key = 'crm'"
    )
    assert refilled_at == t0 + 1.1 * S and tokens < 1
