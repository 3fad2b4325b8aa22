"""Store methods for jobs: reads, creates, updates, revisions, pause, resume, delete."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TypeVar

import asyncpg

from sundial.api.model import (
    Job,
    JobFilter,
    JobRevision,
    NewJob,
)
from sundial.api.store._base import (
    CLIENT_JOB_ID_INDEX,
    NAME_INDEX,
    Conn,
    JobIdTaken,
    RequestClaim,
    job_from_row,
    one,
    queries,
    translate,
)
from sundial.api.store._calendars import check_calendar_versions
from sundial.api.store._operations import filter_args, filtered
from sundial.api.store._params import InsertJobs, UpdateJob, distinct_calendars, writer
from sundial.api.store._requests import RequestStore
from sundial.core.errors import AlreadyExists, ResourceExhausted
from sundial.job import JobSpec, spec_from_columns
from sundial.schedule import Calendar


class _Unmatched(Exception):
    """Rolls back a transaction whose conditional write matched nothing."""


class JobStore(RequestStore):
    """Jobs and their revisions."""

    _pool: asyncpg.Pool

    @translate
    async def get_job(self, tenant_id: str, job_id: uuid.UUID) -> Job | None:
        """Tenant ``tenant_id``'s job ``job_id``, or None (also for another tenant's)."""
        row = await self._pool.fetchrow(queries.get_job, job_id, tenant_id)
        return None if row is None else job_from_row(row)

    @translate
    async def job_uid(self, tenant_id: str, client_id: str) -> uuid.UUID | None:
        """The uid of the tenant's job with client-chosen id ``client_id``, or None."""
        return await self._pool.fetchval(queries.job_uid, tenant_id, client_id)

    @translate
    async def get_jobs(self, tenant_id: str, job_ids: Sequence[uuid.UUID]) -> list[Job]:
        """The tenant's jobs among ``job_ids``, in that order; missing ones are left out."""
        rows = await self._pool.fetch(queries.get_jobs, list(job_ids), tenant_id)
        by_id = {row["job_id"]: job_from_row(row) for row in rows}
        return [by_id[job_id] for job_id in job_ids if job_id in by_id]

    @translate
    async def list_jobs(
        self,
        tenant_id: str,
        job_filter: JobFilter,
        *,
        after: str,
        name_upper_bound: str | None,
        limit: int,
    ) -> list[Job]:
        """Up to ``limit`` jobs by name after ``after`` matching the filter."""
        rows = await filtered(
            self._pool,
            queries.list_jobs,
            tenant_id,
            *filter_args(tenant_id, job_filter, name_upper_bound),
            after,
            limit,
        )
        return [job_from_row(row) for row in rows]

    @translate
    async def create_jobs(
        self,
        tenant_id: str,
        jobs: Sequence[NewJob],
        now: datetime,
        *,
        claim: RequestClaim | None = None,
        single: bool = True,
        traceparent: str = "",
        meanwhile: Callable[[], None] | None = None,
    ) -> None:
        """Insert ``jobs`` atomically, within the tenant's max_jobs quota; ``traceparent``
        is the creating call's trace context (empty: none), which their first runs link to.

        ``meanwhile``, if given, is called once, on this thread, as soon as the insert
        statement is sent, while PostgreSQL runs it: work the caller wants only if the
        insert succeeds (BatchCreateJobs builds its answer there), overlapped with the
        statement instead of following it. It decides nothing: its result is the caller's,
        and a failure of the insert is raised as without it. Should it raise, that error
        is raised and nothing is written (the insert then runs in a transaction).

        Raises:
            RequestTaken: ``claim``'s key already has a live record (nothing written).
            AlreadyExists: A name is taken; the field names the entry (``jobs[3].name``
                in a batch, ``name`` otherwise).
            JobIdTaken: A client job id is taken (``jobs[3].job_id``, ``job_id``).
            ResourceExhausted: The quota would be exceeded.
        """
        try:
            await self._insert_jobs(
                tenant_id,
                jobs,
                now,
                claim=claim,
                single=single,
                traceparent=traceparent,
                meanwhile=meanwhile,
            )
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name not in (NAME_INDEX, CLIENT_JOB_ID_INDEX):
                raise
            if not single:
                # Name the clashing entry (nothing was written: the statement failed).
                async with self._pool.acquire() as conn:
                    await self._check_taken(conn, tenant_id, jobs)
            if exc.constraint_name == NAME_INDEX:
                raise  # taken by a job deleted since: the constraint's own message
            # Taken by a create that committed after the check (or, for a single job,
            # instead of it).
            raise JobIdTaken(
                "job_id" if single else "jobs", jobs[0].client_id if single else None
            ) from exc

    async def _insert_jobs(
        self,
        tenant_id: str,
        jobs: Sequence[NewJob],
        now: datetime,
        *,
        claim: RequestClaim | None,
        single: bool,
        traceparent: str,
        meanwhile: Callable[[], None] | None,
    ) -> None:
        params = InsertJobs.of(tenant_id, jobs, now, traceparent)
        named = distinct_calendars([c for job in jobs for c in job.calendars])

        async def insert(conn: Conn) -> None:
            statement = conn.fetchval(*queries.bind("insert_jobs", params))
            if meanwhile is None:
                inserted = await statement
            else:
                inserted = await _while_running(statement, meanwhile)
            if inserted == 0:
                if not single:
                    await self._check_taken(conn, tenant_id, jobs)  # the error it had
                await self._quota_exceeded(conn, tenant_id, len(jobs))

        async with self._pool.acquire() as conn:
            if claim is None and single and not named and meanwhile is None:
                # One statement in autocommit: atomic, and the fewest round trips.
                # (With `meanwhile`, in a transaction: should it fail after the
                # statement committed on its own, nothing would be undone.)
                await insert(conn)
                return
            async with conn.transaction():
                await check_calendar_versions(conn, tenant_id, named)
                if claim is not None:
                    await self._claim(
                        conn,
                        tenant_id,
                        claim,
                        now,
                        job_id=params.job_ids[0] if single else None,
                        job_ids=None if single else params.job_ids,
                    )
                # A name or client id taken is found by the unique constraints, and a
                # batch's clashing entry named only then (create_jobs): no read of the
                # batch's names before the insert.
                await insert(conn)

    @staticmethod
    async def _check_taken(conn: Conn, tenant_id: str, jobs: Sequence[NewJob]) -> None:
        """Name the first entry of a batch whose name, or else client id, the tenant's
        jobs already hold (``jobs[3].name``, ``jobs[3].job_id``), if one does.

        Raises:
            AlreadyExists: A name is taken.
            JobIdTaken: A client job id is taken.
        """
        names = [job.spec.name for job in jobs]
        rows = await conn.fetch(queries.existing_names, tenant_id, names)
        taken = {row["name"] for row in rows}
        if taken:
            index = next(i for i, name in enumerate(names) if name in taken)
            raise AlreadyExists(f"jobs[{index}].name: a job named {names[index]!r} already exists")
        client_ids = [job.client_id for job in jobs if job.client_id is not None]
        if client_ids:
            rows = await conn.fetch(queries.existing_client_job_ids, tenant_id, client_ids)
            used = {row["client_job_id"] for row in rows}
            if used:
                index = next(i for i, job in enumerate(jobs) if job.client_id in used)
                raise JobIdTaken(f"jobs[{index}].job_id", jobs[index].client_id)

    @staticmethod
    async def _quota_exceeded(conn: Conn, tenant_id: str, wanted: int) -> None:
        usage = one(await conn.fetchrow(queries.quota_usage, tenant_id))
        raise ResourceExhausted(
            f"the tenant's max_jobs quota ({usage['max_jobs']}) would be exceeded: "
            f"{usage['job_count']} jobs exist, {wanted} more requested",
            metadata={
                "quota": "max_jobs",
                "limit": str(usage["max_jobs"]),
                "usage": str(usage["job_count"]),
            },
        )

    @translate
    async def update_job(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        *,
        read_version: int,
        spec: JobSpec,
        reschedule: bool,
        next_run_at: datetime | None,
        now: datetime,
        claim: RequestClaim | None = None,
        calendars: Sequence[Calendar] = (),
    ) -> bool:
        """Write the job's new definition if it is still at ``read_version``, with the
        contents of the calendars its schedule names (checked still current).

        Returns:
            False when the job changed (or vanished) since it was read (nothing written,
            ``claim`` included).

        Raises:
            RequestTaken: ``claim``'s key already has a live record (nothing written).
        """
        assert spec.target is not None
        params = UpdateJob.of(
            tenant_id,
            job_id,
            spec,
            read_version=read_version,
            reschedule=reschedule,
            next_run_at=next_run_at,
            now=now,
            calendars=calendars,
        )
        args = queries.bind("update_job", params)
        if claim is None and not calendars:
            return await self._pool.fetchval(*args) is not None
        async with self._pool.acquire() as conn:
            try:
                async with conn.transaction():
                    await check_calendar_versions(conn, tenant_id, distinct_calendars(calendars))
                    if claim is not None:
                        await self._claim(conn, tenant_id, claim, now, job_id=job_id)
                    if await conn.fetchval(*args) is None:
                        raise _Unmatched
            except _Unmatched:
                return False
        return True

    @translate
    async def job_revisions(
        self, tenant_id: str, job_id: uuid.UUID, *, before_version: int | None, limit: int
    ) -> list[JobRevision]:
        """The job's revisions, newest first (versions below ``before_version``)."""
        rows = await self._pool.fetch(
            queries.list_job_revisions, job_id, tenant_id, before_version, limit
        )
        return [
            JobRevision(
                version=row["version"],
                spec=spec_from_columns(row),
                changed_fields=tuple(row["changed_fields"]),
                changed_by=row["changed_by"],
                request_id=row["request_id"],
                create_time=row["created_at"],
            )
            for row in rows
        ]

    @translate
    async def job_version(self, tenant_id: str, job_id: uuid.UUID) -> int | None:
        """The job's version, or None when it does not exist (for this tenant)."""
        return await self._pool.fetchval(queries.job_version, job_id, tenant_id)

    @translate
    async def pause_job(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        expected_version: int,
        note: str,
        now: datetime,
        *,
        until: datetime | None = None,
    ) -> bool:
        """Pause the job (at ``expected_version`` unless 0) until ``until`` (None: until
        resumed); False when not matched."""
        changed = await self._pool.fetchval(
            queries.pause_job, job_id, tenant_id, expected_version, note, now, *writer(), until
        )
        return changed is not None

    @translate
    async def resume_job(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        *,
        read_version: int,
        note: str,
        next_run_at: datetime | None,
        now: datetime,
        calendars: Sequence[Calendar] = (),
    ) -> bool:
        """Resume the job if still at ``read_version``; False when not matched.

        Args:
            calendars: The calendars ``next_run_at`` was computed with, as read with
                their versions: locked first and checked current, as for any job write.

        Raises:
            CalendarChanged: One of them changed since (compute again).
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await check_calendar_versions(conn, tenant_id, calendars)
            changed = await conn.fetchval(
                queries.resume_job,
                job_id,
                tenant_id,
                read_version,
                note,
                now,
                next_run_at,
                *writer(),
            )
        return changed is not None

    @translate
    async def delete_job(
        self, tenant_id: str, job_id: uuid.UUID, expected_version: int, now: datetime
    ) -> bool:
        """Delete the job, cancel its unfinished runs, release its quota slot.

        Returns:
            False when no job matched (unknown, or not at ``expected_version``).
        """
        async with self._pool.acquire() as conn, conn.transaction():
            version = await conn.fetchval(
                queries.lock_job_for_delete, job_id, tenant_id, expected_version
            )
            if version is None:
                return False
            await conn.execute(queries.cancel_runs_of_job, [job_id], now, "job deleted")
            await conn.execute(queries.delete_job, job_id, tenant_id)
            await conn.execute(queries.remove_job_from_quota, tenant_id)
            return True


T = TypeVar("T")


async def _while_running(statement: Awaitable[T], meanwhile: Callable[[], None]) -> T:
    """``statement``'s result, with ``meanwhile()`` run while PostgreSQL executes it.

    The statement's task gets one turn of the event loop first, in which asyncpg encodes
    and sends it (a statement not yet prepared on the connection sends its Parse only:
    the overlap is then smaller, the result the same). Should ``meanwhile`` raise, the
    statement is cancelled and waited for (its connection free again before the
    transaction ends), and the error raised.
    """
    pending = asyncio.ensure_future(statement)
    try:
        await asyncio.sleep(0)
        meanwhile()
    except BaseException:
        pending.cancel()
        await asyncio.wait([pending])
        if not pending.cancelled():
            pending.exception()  # retrieved: the error raised is meanwhile's
        raise
    return await pending
