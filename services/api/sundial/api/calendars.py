"""Calendar operations of JobService (calendar.proto; docs/design.md sections 3 and 4).

A calendar's contents are copied into the definition row of every job whose schedule
names it (``job_definitions.calendars``, migration 0015), so the scheduler plans with
them and its definition digest changes when they do. UpdateCalendar therefore rewrites,
in its own transaction, that copy and the next fire time of every job naming the
calendar; job writes lock the calendars they name first (calendars, then jobs), so no
job commits with contents an update replaced meanwhile.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from sundial.api import validation
from sundial.api.kit import Pager, UpdateMask, check_expected_version, require_version
from sundial.api.kit.paging import Text
from sundial.api.model import CalendarSpec, Page, StoredCalendar
from sundial.api.store import CalendarJob, Store
from sundial.core.clock import Clock
from sundial.core.errors import FailedPrecondition, InvalidArgument, NotFound
from sundial.schedule import Calendar, SearchExceeded, compile_schedule

_US = timedelta(microseconds=1)
UPDATABLE = ("description", "kind", "dates")
"""The fields UpdateCalendar's mask may name."""
# Jobs named in DeleteCalendar's FAILED_PRECONDITION.
_SHOWN_JOBS = 10
_MASK = UpdateMask(UPDATABLE)
_CALENDARS = Pager("calendars", (Text(63),))


def rescheduled_at(job: CalendarJob, calendar: Calendar, now: datetime) -> datetime | None:
    """A job's next fire time once ``calendar`` has its new dates.

    Searched from its current next fire time when that is due already (a due
    occurrence the new dates still allow stays due, the misfire policy then judges it),
    else from now (an occurrence the old dates removed but the new ones allow, between
    now and the old next fire time, fires); never at or before its last fire time, so no
    run key is reused.
    """
    calendars = {**job.calendars, calendar.name: calendar}
    compiled = compile_schedule(job.schedule, job_id=str(job.job_id), calendars=calendars)
    after = now if job.next_run_at is None else min(now, job.next_run_at - _US)
    if job.last_fire_at is not None and job.last_fire_at > after:
        after = job.last_fire_at
    try:
        fire = compiled.next_fire(after, job.fired_count)
    except SearchExceeded as exc:  # the new dates leave a job no fire time to find
        raise InvalidArgument(
            "calendar.dates", f"job {job.job_id} would not fire: {exc.problem}"
        ) from None
    return None if fire is None else fire.at


_YIELD_EVERY = 500
"""Jobs rescheduled between two yields to the event loop: an UpdateCalendar naming 100k
jobs computes for seconds, and the replica's other calls go on meanwhile."""


async def _rescheduled(
    jobs: Sequence[CalendarJob], calendar: Calendar, now: datetime
) -> list[datetime | None]:
    """:func:`rescheduled_at` of every job, yielding to the event loop between chunks."""
    out: list[datetime | None] = []
    for start in range(0, len(jobs), _YIELD_EVERY):
        if start:
            await asyncio.sleep(0)
        out.extend(rescheduled_at(job, calendar, now) for job in jobs[start : start + _YIELD_EVERY])
    return out


class CalendarManager:
    """CreateCalendar, GetCalendar, ListCalendars, UpdateCalendar and DeleteCalendar.

    Args:
        store: Database access.
        clock: The source of "now".
    """

    def __init__(self, store: Store, clock: Clock, *, max_calendars: int | None = None) -> None:
        self._store = store
        self._clock = clock
        self._max_calendars = max_calendars

    async def create(self, tenant_id: str, spec: CalendarSpec) -> StoredCalendar:
        calendar = validation.check_calendar(spec)
        await self._store.create_calendar(
            tenant_id, calendar, spec.description, self._clock.now(), limit=self._max_calendars
        )
        return await self.get(tenant_id, calendar.name)

    async def get(self, tenant_id: str, name: str) -> StoredCalendar:
        validation.check_calendar_name(name, "name")
        found = await self._store.get_calendar(tenant_id, name)
        if found is None:
            raise NotFound(f"calendar {name} not found")
        return found

    async def list(
        self, tenant_id: str, *, page_size: int, page_token: str
    ) -> Page[StoredCalendar]:
        cursor = _CALENDARS.open(page_size, page_token)
        after = "" if cursor.after is None else cursor.after[0]
        found = await self._store.list_calendars(tenant_id, after=after, limit=cursor.limit)
        return cursor.page(found, lambda stored: [stored.calendar.name], size_of=_calendar_bytes)

    async def update(
        self,
        tenant_id: str,
        spec: CalendarSpec,
        mask: Sequence[str],
        *,
        expected_version: int,
    ) -> tuple[StoredCalendar, int]:
        """Change a calendar and reschedule the jobs naming it, in one transaction.

        Returns:
            The calendar after the change and how many jobs name it.
        """
        validation.check_calendar_name(spec.name, "calendar.name")
        paths = _MASK.paths(mask)
        check_expected_version(expected_version)
        async with self._store.calendar_transaction(tenant_id) as tx:
            current = await tx.lock(spec.name)
            if current is None:
                raise NotFound(f"calendar {spec.name} not found")
            require_version("calendar", spec.name, current.calendar.version, expected_version)
            old = current.calendar
            wanted = CalendarSpec(
                name=spec.name,
                description=spec.description if "description" in paths else current.description,
                kind=spec.kind if "kind" in paths else old.kind,
                dates=spec.dates if "dates" in paths else tuple(old.entries()),
            )
            calendar = validation.check_calendar(wanted)
            now = self._clock.now()
            written = await tx.write(calendar, wanted.description, now)
            new = dataclasses.replace(calendar, version=written.calendar.version)
            jobs = await tx.lock_jobs(spec.name)
            await tx.reschedule(
                [job.job_id for job in jobs],
                [
                    [
                        new if name == new.name else job.calendars[name]
                        for name in job.schedule.calendars
                    ]
                    for job in jobs
                ],
                await _rescheduled(jobs, new, now),
            )
        return written, len(jobs)

    async def delete(self, tenant_id: str, name: str, *, expected_version: int) -> None:
        """Delete a calendar no job's schedule names (FAILED_PRECONDITION otherwise)."""
        validation.check_calendar_name(name, "name")
        check_expected_version(expected_version)
        async with self._store.calendar_transaction(tenant_id) as tx:
            current = await tx.lock(name)
            if current is None:
                raise NotFound(f"calendar {name} not found")
            require_version("calendar", name, current.calendar.version, expected_version)
            jobs = await tx.naming_jobs(name, _SHOWN_JOBS + 1)
            if jobs:
                shown = ", ".join(jobs[:_SHOWN_JOBS]) + (", ..." if len(jobs) > _SHOWN_JOBS else "")
                raise FailedPrecondition(
                    f"calendar {name} is named by the schedules of jobs {shown}; "
                    "remove it from them first"
                )
            await tx.delete(name)


def _calendar_bytes(stored: StoredCalendar) -> int:
    """An upper estimate of a calendar's size in a list: up to 1,000 dates of 12 bytes."""
    calendar = stored.calendar
    return 256 + 4 * len(stored.description) + 12 * (len(calendar.dates) + len(calendar.yearly))
