"""Store methods for operating many jobs at once (docs/design.md section 13): counts and
lists by filters, bulk pause, resume, delete and trigger, timed pauses, tenant-wide runs."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from sundial.api.model import JobFilter, Run, RunFilter
from sundial.api.store._base import Conn, queries, run_from_row, translate
from sundial.api.store._calendars import check_calendar_versions
from sundial.api.store._params import writer
from sundial.api.store._runs import check_waiting
from sundial.job import calendars_from_json, schedule_from_json
from sundial.run import RunStatus
from sundial.schedule import Calendar, Schedule

ALL_STATUSES = tuple(status.value for status in RunStatus)
"""Every run status: what a tenant-wide ListRuns without a status filter reads."""


async def filtered(pool: asyncpg.Pool, query: str, *args: Any) -> list[asyncpg.Record]:
    """``query``'s rows, planned for these values of its optional filters
    (``custom_plans``, queries.sql): one transaction, two round trips more."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(queries.custom_plans)
        return await conn.fetch(query, *args)


def filter_args(tenant_id: str, job_filter: JobFilter, upper: str | None) -> list[Any]:
    """job_filters' parameters $2-$7 (queries.sql): the tenant-keyed label document, the
    selector's path predicate, the lower-case search text, the name range, paused."""
    document, path = job_filter.label_filters()
    return [
        None if document is None else {tenant_id: document},
        path,
        job_filter.search.lower() or None,
        job_filter.name_prefix or None,
        upper,
        job_filter.paused,
    ]


@dataclass(frozen=True, slots=True)
class Selected:
    """A job a bulk action acts on: what it is shown as and what resuming it needs."""

    job_id: uuid.UUID
    shown: str
    version: int
    fired_count: int
    last_fire_at: datetime | None
    schedule: Schedule
    calendars: dict[str, Calendar]
    tenant_id: str = ""


_DECODE_CHUNK = 500
"""Rows of a bulk selection decoded between two turns of the event loop."""


async def _all_selected(rows: Sequence[asyncpg.Record]) -> list[Selected]:
    """The rows of select_jobs or due_timed_pauses as Selected, each schedule and calendar
    document (as text) decoded once however many jobs share it, giving the event loop a
    turn every :data:`_DECODE_CHUNK` rows: 5,000 rows decoded at once held it 80 ms, and
    another tenant's calls waited for it (docs/design.md section 7)."""
    schedules: dict[str, Schedule] = {}
    calendars: dict[str | None, dict[str, Calendar]] = {}
    selected = []
    for i, row in enumerate(rows):
        if i and i % _DECODE_CHUNK == 0:
            await asyncio.sleep(0)
        schedule = schedules.get(row["schedule"])
        if schedule is None:
            schedule = schedules[row["schedule"]] = schedule_from_json(json.loads(row["schedule"]))
        named = calendars.get(row["calendars"])
        if named is None:
            document = row["calendars"]
            named = calendars[document] = calendars_from_json(
                json.loads(document) if document is not None else None
            )
        selected.append(
            Selected(
                job_id=row["job_id"],
                shown=row["shown"],
                version=row["version"],
                fired_count=row["fired_count"],
                last_fire_at=row["last_fire_at"],
                schedule=schedule,
                calendars=named,
                tenant_id=row.get("tenant_id", ""),
            )
        )
    return selected


@dataclass(frozen=True, slots=True)
class RunScan:
    """One page's scan of list_tenant_runs: the runs kept, each with its job's
    dispatch schedule document; how many runs were looked at; the key every status was
    read down to when one used its whole share (None: every status was read to its
    end)."""

    runs: list[tuple[Run, dict[str, Any]]]
    scanned: int
    boundary: tuple[datetime, uuid.UUID] | None


class OperationStore:
    """Counts, selections and bulk writes over a tenant's jobs; tenant-wide runs."""

    _pool: asyncpg.Pool

    @translate
    async def count_jobs(self, tenant_id: str, job_filter: JobFilter, upper: str | None) -> int:
        """The tenant's jobs matching ``job_filter`` (``upper``: its prefix's bound)."""
        rows = await filtered(
            self._pool, queries.count_jobs, tenant_id, *filter_args(tenant_id, job_filter, upper)
        )
        return int(rows[0][0])

    @translate
    async def select_jobs(
        self, tenant_id: str, job_filter: JobFilter, upper: str | None, limit: int
    ) -> list[Selected]:
        """Up to ``limit`` of the tenant's jobs matching ``job_filter``, by name."""
        rows = await filtered(
            self._pool,
            queries.select_jobs,
            tenant_id,
            *filter_args(tenant_id, job_filter, upper),
            limit,
        )
        return await _all_selected(rows)

    @translate
    async def pause_jobs(
        self,
        tenant_id: str,
        job_ids: Sequence[uuid.UUID],
        *,
        note: str,
        until: datetime | None,
        now: datetime,
        method: str,
    ) -> list[str]:
        """Pause those of ``job_ids`` not paused yet, each with a revision and an audit
        event of ``method``; the ids of the jobs paused, by name."""
        actor, request_id = writer()
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                queries.pause_jobs, list(job_ids), tenant_id, note, until, now, actor, request_id
            )
            shown = [row["shown"] for row in rows]
            await _audit(conn, tenant_id, now, method, shown)
        return shown

    @translate
    async def resume_jobs(
        self,
        tenant_id: str,
        resumes: Sequence[tuple[Selected, datetime | None]],
        *,
        note: str | None,
        now: datetime,
        calendars: Sequence[Calendar],
        method: str | None,
        changed_by: str | None = None,
    ) -> list[str]:
        """Resume those of the jobs still paused at the version they were read at, each
        with its next_run_at, a revision and (with ``method``) an audit event; the ids of
        the jobs resumed, by name. ``note`` None keeps each job's own.

        Args:
            calendars: The calendars the next fire times were computed with, as read with
                their versions: locked first and checked current, as for any job write.
            changed_by: Who the revisions name (default: the caller's token).

        Raises:
            CalendarChanged: One of ``calendars`` changed since (compute again).
        """
        actor, request_id = writer()
        async with self._pool.acquire() as conn, conn.transaction():
            await check_calendar_versions(conn, tenant_id, calendars)
            rows = await conn.fetch(
                queries.resume_jobs,
                tenant_id,
                [selected.job_id for selected, _ in resumes],
                [selected.version for selected, _ in resumes],
                [next_run_at for _, next_run_at in resumes],
                now,
                note,
                changed_by or actor,
                request_id,
            )
            shown = [row["shown"] for row in rows]
            if method is not None:
                await _audit(conn, tenant_id, now, method, shown)
        return shown

    @translate
    async def delete_jobs(
        self, tenant_id: str, job_ids: Sequence[uuid.UUID], *, now: datetime, method: str
    ) -> list[str]:
        """Delete the jobs, cancel their unfinished runs (as DeleteJob), release their
        quota slots, an audit event each; the ids of the jobs deleted, by name."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(queries.lock_jobs_for_delete, list(job_ids), tenant_id)
            gone = [row["job_id"] for row in rows]
            if gone:
                await conn.execute(queries.cancel_runs_of_job, gone, now, "job deleted")
                await conn.execute(queries.delete_jobs, gone, tenant_id)
            shown = [row["shown"] for row in sorted(rows, key=lambda row: row["name"])]
            await _audit(conn, tenant_id, now, method, shown)
        return shown

    @translate
    async def trigger_jobs(
        self,
        tenant_id: str,
        instants: Sequence[tuple[Selected, datetime]],
        *,
        now: datetime,
        method: str,
        waiting_limit: int | None,
        max_collisions: int = 1000,
    ) -> list[tuple[uuid.UUID, datetime]]:
        """One MANUAL run per job at its instant (moved by 1 µs while another run of the
        job has it), an audit event each; the (job, scheduled_at) of the runs made. A
        job deleted meanwhile gets none.

        Raises:
            ResourceExhausted: The tenant's requested runs waiting would pass
                ``waiting_limit`` (nothing written).
        """
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                queries.lock_jobs_for_runs, [s.job_id for s, _ in instants], tenant_id
            )
            partitions = {row["job_id"]: row["partition_id"] for row in rows}
            wanted = {s.job_id: at for s, at in instants if s.job_id in partitions}
            await check_waiting(conn, tenant_id, len(wanted), waiting_limit)
            made: dict[uuid.UUID, datetime] = {}
            for _ in range(max_collisions):
                if not wanted:
                    break
                ids = list(wanted)
                inserted = await conn.fetch(
                    queries.insert_manual_runs,
                    ids,
                    tenant_id,
                    [partitions[job_id] for job_id in ids],
                    [wanted[job_id] for job_id in ids],
                    now,
                )
                for row in inserted:
                    made[row["job_id"]] = row["scheduled_at"]
                    del wanted[row["job_id"]]
                wanted = {job_id: at + timedelta(microseconds=1) for job_id, at in wanted.items()}
            shown = {s.job_id: s.shown for s, _ in instants}
            await _audit(conn, tenant_id, now, method, [shown[job_id] for job_id in made])
        return list(made.items())

    @translate
    async def due_timed_pauses(self, now: datetime, limit: int) -> list[Selected]:
        """Up to ``limit`` paused jobs whose pause_until passed, oldest first, of any
        tenant (not locked past this call: resume_jobs checks the version it read)."""
        rows = await self._pool.fetch(queries.due_timed_pauses, now, limit)
        return await _all_selected(rows)

    @translate
    async def list_tenant_runs(
        self,
        tenant_id: str,
        run_filter: RunFilter,
        *,
        after: tuple[datetime, uuid.UUID] | None,
        job_filter: JobFilter,
        now: datetime,
        share: int,
        limit: int,
    ) -> RunScan:
        """A page of the tenant's runs, newest first, each status's range read up to
        ``share`` runs (see queries.sql list_tenant_runs)."""
        statuses = sorted(s.value for s in run_filter.statuses) or list(ALL_STATUSES)
        document, path = job_filter.label_filters()
        rows = await filtered(
            self._pool,
            queries.list_tenant_runs,
            tenant_id,
            statuses,
            None if after is None else after[0],
            None if after is None else after[1],
            run_filter.scheduled_after,
            run_filter.scheduled_before,
            sorted(k.value for k in run_filter.kinds) or None,
            run_filter.started_after,
            run_filter.started_before,
            None if document is None else {tenant_id: document},
            path,
            run_filter.late_only,
            now,
            limit,
            share,
        )
        first = rows[0]
        boundary = None if first["last_at"] is None else (first["last_at"], first["last_job"])
        runs = [(run_from_row(row), row["schedule"]) for row in rows if row["job_id"] is not None]
        return RunScan(runs, first["scanned"], boundary)


async def _audit(conn: Conn, tenant_id: str, now: datetime, method: str, shown: list[str]) -> None:
    """One audit event per job a bulk action changed (beside the call's own)."""
    if not shown:
        return
    actor, request_id = writer()
    await conn.execute(
        queries.insert_audit_events, tenant_id, now, actor or "", method, shown, request_id or ""
    )
