"""Test helpers of the scheduler tests: create jobs as the API would, read runs."""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from nats.js.errors import NotFoundError

from sundial.core.auth import Role, token_hash
from sundial.core.bus import DEAD_STREAM, RUNS_STREAM, dead_subject
from sundial.core.partition import partition_of
from sundial.internal.v1 import events_pb2
from sundial.job import JobPolicies, policies_to_json, schedule_to_json
from sundial.schedule import Schedule, compile_schedule

TENANT = "acme"
TARGET = {"http": {"url": "https://example.com/hook", "method": "POST"}}


async def add_tenant(pool: asyncpg.Pool, tenant_id: str = TENANT, cap: int = 100) -> None:
    await pool.execute(
        "INSERT INTO tenants (tenant_id, name, signing_secret, max_concurrent_runs)"
        " VALUES ($1, $1, $2, $3)",
        tenant_id,
        b"s" * 32,
        cap,
    )


RECORD_DIGESTS = (
    "UPDATE jobs j SET definition_digest = md5(d.schedule::text || ' ' || d.policies::text)::uuid"
    " FROM job_definitions d WHERE d.job_id = j.job_id AND j.job_id = ANY($1)"
)
"""The jobs $1 get their definitions' digests, as the API writes them (migration 0008)."""


async def insert_jobs(
    pool: asyncpg.Pool,
    schedule: Schedule,
    *,
    first_due: datetime | None = None,
    after: datetime | None = None,
    count: int = 1,
    policies: JobPolicies | None = None,
    tenant_id: str = TENANT,
    payload: bytes = b"{}",
    name_prefix: str = "job",
    digest: bool = True,
) -> list[uuid.UUID]:
    """Create jobs as the API would: definition rows plus the first next_run_at, and the
    definition's digest unless ``digest`` is False (a row written before migration 0008).

    The first fire time is ``first_due`` or the schedule's first fire after ``after``.
    """
    ids = [uuid.uuid4() for _ in range(count)]
    due: list[datetime | None] = []
    for job_id in ids:
        if first_due is not None:
            due.append(first_due)
        else:
            assert after is not None
            fire = compile_schedule(schedule, job_id=str(job_id)).next_fire(after)
            due.append(fire.at if fire else None)
    sched_doc = schedule_to_json(schedule)
    pol_doc: dict[str, Any] = policies_to_json(policies or JobPolicies())
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO jobs (job_id, tenant_id, name, partition_id, next_run_at)"
            " SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::smallint[],"
            " $5::timestamptz[])",
            ids,
            [tenant_id] * count,
            [f"{name_prefix}-{i}-{job_id.hex[:8]}" for i, job_id in enumerate(ids)],
            [partition_of(job_id) for job_id in ids],
            due,
        )
        await conn.execute(
            "INSERT INTO job_definitions (job_id, schedule, target, policies, payload)"
            " SELECT j, $2::jsonb, $3::jsonb, $4::jsonb, $5 FROM unnest($1::uuid[]) AS j",
            ids,
            sched_doc,
            TARGET,
            pol_doc,
            payload,
        )
        if digest:
            await conn.execute(RECORD_DIGESTS, ids)
    return ids


async def runs_of(pool: asyncpg.Pool, job_id: uuid.UUID) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT * FROM job_runs WHERE job_id = $1 ORDER BY scheduled_at", job_id
    )


async def insert_queued_runs(
    pool: asyncpg.Pool,
    job_id: uuid.UUID,
    times: list[datetime],
    *,
    tenant_id: str = TENANT,
    status: str = "queued",
) -> None:
    """Run rows as a dispatch would have left them (already published)."""
    await pool.execute(
        "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, status,"
        " dispatch_seq, check_at)"
        " SELECT $1, t, $3, $4, $5, 1, t + interval '2 minutes' FROM unnest($2::timestamptz[]) t",
        job_id,
        times,
        tenant_id,
        partition_of(job_id),
        status,
    )


# --- scheduler processes --------------------------------------------------------------


def process_env(database_url: str, cluster: str, **overrides: str) -> dict[str, str]:
    """Environment of scheduler processes on a per-test database and etcd prefix.

    No executor leases what they publish, so fair sharing is off (its window would
    hold all but a window of each tenant's runs on the waiting list, docs/design.md
    section 7): what these tests count is every run published."""
    env = {
        "SUNDIAL_TENANT_WINDOW": "1000000",
        "SUNDIAL_DATABASE_URL": database_url,
        "SUNDIAL_CLUSTER": cluster,
        "SUNDIAL_LEASE_TTL_S": "3",
        "SUNDIAL_MEMBERSHIP_POLL_S": "0.5",
        "SUNDIAL_POLL_INTERVAL_S": "0.2",
        "SUNDIAL_SWEEP_INTERVAL_S": "0.5",
        "SUNDIAL_PUBLISH_CONFIRM_S": "2",
        "SUNDIAL_GRACE_PERIOD_S": "5",
        "SUNDIAL_POOL_MAX_SIZE": "4",
        # A process frozen mid-statement holds its claimed rows until this ends its
        # transaction (config.py, transaction_timeout_s): within a fault test's wait.
        "SUNDIAL_TRANSACTION_TIMEOUT_S": "8",
    }
    env.update(overrides)
    return env


async def partition_owners(etcd: Any, cluster: str) -> dict[int, str]:
    """Partition -> owning node id, as recorded in etcd."""
    prefix = f"/sundial/{cluster}/partitions/"
    return {
        int(kv.key.decode().removeprefix(prefix)): kv.value.decode()
        for kv in await etcd.get_prefix(prefix.encode())
    }


async def assert_contiguous_runs(pool: asyncpg.Pool, every: timedelta, first_due: datetime) -> int:
    """Every job has exactly one run per occurrence from ``first_due`` up to its
    ``next_run_at``: nothing lost, nothing twice. Returns the number of runs."""
    rows = await pool.fetch(
        "SELECT j.job_id, j.next_run_at, count(r.*) AS runs,"
        " count(DISTINCT r.scheduled_at) AS distinct_runs, min(r.scheduled_at) AS first,"
        " max(r.scheduled_at) AS last"
        " FROM jobs j LEFT JOIN job_runs r USING (job_id) GROUP BY j.job_id, j.next_run_at"
    )
    total = 0
    for row in rows:
        expected = (row["next_run_at"] - first_due) // every
        assert row["runs"] == row["distinct_runs"] == expected, dict(row)
        if expected:
            assert row["first"] == first_due and row["last"] == row["next_run_at"] - every
        total += row["runs"]
    return total


async def dead_letters(jetstream: Any, tenant_id: str = TENANT) -> list[Any]:
    """Every DeadLetter on the tenant's subject so far (SUNDIAL_DEAD keeps them)."""
    sub = await jetstream.subscribe(
        dead_subject(tenant_id), stream=DEAD_STREAM, ordered_consumer=True
    )
    letters = []
    try:
        while True:
            try:
                message = await sub.next_msg(timeout=0.5)
            except TimeoutError:
                return letters
            letters.append(events_pb2.DeadLetter.FromString(message.data))
    finally:
        await sub.unsubscribe()


async def read_dispatches(jetstream: Any, from_seq: int) -> tuple[list[Any], int]:
    """RunDispatch messages stored in SUNDIAL_RUNS from sequence ``from_seq`` on.

    Reads by sequence (STREAM.MSG.GET) instead of through a consumer: a work-queue stream
    refuses a second consumer overlapping the executors' durable one.

    Returns:
        The messages and the sequence to continue from.
    """
    messages = []
    seq = from_seq
    while True:
        try:
            raw = await jetstream.get_msg(RUNS_STREAM, seq=seq, next=True, subject="sundial.runs.>")
        except NotFoundError:
            return messages, seq
        messages.append(events_pb2.RunDispatch.FromString(raw.data))
        seq = raw.seq + 1


async def issue_token(pool: asyncpg.Pool, role: Role) -> str:
    """A token of ``role`` in ``api_tokens``, as AdminService.CreateApiToken writes it."""
    token = f"sundial-test-{secrets.token_urlsafe(16)}"
    tenant = None
    if role is Role.TENANT:
        tenant = f"owner-{secrets.token_hex(4)}"
        await add_tenant(pool, tenant)
    await pool.execute(
        "INSERT INTO api_tokens (tenant_id, role, token_hash, prefix) VALUES ($1, $2, $3, $4)",
        tenant,
        role.value,
        token_hash(token),
        token[:12],
    )
    return token


async def set_schedule(conn: Any, job_id: uuid.UUID, schedule: object) -> None:
    """Write a job's schedule document and its digest, as the API's update_job does
    (``schedule``: the jsonb value, a dict or JSON text)."""
    await conn.execute(
        "UPDATE job_definitions SET schedule = $2 WHERE job_id = $1", job_id, schedule
    )
    await conn.execute(RECORD_DIGESTS, [job_id])
