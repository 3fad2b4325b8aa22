"""Store methods for authentication, jobs and runs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from sundial.api.model import (
    Job,
    JobFilter,
    JobRevision,
    NewJob,
    Run,
    RunFilter,
)
from sundial.api.store._base import (
    CLIENT_JOB_ID_INDEX,
    Conn,
    JobIdTaken,
    RequestClaim,
    RequestRecord,
    RequestTaken,
    job_from_row,
    one,
    queries,
    run_from_row,
    translate,
)
from sundial.api.store._calendars import check_calendar_versions
from sundial.core.auth import current_credential
from sundial.core.db import json_text
from sundial.core.errors import AlreadyExists, ResourceExhausted
from sundial.core.logging import request_id_var
from sundial.job import (
    RESOLVED_CALENDARS_KEY,
    JobSpec,
    calendars_from_json,
    calendars_to_json,
    policies_to_json,
    schedule_from_json,
    schedule_to_json,
    spec_from_columns,
    spec_to_columns,
    target_to_json,
)
from sundial.run import RunKind, RunStatus
from sundial.schedule import Calendar, Schedule


def _calendars_doc(calendars: Sequence[Calendar]) -> list[dict[str, Any]] | None:
    """``job_definitions.calendars`` (NULL for a schedule naming none: migration 0015)."""
    return calendars_to_json(list(calendars)) if calendars else None


def _calendars_text(calendars: Sequence[Calendar]) -> str | None:
    """:func:`_calendars_doc` as JSON text, for a ``text[]`` parameter of many jobs."""
    doc = _calendars_doc(calendars)
    return None if doc is None else json.dumps(doc)


def _distinct(calendars: Sequence[Calendar]) -> list[Calendar]:
    return list({c.name: c for c in calendars}.values())


def _each(encode: Callable[[Any], Any], values: Sequence[Any]) -> list[Any]:
    """``encode`` of every value, once per distinct value (a batch of 1,000 jobs shares a
    few schedules and policies; an unhashable value is encoded on its own)."""
    done: dict[Any, Any] = {}
    out = []
    for value in values:
        try:
            if value not in done:
                done[value] = encode(value)
            out.append(done[value])
        except TypeError:
            out.append(encode(value))
    return out


def _schedule_text(schedule: Schedule) -> str:
    return json_text(schedule_to_json(schedule))


def _target_text(target: Any) -> str:
    return json_text(target_to_json(target))


def _policies_text(policies: Any) -> str:
    return json_text(policies_to_json(policies))


class _Unmatched(Exception):
    """Rolls back a transaction whose conditional write matched nothing."""


def _writer() -> tuple[str | None, str | None]:
    """Who is writing (the caller's token id; ``admin`` for the bootstrap token) and the
    RPC's request id, recorded with the job's revision (migration 0012)."""
    credential = current_credential()
    actor = None
    if credential is not None:
        actor = str(credential.token_id) if credential.token_id is not None else "admin"
    return actor, request_id_var.get()


@dataclass(frozen=True, slots=True)
class InsertJobs:
    """insert_jobs' parameters by name: one entry per job in each list (the ``unnest``
    arrays), built once from the jobs; :meth:`args` lays them out as asyncpg takes them."""

    tenant_id: str
    job_ids: list[uuid.UUID]
    names: list[str]
    partition_ids: list[int]
    next_run_ats: list[datetime | None]
    paused: list[bool]
    schedules: list[str]
    """The JSON documents as text (sundial.core.db.json_text): each distinct one encoded
    once, as are ``targets`` and ``policies``."""
    targets: list[str]
    policies: list[str]
    payloads: list[bytes]
    labels: list[str]
    descriptions: list[str]
    pause_notes: list[str]
    client_job_ids: list[str | None]
    now: datetime
    traceparent: str | None
    changed_by: str | None
    request_id: str | None
    calendars: list[str | None]
    """The referenced calendars' contents per job as JSON text (None: it names none)."""

    @classmethod
    def of(
        cls, tenant_id: str, jobs: Sequence[NewJob], now: datetime, traceparent: str
    ) -> InsertJobs:
        """The parameters inserting ``jobs``, written by the caller (:func:`_writer`)."""
        specs = [job.spec for job in jobs]
        changed_by, request_id = _writer()
        return cls(
            tenant_id=tenant_id,
            job_ids=[job.job_id for job in jobs],
            names=[spec.name for spec in specs],
            partition_ids=[job.partition_id for job in jobs],
            next_run_ats=[job.next_run_at for job in jobs],
            paused=[spec.paused for spec in specs],
            schedules=_each(_schedule_text, [spec.schedule for spec in specs]),
            targets=_each(_target_text, [spec.target for spec in specs]),
            policies=_each(_policies_text, [spec.policies for spec in specs]),
            payloads=[spec.payload for spec in specs],
            labels=[json_text(spec.labels) if spec.labels else "{}" for spec in specs],
            descriptions=[spec.description for spec in specs],
            pause_notes=[spec.pause_note for spec in specs],
            client_job_ids=[job.client_id for job in jobs],
            now=now,
            traceparent=traceparent or None,
            changed_by=changed_by,
            request_id=request_id,
            calendars=[_calendars_text(job.calendars) for job in jobs],
        )

    def args(self) -> tuple[Any, ...]:
        """The positional parameters of insert_jobs (queries.sql names each)."""
        return (
            self.tenant_id,  # $1
            self.job_ids,  # $2
            self.names,  # $3
            self.partition_ids,  # $4
            self.next_run_ats,  # $5
            self.paused,  # $6
            self.schedules,  # $7
            self.targets,  # $8
            self.policies,  # $9
            self.payloads,  # $10
            self.labels,  # $11
            self.descriptions,  # $12
            self.pause_notes,  # $13
            self.client_job_ids,  # $14
            self.now,  # $15
            len(self.job_ids),  # $16: how many jobs (the quota check)
            self.traceparent,  # $17
            self.changed_by,  # $18
            self.request_id,  # $19
            self.calendars,  # $20
        )


class JobStore:
    """Tokens (authentication), jobs and runs."""

    _pool: asyncpg.Pool

    # --- jobs -----------------------------------------------------------------------------

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
        rows = await self._pool.fetch(
            queries.list_jobs,
            tenant_id,
            after,
            job_filter.name_prefix or None,
            name_upper_bound,
            job_filter.paused,
            dict(job_filter.labels) if job_filter.labels else None,
            limit,
        )
        return [job_from_row(row) for row in rows]

    @translate
    async def find_request(
        self, tenant_id: str, method: str, request_id: str, since: datetime
    ) -> RequestRecord | None:
        """The live idempotency record of this key (created at or after ``since``)."""
        row = await self._pool.fetchrow(queries.find_request, tenant_id, method, request_id, since)
        if row is None:
            return None
        return RequestRecord(
            request_hash=bytes(row["request_hash"]),
            job_id=row["job_id"],
            job_ids=tuple(row["job_ids"] or ()),
            scheduled_at=row["scheduled_at"],
            outcome=row["outcome"],
        )

    async def _claim(
        self,
        conn: Conn,
        tenant_id: str,
        claim: RequestClaim,
        now: datetime,
        *,
        job_id: uuid.UUID | None = None,
        job_ids: Sequence[uuid.UUID] | None = None,
    ) -> None:
        claimed = await conn.fetchval(
            queries.claim_request,
            tenant_id,
            claim.method,
            claim.request_id,
            claim.request_hash,
            job_id,
            None if job_ids is None else list(job_ids),
            None,
            now,
            claim.expired_before,
            claim.outcome,
        )
        if not claimed:
            raise RequestTaken

    @translate
    async def record_request(
        self, tenant_id: str, claim: RequestClaim, job_id: uuid.UUID, now: datetime
    ) -> None:
        """Record ``claim`` for a call that wrote nothing else (an UNCHANGED apply).

        Raises:
            RequestTaken: The key already has a live record.
        """
        async with self._pool.acquire() as conn:
            await self._claim(conn, tenant_id, claim, now, job_id=job_id)

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
    ) -> None:
        """Insert ``jobs`` atomically, within the tenant's max_jobs quota; ``traceparent``
        is the creating call's trace context (empty: none), which their first runs link to.

        Raises:
            RequestTaken: ``claim``'s key already has a live record (nothing written).
            AlreadyExists: A name is taken; the field names the entry (``jobs[3].name``
                in a batch, ``name`` otherwise).
            JobIdTaken: A client job id is taken (``jobs[3].job_id``, ``job_id``).
            ResourceExhausted: The quota would be exceeded.
        """
        try:
            await self._insert_jobs(
                tenant_id, jobs, now, claim=claim, single=single, traceparent=traceparent
            )
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name != CLIENT_JOB_ID_INDEX:
                raise
            # Taken by a create that committed after the check below (or, for a single
            # job, instead of it).
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
    ) -> None:
        params = InsertJobs.of(tenant_id, jobs, now, traceparent)
        names = params.names
        named = _distinct([c for job in jobs for c in job.calendars])

        async def insert(conn: Conn) -> None:
            inserted = await conn.fetchval(queries.insert_jobs, *params.args())
            if inserted == 0:
                await self._quota_exceeded(conn, tenant_id, len(jobs))

        async with self._pool.acquire() as conn:
            if claim is None and single and not named:
                # One statement in autocommit: atomic, and the fewest round trips.
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
                if not single:
                    # Name the clashing entry; a single create relies on the unique
                    # constraint instead (one round trip less).
                    rows = await conn.fetch(queries.existing_names, tenant_id, names)
                    taken = {row["name"] for row in rows}
                    if taken:
                        index = next(i for i, name in enumerate(names) if name in taken)
                        raise AlreadyExists(
                            f"jobs[{index}].name: a job named {names[index]!r} already exists"
                        )
                    client_ids = [job.client_id for job in jobs if job.client_id is not None]
                    if client_ids:
                        rows = await conn.fetch(
                            queries.existing_client_job_ids, tenant_id, client_ids
                        )
                        used = {row["client_job_id"] for row in rows}
                        if used:
                            index = next(i for i, job in enumerate(jobs) if job.client_id in used)
                            raise JobIdTaken(f"jobs[{index}].job_id", jobs[index].client_id)
                await insert(conn)

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
        doc = spec_to_columns(spec)
        args = (
            job_id,
            tenant_id,
            read_version,
            doc["name"],
            reschedule,
            next_run_at,
            now,
            doc["schedule"],
            doc["target"],
            doc["policies"],
            doc["payload"],
            doc["labels"],
            doc["description"],
            *_writer(),
            _calendars_doc(calendars),
        )
        if claim is None and not calendars:
            return await self._pool.fetchval(queries.update_job, *args) is not None
        async with self._pool.acquire() as conn:
            try:
                async with conn.transaction():
                    await check_calendar_versions(conn, tenant_id, _distinct(calendars))
                    if claim is not None:
                        await self._claim(conn, tenant_id, claim, now, job_id=job_id)
                    if await conn.fetchval(queries.update_job, *args) is None:
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
        self, tenant_id: str, job_id: uuid.UUID, expected_version: int, note: str, now: datetime
    ) -> bool:
        """Pause the job (at ``expected_version`` unless 0); False when not matched."""
        changed = await self._pool.fetchval(
            queries.pause_job, job_id, tenant_id, expected_version, note, now, *_writer()
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
                *_writer(),
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
            await conn.execute(queries.cancel_runs_of_job, job_id, now, "job deleted")
            await conn.execute(queries.delete_job, job_id, tenant_id)
            await conn.execute(queries.remove_job_from_quota, tenant_id)
            return True

    # --- runs -----------------------------------------------------------------------------

    @translate
    async def job_schedule(
        self, tenant_id: str, job_id: uuid.UUID
    ) -> tuple[Schedule, dict[str, Calendar]] | None:
        """The job's schedule and the calendars it names, or None when the job does not
        exist (for this tenant)."""
        doc = await self._pool.fetchval(queries.job_schedule, job_id, tenant_id)
        return None if doc is None else _stored_schedule(doc)

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
            await _check_waiting(conn, tenant_id, len(instants), waiting_limit)
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
            await _check_waiting(conn, tenant_id, 1, waiting_limit)
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
        return run_from_row(row), *_stored_schedule(row["schedule"])

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


def _stored_schedule(doc: dict[str, Any]) -> tuple[Schedule, dict[str, Calendar]]:
    """A dispatch schedule document (migration 0015): the schedule and its calendars."""
    return schedule_from_json(doc), calendars_from_json(doc.get(RESOLVED_CALENDARS_KEY))


async def _check_waiting(conn: Conn, tenant_id: str, adding: int, limit: int | None) -> None:
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
