"""A job's life: DeleteJob, PauseJob, ResumeJob; PreviewSchedule."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from sundial.api import validation
from sundial.api.jobs._base import OPTIMISTIC_ATTEMPTS, JobsBase
from sundial.api.jobs._schedule import PREVIEW_KEY, rendered_preview
from sundial.api.kit import (
    check_expected_version,
    require_version,
)
from sundial.api.model import (
    Job,
    JobRef,
    Preview,
)
from sundial.api.store import CalendarChanged
from sundial.core.errors import (
    Aborted,
    InvalidArgument,
    NotFound,
)
from sundial.schedule import Schedule, compile_schedule

T = TypeVar("T")


class JobLifecycle(JobsBase):
    """DeleteJob, PauseJob, ResumeJob and PreviewSchedule."""

    async def delete_job(
        self, tenant_id: str, ref: JobRef, *, expected_version: int, allow_missing: bool
    ) -> None:
        """Delete a job; its unfinished runs are cancelled."""
        check_expected_version(expected_version)
        try:
            job_id = await self.resolve(tenant_id, ref)
        except NotFound:
            if allow_missing:
                return
            raise
        if await self._store.delete_job(tenant_id, job_id, expected_version, self._clock.now()):
            return
        error = await self._conflict(tenant_id, job_id, expected_version)
        if isinstance(error, NotFound) and allow_missing:
            return
        raise error

    async def pause_job(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        *,
        note: str,
        expected_version: int,
        until: datetime | None = None,
    ) -> Job:
        """Pause a job (or replace the note and end of a paused one) until ``until``
        (None: until resumed; the timed pauses' resumer resumes it then)."""
        check_expected_version(expected_version)
        validation.check_note(note, "note")
        now = self._clock.now()
        validation.check_pause_until(until, now)
        if not await self._store.pause_job(
            tenant_id, job_id, expected_version, note, now, until=until
        ):
            raise await self._conflict(tenant_id, job_id, expected_version)
        return await self.get_job(tenant_id, job_id)

    async def resume_job(
        self, tenant_id: str, job_id: uuid.UUID, *, note: str, expected_version: int
    ) -> Job:
        """Resume a job: next_run_at is recomputed from now; missed times do not run."""
        check_expected_version(expected_version)
        validation.check_note(note, "note")
        for _ in range(OPTIMISTIC_ATTEMPTS):
            job = await self.get_job(tenant_id, job_id)
            require_version("job", job_id, job.version, expected_version)
            # The calendars as they are now, with their versions (the job's copy has
            # none): the store checks them current in the resume's transaction.
            schedule = job.spec.schedule
            calendars = await self._store.calendars_named(tenant_id, list(schedule.calendars))
            now = self._clock.now()
            next_run_at = await self._first_fire(
                tenant_id,
                compile_schedule(schedule, job_id=str(job.job_id), calendars=calendars),
                schedule,
                now,
                fired_count=job.fired_count,
                last_fire=job.stats.last_fire_time,
                include_recent_once=False,
            )
            try:
                resumed = await self._store.resume_job(
                    tenant_id,
                    job_id,
                    read_version=job.version,
                    note=note,
                    next_run_at=next_run_at,
                    now=now,
                    calendars=[calendars[n] for n in schedule.calendars if n in calendars],
                )
            except CalendarChanged:
                continue  # UpdateCalendar rewrote the job's copy: read it again
            if resumed:
                return await self.get_job(tenant_id, job_id)
            if expected_version:
                raise await self._conflict(tenant_id, job_id, expected_version)
        raise Aborted(f"job {job_id} kept changing while being resumed; retry")

    async def preview(
        self,
        tenant_id: str,
        schedule: Schedule,
        *,
        count: int,
        after: datetime | None,
        job_id: uuid.UUID | None,
        render: Callable[[Preview], T],
    ) -> T:
        """Upcoming fire times of ``schedule`` (for ``job_id``'s H and jitter if given),
        as ``render`` (a module-level function) puts them: computed and rendered in one
        worker process."""
        if count == 0:
            count = validation.DEFAULT_PREVIEW_COUNT
        if not 1 <= count <= validation.MAX_PREVIEW_COUNT:
            raise InvalidArgument(
                "count", f"must be 1 to {validation.MAX_PREVIEW_COUNT}, got {count}"
            )
        compiled = validation.check_schedule(
            schedule,
            PREVIEW_KEY if job_id is None else str(job_id),
            calendars=await self._store.calendars_named(tenant_id, list(schedule.calendars)),
        )
        if job_id is not None and await self._store.job_version(tenant_id, job_id) is None:
            raise NotFound(f"job_id: job {job_id} not found")
        # Up to a fifth of a second of pure Python: off the event loop (sundial.api.offload),
        # and so is building the answer (1,000 entries: 6 ms to unpickle as dataclasses
        # and 6 ms to convert, against well under 1 ms for the wire message).
        return await self._offload.run(
            tenant_id, rendered_preview, render, compiled, after or self._clock.now(), count, 0
        )
