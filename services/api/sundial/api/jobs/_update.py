"""Changing a job's definition: UpdateJob, RollbackJob, ApplyJob."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from sundial.api import validation
from sundial.api.jobs._base import APPLY_JOB, OPTIMISTIC_ATTEMPTS, with_outcome
from sundial.api.jobs._create import JobCreation
from sundial.api.jobs._read import JobReading
from sundial.api.jobs._schedule import named_calendars
from sundial.api.kit import (
    RequestKey,
    check_expected_version,
    require_version,
)
from sundial.api.model import (
    Applied,
    ApplyOutcome,
    Job,
    JobRef,
)
from sundial.api.store import CalendarChanged, RequestClaim, RequestRecord
from sundial.core.errors import (
    Aborted,
    AlreadyExists,
    NotFound,
)
from sundial.job import JobSpec


class JobUpdates(JobCreation, JobReading):
    """UpdateJob, RollbackJob and ApplyJob."""

    async def update_job(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        *,
        expected_version: int,
        apply: Callable[[Job], JobSpec],
    ) -> Job:
        """Change a job: ``apply`` turns the current job into the new spec.

        ``paused`` and ``pause_note`` are kept from the current job whatever ``apply``
        returns. A changed schedule recomputes next_run_at from now.
        """
        check_expected_version(expected_version)
        for _ in range(OPTIMISTIC_ATTEMPTS):
            job = await self.get_job(tenant_id, job_id)
            require_version("job", job_id, job.version, expected_version)
            try:
                rewritten = await self._rewrite(tenant_id, job, apply(job))
            except CalendarChanged:
                continue  # compute again with the calendars' new contents
            if rewritten is not None:
                return rewritten[0]
            if expected_version:
                raise await self._conflict(tenant_id, job_id, expected_version)
            # Unconditional update raced with another change: merge onto the new version.
        raise Aborted(f"job {job_id} kept changing while being updated; retry")

    async def rollback_job(
        self, tenant_id: str, job_id: uuid.UUID, *, version: int, expected_version: int
    ) -> Job:
        """Restore the definition revision ``version`` had, as a new revision.

        The definition is checked as UpdateJob checks one (today's calendars and egress
        policy); paused and pause_note stay as they are (operational, not history).
        """
        check_expected_version(expected_version)
        revised = await self.job_at(tenant_id, job_id, version)
        return await self.update_job(
            tenant_id, job_id, expected_version=expected_version, apply=lambda _: revised.spec
        )

    async def _rewrite(
        self,
        tenant_id: str,
        job: Job,
        wanted: JobSpec,
        *,
        keep_equal: bool = False,
        claim: RequestClaim | None = None,
        validate_only: bool = False,
    ) -> tuple[Job, bool] | None:
        """Write ``wanted`` as the definition of ``job`` (as read, at its version).

        Args:
            keep_equal: When the validated definition equals the current one, write
                nothing (ApplyJob's UNCHANGED).
            claim: An idempotency record written with the change.
            validate_only: Validate and compute, write nothing.

        Returns:
            The job after the change and whether it changed; None when the job changed
            or vanished since it was read (nothing written).
        """
        spec = dataclasses.replace(wanted, paused=job.spec.paused, pause_note=job.spec.pause_note)
        reschedule = spec.schedule != job.spec.schedule
        calendars = await self._calendars(tenant_id, [spec])
        now = self._clock.now()
        spec, compiled = await self._checked(
            tenant_id, spec, str(job.job_id), now=now if reschedule else None, calendars=calendars
        )
        if keep_equal and spec == job.spec:
            return job, False
        assert spec.target is not None
        if spec.target != job.spec.target:
            await self._guard.check(spec.target, await self._egress.policy(tenant_id))
        next_run_at = job.next_run_at
        if reschedule:
            next_run_at = await self._first_fire(
                tenant_id,
                compiled,
                spec.schedule,
                now,
                fired_count=job.fired_count,
                last_fire=job.stats.last_fire_time,
            )
        named = named_calendars(spec.schedule, calendars)
        if validate_only:
            changed = dataclasses.replace(
                job,
                spec=spec,
                next_run_at=next_run_at,
                version=job.version + 1,
                update_time=now,
                calendars={c.name: c for c in named},
            )
            return changed, True
        written = await self._store.update_job(
            tenant_id,
            job.job_id,
            read_version=job.version,
            spec=spec,
            reschedule=reschedule,
            next_run_at=next_run_at,
            now=now,
            claim=claim,
            calendars=named,
        )
        return (await self.get_job(tenant_id, job.job_id), True) if written else None

    async def apply_job(
        self,
        tenant_id: str,
        ref: JobRef,
        spec: JobSpec,
        *,
        expected_version: int = 0,
        validate_only: bool = False,
        request_id: str = "",
        request_hash: bytes = b"",
    ) -> Applied:
        """Make the job ``ref`` names match ``spec`` (job_service.proto ``ApplyJob``).

        A client id the tenant does not use creates the job (``spec``'s paused and
        pause_note honoured); an existing job keeps its paused state and note, and is
        rewritten only when its definition differs. Two applies of one new id race on
        the unique index: the loser compares with the winner's job.
        """
        validation.check_request_id(request_id)
        check_expected_version(expected_version)

        async def work(claim: RequestClaim | None) -> Applied:
            for _ in range(OPTIMISTIC_ATTEMPTS):
                applied = await self._apply_once(
                    tenant_id,
                    ref,
                    spec,
                    expected_version=expected_version,
                    claim=claim,
                    validate_only=validate_only,
                )
                if applied is not None:
                    return applied
            raise Aborted(f"job {ref} kept changing while being applied; retry")

        async def replay(record: RequestRecord) -> Applied:
            assert record.job_id is not None and record.outcome is not None
            job = await self._store.get_job(tenant_id, record.job_id)
            if job is None:
                raise NotFound(f"request_id {request_id!r} already applied this job, deleted since")
            return Applied(job, ApplyOutcome(record.outcome))

        # A validation writes nothing, so it is neither answered from nor remembered.
        key = RequestKey(APPLY_JOB, "" if validate_only else request_id, request_hash)
        return await self._requests.once(tenant_id, key, work, replay)

    async def _apply_once(
        self,
        tenant_id: str,
        ref: JobRef,
        spec: JobSpec,
        *,
        expected_version: int,
        claim: RequestClaim | None,
        validate_only: bool,
    ) -> Applied | None:
        """One read-decide-write round of :meth:`apply_job`; None when it lost a race."""
        uid = ref if isinstance(ref, uuid.UUID) else await self._store.job_uid(tenant_id, ref)
        job = None if uid is None else await self._store.get_job(tenant_id, uid)
        if job is None:
            if isinstance(ref, uuid.UUID) or expected_version:
                raise NotFound(f"job {ref} not found")
            try:
                created = await self._create(
                    tenant_id,
                    spec,
                    client_id=ref,
                    claim=with_outcome(claim, ApplyOutcome.CREATED),
                    validate_only=validate_only,
                )
            except AlreadyExists:
                # A concurrent apply of this id created it; its insert may clash on the
                # name before the id (both are unique). Compare with that job then.
                if await self._store.job_uid(tenant_id, ref) is None:
                    raise
                return None
            return Applied(created, ApplyOutcome.CREATED)
        require_version("job", ref, job.version, expected_version)
        try:
            rewritten = await self._rewrite(
                tenant_id,
                job,
                spec,
                keep_equal=True,
                claim=with_outcome(claim, ApplyOutcome.UPDATED),
                validate_only=validate_only,
            )
        except CalendarChanged:
            return None  # apply_job tries again with the calendars' new contents
        if rewritten is None:
            if expected_version:
                raise await self._conflict(tenant_id, job.job_id, expected_version, ref)
            return None
        if rewritten[1]:
            return Applied(rewritten[0], ApplyOutcome.UPDATED)
        unchanged = with_outcome(claim, ApplyOutcome.UNCHANGED)
        if unchanged is not None:
            await self._store.record_request(tenant_id, unchanged, job.job_id, self._clock.now())
        return Applied(job, ApplyOutcome.UNCHANGED)
