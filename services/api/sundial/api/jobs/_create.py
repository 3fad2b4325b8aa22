"""Creating jobs: CreateJob, BatchCreateJobs, each idempotent with request_id."""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from asyncpg.pgproto.pgproto import UUID as FastUUID

from sundial.api import validation
from sundial.api.jobs._base import (
    BATCH_CREATE_JOBS,
    CREATE_JOB,
    OPTIMISTIC_ATTEMPTS,
    JobsBase,
    call_traceparent,
)
from sundial.api.jobs._schedule import checked_first_fire, first_fire, named_calendars
from sundial.api.kit import (
    RequestKey,
)
from sundial.api.model import (
    Job,
    JobStats,
    NewJob,
)
from sundial.api.store import CalendarChanged, RequestClaim, RequestRecord
from sundial.api.validation import field_prefix
from sundial.core.errors import (
    InvalidArgument,
    NotFound,
)
from sundial.core.memo import Memo
from sundial.core.partition import partition_of
from sundial.job import JobSpec
from sundial.schedule import Calendar

_NO_RUNS = JobStats()
"""A new job's stats (one immutable value for every job a batch creates)."""

T = TypeVar("T")


class JobCreation(JobsBase):
    """CreateJob and BatchCreateJobs (and ApplyJob's create)."""

    async def _create_once(
        self,
        tenant_id: str,
        key: RequestKey,
        work: Callable[[RequestClaim | None], Awaitable[T]],
        answer: Callable[[list[Job]], T],
    ) -> T:
        """``work`` (a create) done once per request id: a repeat answers (``answer``)
        the jobs the first call created, as they are now (NOT_FOUND if one is gone)."""

        async def replay(record: RequestRecord) -> T:
            ids = list(record.job_ids) if record.job_id is None else [record.job_id]
            jobs = await self._store.get_jobs(tenant_id, ids)
            if len(jobs) != len(ids):
                raise NotFound(
                    f"request_id {key.request_id!r} already created "
                    f"{'this job' if len(ids) == 1 else 'these jobs'}, and "
                    f"{'it was' if len(ids) == 1 else 'some were'} deleted since"
                )
            return answer(jobs)

        return await self._requests.once(tenant_id, key, work, replay)

    async def _prepare(
        self,
        tenant_id: str,
        spec: JobSpec,
        now: datetime,
        *,
        prefix: str = "",
        shared: validation.SharedChecks | None = None,
        fires: Memo | None = None,
        client_id: str | None = None,
        calendars: Mapping[str, Calendar] | None = None,
        job_id: uuid.UUID | None = None,
    ) -> NewJob:
        """Validate one new job and compute its first fire time.

        Args:
            client_id: Its client-chosen id (already checked), if any.
            shared: Checks shared by the jobs of one request (BatchCreateJobs).
            fires: First fire times by compiled schedule object, shared likewise: a
                schedule compiled once for many jobs fires first at the same instant.
            calendars: The tenant's calendars the schedule names (:meth:`_calendars`).
            job_id: Its uid, if drawn already (:func:`new_job_ids`); else a new one.
        """
        job_id = uuid.uuid4() if job_id is None else job_id
        if not spec.schedule.calendars:
            # No search through calendars: done here, in one step.
            with field_prefix(prefix):
                return _prepared_here(
                    spec, job_id, now, shared=shared, fires=fires, client_id=client_id
                )
        known = None
        if spec.schedule.jitter:
            # Its jitter check samples fire times through calendars (as long as a search):
            # checked, and its first fire time found, in one call to the pool.
            with field_prefix(prefix):
                spec, compiled, first = await self._offload.run(
                    tenant_id, checked_first_fire, spec, job_id, now, calendars
                )
            known = (compiled, first)
        else:
            with field_prefix(prefix):
                spec, compiled = validation.check_job_spec(
                    spec, job_id, now=now, shared=shared, calendars=calendars
                )
            known = None if fires is None else fires.get(id(compiled))
        if known is not None:
            next_run_at = known[1]
        else:
            next_run_at = await self._first_fire(tenant_id, compiled, spec.schedule, now)
            if fires is not None:  # kept with its schedule: the id is not reused meanwhile
                fires[id(compiled)] = (compiled, next_run_at)
        return NewJob(
            job_id=job_id,
            spec=spec,
            partition_id=partition_of(job_id),
            next_run_at=next_run_at,
            client_id=client_id,
            calendars=named_calendars(spec.schedule, calendars),
        )

    async def _prepare_all(
        self,
        tenant_id: str,
        specs: Sequence[JobSpec],
        ids: Sequence[str | None],
        now: datetime,
        calendars: Mapping[str, Calendar],
    ) -> list[NewJob]:
        """:meth:`_prepare` of each job of a batch, the checks and first fire times
        shared (docs/design.md section 8): a job whose schedule names no calendar in one
        plain step (no coroutine, no context manager per job), a failure's field given
        the job's index (``jobs[3].schedule.cron``) where it is raised."""
        shared = validation.SharedChecks()
        fires: Memo = {}
        prepared: list[NewJob] = []
        for i, (spec, job_id, client_id) in enumerate(
            zip(specs, new_job_ids(len(specs)), ids, strict=True)
        ):
            if spec.schedule.calendars:
                prepared.append(
                    await self._prepare(
                        tenant_id,
                        spec,
                        now,
                        prefix=f"jobs[{i}].",
                        shared=shared,
                        fires=fires,
                        client_id=client_id,
                        calendars=calendars,
                        job_id=job_id,
                    )
                )
                continue
            try:
                prepared.append(
                    _prepared_here(
                        spec, job_id, now, shared=shared, fires=fires, client_id=client_id
                    )
                )
            except InvalidArgument as exc:
                raise InvalidArgument(f"jobs[{i}].{exc.field}", exc.problem) from None
        return prepared

    @staticmethod
    def _created(tenant_id: str, new: NewJob, now: datetime) -> Job:
        return Job(
            job_id=new.job_id,
            tenant_id=tenant_id,
            spec=new.spec,
            partition_id=new.partition_id,
            next_run_at=new.next_run_at,
            version=1,
            create_time=now,
            update_time=now,
            stats=_NO_RUNS,
            client_id=new.client_id,
            calendars={c.name: c for c in new.calendars} if new.calendars else {},
        )

    async def _create(
        self,
        tenant_id: str,
        spec: JobSpec,
        *,
        client_id: str | None,
        claim: RequestClaim | None,
        validate_only: bool = False,
    ) -> Job:
        """Validate one job and insert it (unless ``validate_only``)."""
        for attempt in range(OPTIMISTIC_ATTEMPTS):
            calendars = await self._calendars(tenant_id, [spec])
            now = self._clock.now()
            new = await self._prepare(
                tenant_id, spec, now, client_id=client_id, calendars=calendars
            )
            assert new.spec.target is not None
            await self._guard.check(new.spec.target, await self._egress.policy(tenant_id))
            if validate_only:
                break
            try:
                await self._store.create_jobs(
                    tenant_id, [new], now, claim=claim, traceparent=call_traceparent()
                )
                break
            except CalendarChanged:
                if attempt == OPTIMISTIC_ATTEMPTS - 1:
                    raise  # compute again with the calendars' new contents
        return self._created(tenant_id, new, now)

    async def create_job(
        self,
        tenant_id: str,
        spec: JobSpec,
        *,
        client_id: str | None = None,
        request_id: str = "",
        request_hash: bytes = b"",
    ) -> Job:
        """Validate and create one job; a repeated request_id returns the first job.

        Args:
            client_id: The client-chosen id (checked by the caller), or None.
        """

        async def work(claim: RequestClaim | None) -> list[Job]:
            return [await self._create(tenant_id, spec, client_id=client_id, claim=claim)]

        key = RequestKey(CREATE_JOB, request_id, request_hash)
        return (await self._create_once(tenant_id, key, work, lambda jobs: jobs))[0]

    async def batch_create(
        self,
        tenant_id: str,
        specs: Sequence[JobSpec],
        *,
        client_ids: Sequence[str | None] = (),
        request_id: str = "",
        request_hash: bytes = b"",
        answer: Callable[[list[Job]], T],
    ) -> T:
        """Validate and create up to 1,000 jobs in one transaction: all or none.

        Args:
            client_ids: Each job's client-chosen id (checked by the caller) or None;
                empty: none has one.
            answer: Builds the call's answer from the jobs created (a repeated request
                id: from the jobs the first call created); called while PostgreSQL
                runs the insert (``JobStore.create_jobs``' ``meanwhile``), so its cost
                overlaps with the statement's. Its result is returned.
        """
        validation.check_request_id(request_id)
        if not 1 <= len(specs) <= validation.MAX_BATCH:
            raise InvalidArgument(
                "jobs", f"must hold 1 to {validation.MAX_BATCH} jobs, got {len(specs)}"
            )
        ids = list(client_ids) or [None] * len(specs)
        first_holder: dict[str, int] = {}
        for i, client_id in enumerate(ids):
            if client_id is not None and first_holder.setdefault(client_id, i) != i:
                raise InvalidArgument(
                    f"jobs[{i}].job_id", f"same id as jobs[{first_holder[client_id]}]"
                )

        async def work(claim: RequestClaim | None) -> T:
            return await self._create_all(tenant_id, specs, ids, claim, answer)

        key = RequestKey(BATCH_CREATE_JOBS, request_id, request_hash)
        return await self._create_once(tenant_id, key, work, answer)

    async def _create_all(
        self,
        tenant_id: str,
        specs: Sequence[JobSpec],
        ids: Sequence[str | None],
        claim: RequestClaim | None,
        answer: Callable[[list[Job]], T],
    ) -> T:
        """Validate ``specs`` together and insert them in one transaction; ``answer`` of
        the jobs, built while the insert runs."""
        calendars = await self._calendars(tenant_id, specs)
        now = self._clock.now()
        prepared = await self._prepare_all(tenant_id, specs, ids, now, calendars)
        first_index: dict[str, int] = {}
        for i, new in enumerate(prepared):
            seen = first_index.setdefault(new.spec.name, i)
            if seen != i:
                raise InvalidArgument(f"jobs[{i}].name", f"same name as jobs[{seen}]")
        await self._guard.check_all(
            [(new.spec.target, f"jobs[{i}].target") for i, new in enumerate(prepared)],  # type: ignore[misc]
            await self._egress.policy(tenant_id),
        )
        answered: list[T] = []

        def build_answer() -> None:
            answered.append(answer([self._created(tenant_id, new, now) for new in prepared]))

        await self._store.create_jobs(
            tenant_id,
            prepared,
            now,
            claim=claim,
            single=False,
            traceparent=call_traceparent(),
            meanwhile=build_answer,
        )
        return answered[0]


def new_job_ids(count: int) -> list[uuid.UUID]:
    """``count`` new uids, each as :func:`uuid.uuid4` makes one (16 random bytes, version
    4, RFC 4122 variant), their bytes drawn from the system in one call rather than one
    per job and their version and variant bits set on all of them at once. Each is
    asyncpg's C ``UUID`` (a :class:`uuid.UUID` subclass, equal and hashing alike, what
    database rows carry): ``uuid.UUID(bytes=..., version=4)`` took about 2.5 µs a job,
    this 0.4 (a few percent of BatchCreateJobs' CPU, docs/design.md section 8)."""
    raw = bytearray(os.urandom(16 * count))
    raw[6::16] = bytes(0x40 | (octet & 0x0F) for octet in raw[6::16])  # version 4
    raw[8::16] = bytes(0x80 | (octet & 0x3F) for octet in raw[8::16])  # variant 10
    data = bytes(raw)
    return [FastUUID(data[at : at + 16]) for at in range(0, 16 * count, 16)]


def _prepared_here(
    spec: JobSpec,
    job_id: uuid.UUID,
    now: datetime,
    *,
    shared: validation.SharedChecks | None,
    fires: Memo | None,
    client_id: str | None,
) -> NewJob:
    """A new job whose schedule names no calendar checked, and its first fire time
    found, on this thread (a search without calendars is one step per spec)."""
    spec, compiled = validation.check_job_spec(spec, job_id, now=now, shared=shared)
    known = None if fires is None else fires.get(id(compiled))
    if known is not None:
        next_run_at = known[1]
    else:
        next_run_at = first_fire(compiled, spec.schedule, now)
        if fires is not None:  # kept with its schedule: the id is not reused meanwhile
            fires[id(compiled)] = (compiled, next_run_at)
    return NewJob(
        job_id=job_id,
        spec=spec,
        partition_id=partition_of(job_id),
        next_run_at=next_run_at,
        client_id=client_id,
    )
