"""Store methods for calendars (migration 0015)."""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from sundial.api.model import StoredCalendar
from sundial.api.store._base import Conn, Row, one, queries, translate
from sundial.core.errors import Aborted, ResourceExhausted
from sundial.job import calendars_from_json, calendars_to_json, schedule_from_json
from sundial.schedule import Calendar, CalendarKind, Schedule, parse_calendar_dates


class CalendarChanged(Aborted):
    """A calendar a job write computed with changed (or went) before the write locked
    it; nothing was written. Retryable: read the calendars again."""


@functools.lru_cache(maxsize=256)
def _calendar(name: str, kind: str, dates: tuple[str, ...], version: int) -> Calendar:
    """A stored calendar parsed, kept by its content: a job write or preview naming a
    calendar of 1,000 dates (up to 8 of them) would parse them all again on the event
    loop at every call (366 dates: about 2 ms)."""
    parsed, yearly = parse_calendar_dates(dates, "dates")
    return Calendar(
        name=name, kind=CalendarKind(kind), dates=parsed, yearly=yearly, version=version
    )


def calendar_from_row(row: Row) -> StoredCalendar:
    return StoredCalendar(
        calendar=_calendar(row["name"], row["kind"], tuple(row["dates"]), row["version"]),
        description=row["description"],
        create_time=row["created_at"],
        update_time=row["updated_at"],
    )


@dataclass(frozen=True, slots=True)
class CalendarJob:
    """A job naming a calendar, locked by :class:`CalendarTransaction` (what recomputing
    its next fire time needs)."""

    job_id: uuid.UUID
    next_run_at: datetime | None
    fired_count: int
    last_fire_at: datetime | None
    schedule: Schedule
    calendars: Mapping[str, Calendar]


class CalendarTransaction:
    """One UpdateCalendar or DeleteCalendar: the calendar row is locked first, then the
    jobs naming it (lock order: calendars, then jobs, as every job write)."""

    def __init__(self, conn: Conn, tenant_id: str) -> None:
        self._conn = conn
        self._tenant = tenant_id

    async def lock(self, name: str) -> StoredCalendar | None:
        row = await self._conn.fetchrow(queries.lock_calendar, self._tenant, name)
        return None if row is None else calendar_from_row(row)

    async def write(self, calendar: Calendar, description: str, now: datetime) -> StoredCalendar:
        row = await self._conn.fetchrow(
            queries.update_calendar,
            self._tenant,
            calendar.name,
            description,
            calendar.kind.value,
            calendar.entries(),
            now,
        )
        return calendar_from_row(one(row))

    async def delete(self, name: str) -> None:
        await self._conn.execute(queries.delete_calendar, self._tenant, name)

    async def naming_jobs(self, name: str, limit: int) -> list[str]:
        """Up to ``limit`` ids (client id, else uid) of the jobs naming ``name``."""
        rows = await self._conn.fetch(queries.calendar_jobs, self._tenant, name, limit)
        return [row["shown"] for row in rows]

    async def lock_jobs(self, name: str) -> list[CalendarJob]:
        rows = await self._conn.fetch(queries.lock_calendar_jobs, self._tenant, name)
        return [
            CalendarJob(
                job_id=row["job_id"],
                next_run_at=row["next_run_at"],
                fired_count=row["fired_count"],
                last_fire_at=row["last_fire_at"],
                schedule=schedule_from_json(row["schedule"]),
                calendars=calendars_from_json(row["calendars"]),
            )
            for row in rows
        ]

    async def reschedule(
        self,
        job_ids: Sequence[uuid.UUID],
        calendars: Sequence[Sequence[Calendar]],
        next_run_ats: Sequence[datetime | None],
    ) -> None:
        """Give jobs the calendars' new contents and their recomputed next fire time."""
        if job_ids:
            await self._conn.execute(
                queries.reschedule_calendar_jobs,
                list(job_ids),
                [json.dumps(calendars_to_json(list(c))) for c in calendars],
                list(next_run_ats),
            )


async def check_calendar_versions(
    conn: Conn, tenant_id: str, calendars: Sequence[Calendar]
) -> None:
    """Lock the calendars a job write computed with (FOR SHARE, first in its
    transaction) and make sure they are still at those versions.

    Raises:
        CalendarChanged: One changed or was deleted since (compute again).
    """
    if not calendars:
        return
    rows = await conn.fetch(queries.lock_calendars, tenant_id, [c.name for c in calendars])
    now = {row["name"]: row["version"] for row in rows}
    for calendar in calendars:
        if now.get(calendar.name) != calendar.version:
            raise CalendarChanged(
                f"calendar {calendar.name} changed while the job was being written; retry"
            )


class CalendarStore:
    """Calendars: reads, create, and the update/delete transaction."""

    _pool: asyncpg.Pool

    @translate
    async def get_calendar(self, tenant_id: str, name: str) -> StoredCalendar | None:
        row = await self._pool.fetchrow(queries.get_calendar, tenant_id, name)
        return None if row is None else calendar_from_row(row)

    @translate
    async def calendars_named(self, tenant_id: str, names: Sequence[str]) -> dict[str, Calendar]:
        """The tenant's calendars among ``names`` (absent names are left out)."""
        if not names:
            return {}
        rows = await self._pool.fetch(queries.calendars_named, tenant_id, list(names))
        return {row["name"]: calendar_from_row(row).calendar for row in rows}

    @translate
    async def list_calendars(
        self, tenant_id: str, *, after: str, limit: int
    ) -> list[StoredCalendar]:
        rows = await self._pool.fetch(queries.list_calendars, tenant_id, after, limit)
        return [calendar_from_row(row) for row in rows]

    @translate
    async def create_calendar(
        self,
        tenant_id: str,
        calendar: Calendar,
        description: str,
        now: datetime,
        *,
        limit: int | None = None,
    ) -> None:
        """Insert a calendar (AlreadyExists naming ``calendar.name`` when taken;
        ResourceExhausted when the tenant has its limit already: its own ``max_calendars``,
        else ``limit``)."""
        async with self._pool.acquire() as conn, conn.transaction():
            if limit is not None:
                own = await conn.fetchrow(queries.tenant_quota_overrides, tenant_id)
                limit = (own["max_calendars"] if own else None) or limit
                count = await conn.fetchval(queries.count_calendars, tenant_id)
                if count >= limit:
                    raise ResourceExhausted(
                        f"the tenant's limit of {limit} calendars is reached: delete one first",
                        metadata={
                            "quota": "max_calendars",
                            "limit": str(limit),
                            "usage": str(count),
                        },
                    )
            await conn.execute(
                queries.insert_calendar,
                tenant_id,
                calendar.name,
                description,
                calendar.kind.value,
                calendar.entries(),
                now,
            )

    @contextlib.asynccontextmanager
    async def calendar_transaction(self, tenant_id: str) -> AsyncIterator[CalendarTransaction]:
        """A transaction for one calendar change (committed when the block ends)."""
        async with translate, self._pool.acquire() as conn, conn.transaction():
            yield CalendarTransaction(conn, tenant_id)
