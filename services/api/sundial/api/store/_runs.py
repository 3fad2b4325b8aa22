"""Store methods for runs the API reads or writes: trigger, backfill, list, get, replay, cancel."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from sundial.api.model import (
    Run,
    RunFilter,
)
from sundial.api.store._base import (
    Conn,
    RequestClaim,
    queries,
    run_from_row,
    translate,
)
from sundial.api.store._requests import RequestStore
from sundial.core.errors import AlreadyExists, ResourceExhausted
from sundial.job import (
    RESOLVED_CALENDARS_KEY,
    calendars_from_json,
    schedule_from_json,
)
from sundial.run import RunKind, RunStatus
from sundial.schedule import Calendar, Schedule


class RunStore(RequestStore):
    """Runs of a tenant's jobs."""

    _pool: asyncpg.Pool

    @translate
    async def job_schedule(
        self, tenant_id: str, job_id: uuid.UUID
    ) -> tuple[Schedule, dict[str, Calendar]] | None:
        """The job's schedule and the calendars it names, or None when the job does not
        exist (for this tenant)."""
        doc = await self._pool.fetchval(queries.job_schedule, job_id, tenant_id)
        return None if doc is None else stored_schedule(doc)

    @translate
    async def insert_runs(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        instants: Sequence[datetime],
        kind: RunKind,
        now: datetime,
        *,
        traceparents: Sequence[str] | None = None,
        waiting_limit: int | None = None,
    ) -> list[Run] | None:
        """Insert QUEUED runs at ``instants``; those that exist already are skipped.
        ``traceparents`` (one per instant; None while tracing is off) are their trace
        contexts.

        Returns:
            The runs created, oldest first; None when the job does not exist.

        Raises:
            ResourceExhausted: The tenant's requested runs not started yet would pass
                ``waiting_limit`` (nothing written).
        """
        async with self._pool.acquire() as conn, conn.transaction():
            job = await conn.fetchrow(queries.lock_job_for_runs, job_id, tenant_id)
            if job is None:
                return None
            await check_waiting(conn, tenant_id, len(instants), waiting_limit)
            rows = await conn.fetch(
                queries.insert_runs,
                job_id,
                tenant_id,
                job["partition_id"],
                list(instants),
                kind.value,
                now,
                None if traceparents is None else list(traceparents),
            )
        return sorted((run_from_row(row) for row in rows), key=lambda run: run.scheduled_at)

    @translate
    async def trigger(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        at: datetime,
        now: datetime,
        *,
        claim: RequestClaim | None = None,
        max_collisions: int = 1000,
        traceparent: str = "",
        waiting_limit: int | None = None,
    ) -> Run | None:
        """Insert a MANUAL run at ``at``, moved forward 1 µs per collision, with the
        trace context ``traceparent`` (empty: none).

        Returns:
            The run; None when the job does not exist.

        Raises:
            RequestTaken: ``claim``'s key already has a live record (nothing written).
        """
        async with self._pool.acquire() as conn, conn.transaction():
            job = await conn.fetchrow(queries.lock_job_for_runs, job_id, tenant_id)
            if job is None:
                return None
            await check_waiting(conn, tenant_id, 1, waiting_limit)
            if claim is not None:
                await self._claim(conn, tenant_id, claim, now, job_id=job_id)
            for _ in range(max_collisions):
                rows = await conn.fetch(
                    queries.insert_runs,
                    job_id,
                    tenant_id,
                    job["partition_id"],
                    [at],
                    RunKind.MANUAL.value,
                    now,
                    [traceparent or None],
                )
                if rows:
                    break
                at += timedelta(microseconds=1)
            else:  # pragma: no cover - a thousand runs in one millisecond
                raise AlreadyExists("a run already exists at every instant tried; retry")
            if claim is not None:
                await conn.execute(
                    queries.set_request_run, tenant_id, claim.method, claim.request_id, at
                )
        return run_from_row(rows[0])

    @translate
    async def get_run(
        self, tenant_id: str, job_id: uuid.UUID, scheduled_at: datetime
    ) -> tuple[Run, Schedule, dict[str, Calendar]] | None:
        """The run, its job's schedule and calendars (for due_at), or None."""
        row = await self._pool.fetchrow(queries.get_run, job_id, scheduled_at, tenant_id)
        if row is None:
            return None
        return run_from_row(row), *stored_schedule(row["schedule"])

    @translate
    async def list_runs(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        run_filter: RunFilter,
        *,
        before: datetime | None,
        limit: int,
    ) -> list[Run]:
        """Up to ``limit`` of the job's runs, newest first, scheduled before ``before``."""
        rows = await self._pool.fetch(
            queries.list_runs,
            job_id,
            tenant_id,
            before,
            sorted(s.value for s in run_filter.statuses) or None,
            sorted(k.value for k in run_filter.kinds) or None,
            run_filter.scheduled_after,
            run_filter.scheduled_before,
            limit,
        )
        return [run_from_row(row) for row in rows]

    @translate
    async def count_active_runs(self, job_id: uuid.UUID) -> int:
        """The job's PENDING, QUEUED, RUNNING and RETRYING runs."""
        return await self._pool.fetchval(queries.count_active_runs, job_id)

    @translate
    async def replay_run(
        self, tenant_id: str, job_id: uuid.UUID, scheduled_at: datetime, now: datetime
    ) -> Run | None:
        """Queue a DEAD or CANCELLED run again; None when no such run matched."""
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchrow(queries.lock_job_for_runs, job_id, tenant_id) is None:
                return None
            row = await conn.fetchrow(queries.replay_run, job_id, scheduled_at, now)
        return None if row is None else run_from_row(row)

    @translate
    async def cancel_run(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        scheduled_at: datetime,
        reason: str,
        now: datetime,
    ) -> Run | None:
        """Cancel an unfinished run (or ask a RUNNING one to stop); None when none matched."""
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchrow(queries.lock_job_for_runs, job_id, tenant_id) is None:
                return None
            row = await conn.fetchrow(queries.cancel_run, job_id, scheduled_at, now, reason)
            if row is None:
                return None
            run = run_from_row(row)
            if run.status is RunStatus.CANCELLED:
                await conn.execute(queries.count_cancelled, job_id, now)
        return run


def stored_schedule(doc: dict[str, Any]) -> tuple[Schedule, dict[str, Calendar]]:
    """A dispatch schedule document (migration 0015): the schedule and its calendars."""
    return schedule_from_json(doc), calendars_from_json(doc.get(RESOLVED_CALENDARS_KEY))


async def check_waiting(conn: Conn, tenant_id: str, adding: int, limit: int | None) -> None:
    """Refuse ``adding`` more requested runs when the tenant's not started yet would pass
    its own ``max_waiting_requested_runs``, else ``limit``. Under the tenant's row lock
    (taken after the job's, as every job write does), so concurrent calls cannot pass it
    together."""
    if limit is None:
        return
    own = await conn.fetchrow(queries.tenant_quota_overrides, tenant_id)
    limit = (own["max_waiting_requested_runs"] if own else None) or limit
    waiting = await conn.fetchval(queries.count_waiting_requested_runs, tenant_id)
    if waiting + adding > limit:
        raise ResourceExhausted(
            f"the tenant's limit of {limit} triggered and backfilled runs waiting to start"
            f" is reached ({waiting} wait, {adding} more asked): let them run, or cancel some",
            metadata={
                "quota": "max_waiting_requested_runs",
                "limit": str(limit),
                "usage": str(waiting),
            },
        )
