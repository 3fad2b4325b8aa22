"""A job's schedule computed: its first fire time, its compiled form, a preview."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TypeVar

from sundial.api import validation
from sundial.api.model import (
    Job,
    Preview,
    PreviewEntry,
)
from sundial.job import JobSpec
from sundial.schedule import Calendar, CompiledSchedule, OnceSpec, Schedule, compile_schedule

PREVIEW_KEY = "00000000-0000-0000-0000-000000000000"
"""Hash key for Jenkins ``H`` and jitter in a preview without a job (job_service.proto)."""

_US = timedelta(microseconds=1)


def first_fire(
    compiled: CompiledSchedule,
    schedule: Schedule,
    now: datetime,
    *,
    fired_count: int = 0,
    last_fire: datetime | None = None,
    include_recent_once: bool = True,
) -> datetime | None:
    """The next nominal fire time of a new or changed schedule.

    Strictly after ``now`` (and after ``last_fire``: fire times of a job only increase,
    so a new schedule can never produce a run key that exists). A ``once`` at most
    ``misfire_threshold`` in the past (validation allowed it) fires at once when
    ``include_recent_once``.
    """
    after = now
    # The single-spec form only: in a list, a passed `once` simply does not fire (looking
    # back for it would bring back the other specs' recent times too).
    if include_recent_once and not schedule.spec_list and isinstance(schedule.spec, OnceSpec):
        after = min(now, schedule.spec.at - _US)
    if last_fire is not None and last_fire > after:
        after = last_fire
    fire = compiled.next_fire(after, fired_count)
    return None if fire is None else fire.at


def compiled_of(job: Job) -> CompiledSchedule:
    """The job's stored (already validated) schedule, compiled with its calendars."""
    return compile_schedule(job.spec.schedule, job_id=str(job.job_id), calendars=job.calendars)


def preview(compiled: CompiledSchedule, after: datetime, count: int, fired_count: int) -> Preview:
    """``count`` fire times after ``after`` plus the DST-dropped times between them."""
    entries = compiled.preview(after, count, fired_count=fired_count)
    fires = [e for e in entries if not e.dropped]
    if len(fires) < count:
        exhausted = True
    else:
        exhausted = compiled.next_fire(fires[-1].at, fired_count + len(fires)) is None
    return Preview(
        entries=tuple(PreviewEntry(e, compiled.dispatch_at(e.at)) for e in entries),
        exhausted=exhausted,
    )


def named_calendars(schedule: Schedule, calendars: Mapping[str, Calendar] | None) -> list[Calendar]:
    """The calendars ``schedule`` names, in its order (validated: all present)."""
    if not schedule.calendars or calendars is None:
        return []
    return [calendars[name] for name in schedule.calendars]


T = TypeVar("T")


def rendered_preview(
    render: Callable[[Preview], T],
    compiled: CompiledSchedule,
    after: datetime,
    count: int,
    fired_count: int,
) -> T:
    """:func:`preview` passed through ``render`` (its answer on the wire), in one step: in
    a worker process, so the event loop neither builds nor unpickles a thousand entries
    (``render`` is a module-level function; its result pickles small)."""
    return render(preview(compiled, after, count, fired_count))


def checked_first_fire(
    spec: JobSpec,
    job_id: uuid.UUID,
    now: datetime,
    calendars: Mapping[str, Calendar] | None,
) -> tuple[JobSpec, CompiledSchedule, datetime | None]:
    """A new job's checks (:func:`validation.check_job_spec`) and its first fire time, in
    one step: for the API's worker pool, when both search through calendars."""
    spec, compiled = validation.check_job_spec(spec, job_id, now=now, calendars=calendars)
    return spec, compiled, first_fire(compiled, spec.schedule, now)
