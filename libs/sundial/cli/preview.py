"""``sundial preview "<cron>" ["<cron>" ...] --tz <zone>``: upcoming fire times, DST
annotated; several expressions (and ``--every``) are unioned, and ``--exclude`` /
``--include`` dates act as ad-hoc calendars, each time marked with the spec that produced
it and each removed occurrence with why.

Computed here, without the API or a token: the schedule library is local, and the code
is the API's own PreviewSchedule (``sundial.api``), so the answer is the one the API
would give and the schedulers follow. A job's own calendars live in the API:
``sundial jobs preview <job>`` asks it.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Annotated

import typer

from sundial.api import convert, validation
from sundial.api.jobs import PREVIEW_KEY
from sundial.api.jobs import preview as compute_preview
from sundial.cli._client import fail, parse_duration, parse_time
from sundial.cli._output import Output, OutputOption
from sundial.cli.jobs import emit_preview
from sundial.core.errors import InvalidArgument
from sundial.schedule import Calendar, CalendarKind, parse_calendar_dates
from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb

# The request fields the API names in its errors, as this command's arguments.
_ARGUMENTS = {
    "schedule.cron": "cron",
    "schedule.time_zone": "--tz",
    "count": "--count",
}
# The ad-hoc calendars' names (what the notes say removed an occurrence).
_EXCLUDED = "exclude"
_INCLUDED = "include"


def _calendar(name: str, kind: CalendarKind, texts: list[str]) -> Calendar:
    dates, yearly = parse_calendar_dates(texts, f"--{name}")
    return Calendar(name, kind, dates, yearly)


def preview(
    cron: Annotated[
        list[str] | None,
        typer.Argument(help='Cron expressions, e.g. "30 2 * * *"; several are unioned.'),
    ] = None,
    *,
    every: Annotated[
        list[str] | None, typer.Option(help="An interval spec too, e.g. 6h; repeatable.")
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(help="Skip this date: YYYY-MM-DD or MM-DD (yearly); repeatable."),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(help="Run only on this date: YYYY-MM-DD or MM-DD; repeatable."),
    ] = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone.")] = "UTC",
    count: Annotated[int, typer.Option(help="How many fire times (1-1000).")] = 10,
    after: Annotated[str, typer.Option(help="Start after this ISO 8601 instant.")] = "",
    job_id: Annotated[
        str, typer.Option(help="Hash H fields and jitter for the job with this uid.")
    ] = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Show when a schedule fires, with what DST shifts or drops and what the dates
    remove (computed locally)."""
    crons, everys = cron or [], every or []
    if not crons and not everys:
        fail("give a cron expression or --every")
    start = parse_time(after, "--after").ToDatetime(UTC) if after else datetime.now(UTC)
    if job_id:
        try:
            key = str(uuid.UUID(job_id))
        except ValueError:
            fail(f"--job-id: {job_id!r} is not a job uid (a UUID, the job's `uid`)")
    else:
        key = PREVIEW_KEY
    try:
        if not 1 <= count <= validation.MAX_PREVIEW_COUNT:
            raise InvalidArgument("count", f"must be 1 to {validation.MAX_PREVIEW_COUNT}")
        calendars = {}
        if exclude:
            calendars[_EXCLUDED] = _calendar(_EXCLUDED, CalendarKind.EXCLUDE, exclude)
        if include:
            calendars[_INCLUDED] = _calendar(_INCLUDED, CalendarKind.INCLUDE, include)
        message = job_pb2.Schedule(time_zone=tz)
        if len(crons) + len(everys) == 1 and crons:
            message.cron = crons[0]
        else:
            message.specs.extend(job_pb2.ScheduleSpec(cron=c) for c in crons)
            for text in everys:
                message.specs.add().interval.every.CopyFrom(parse_duration(text, "--every"))
        schedule = convert.schedule_in(message)
        schedule = dataclasses.replace(schedule, calendars=tuple(calendars))
        compiled = validation.check_schedule(schedule, key, calendars=calendars)
        result = compute_preview(compiled, start, count, 0)
    except InvalidArgument as exc:
        fail(f"{_ARGUMENTS.get(exc.field, exc.field)}: {exc.problem}")
    response = pb.PreviewScheduleResponse(
        fire_times=[convert.fire_time_out(entry) for entry in result.entries],
        exhausted=result.exhausted,
    )
    emit_preview(response, f"{'; '.join([*crons, *everys])} ({tz})", output)
