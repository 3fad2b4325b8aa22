"""``sundial calendars ...``: the tenant's calendars (holidays to skip, or the only days
to run), which job schedules name with ``--calendar``::

    sundial calendars create holidays --exclude --date 12-25 --date 2027-01-01
    sundial jobs create report --cron "0 9 * * 1-5" --tz Europe/Berlin --calendar holidays ...
    sundial calendars update holidays --date 12-25 --date 12-26   # jobs follow at once
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from google.protobuf import field_mask_pb2

from sundial.cli._client import (
    Connection,
    TokenOption,
    all_pages,
    connected,
    enum_name,
    fail,
    jobs_client,
    when,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_fields, print_table
from sundial.v1 import calendar_pb2
from sundial.v1 import job_service_pb2 as pb

app = typer.Typer(
    name="calendars",
    help="Calendars of dates that job schedules skip (exclude) or keep to (include).",
    no_args_is_help=True,
)

Name = Annotated[str, typer.Argument(help="The calendar's name.", show_default=False)]
Dates = Annotated[
    list[str] | None,
    typer.Option(
        "--date",
        help="YYYY-MM-DD (one date) or MM-DD (every year); repeatable.",
        show_default=False,
    ),
]
Kind = Annotated[
    bool | None,
    typer.Option(
        "--exclude/--include",
        help="Exclude: occurrences on these dates do not run (holidays). Include: only "
        "occurrences on these dates run.",
        show_default=False,
    ),
]
Description = Annotated[str | None, typer.Option(help="Free text.")]
Version = Annotated[
    int, typer.Option(help="Only if the calendar is at this version (0: unconditionally).")
]


def _kind(exclude: bool) -> Any:
    # Any: the generated stubs type the field with the enum's own ValueType.
    return calendar_pb2.CALENDAR_KIND_EXCLUDE if exclude else calendar_pb2.CALENDAR_KIND_INCLUDE


def _kind_text(calendar: calendar_pb2.Calendar) -> str:
    return enum_name(calendar.kind, calendar_pb2.CalendarKind, "CALENDAR_KIND_")


def _dates_text(calendar: calendar_pb2.Calendar, limit: int = 0) -> str:
    dates = list(calendar.dates)
    if limit and len(dates) > limit:
        return ", ".join(dates[:limit]) + f", ... ({len(dates)} dates)"
    return ", ".join(dates) or "-"


def print_calendar(calendar: calendar_pb2.Calendar) -> None:
    """A calendar as ``key  value`` lines."""
    rows = [
        ("kind", _kind_text(calendar)),
        ("dates", _dates_text(calendar)),
        ("version", str(calendar.version)),
        ("created", when(calendar.create_time)),
        ("updated", when(calendar.update_time)),
    ]
    if calendar.description:
        rows.insert(0, ("description", calendar.description))
    print_fields(f"calendar {calendar.name}", rows)


@app.command()
@connected
def create(
    name: Name,
    *,
    exclude: Kind = None,
    date: Dates = None,
    description: Description = None,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Create a calendar (give --exclude or --include)."""
    if exclude is None:
        fail("give --exclude (holidays) or --include (the only days to run)")
    calendar = calendar_pb2.Calendar(
        name=name, kind=_kind(exclude), dates=date or [], description=description or ""
    )
    with jobs_client(conn, token) as (stub, md):
        response = stub.CreateCalendar(pb.CreateCalendarRequest(calendar=calendar), metadata=md)
    emit(
        response,
        output,
        table=lambda _wide: print_calendar(response.calendar),
        names=lambda: [response.calendar.name],
    )


@app.command("list")
@connected
def list_calendars(
    *,
    limit: Annotated[int, typer.Option(help="Show at most this many (0: all).", min=0)] = 0,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """The tenant's calendars, by name."""
    with jobs_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListCalendars(r, metadata=md),
            pb.ListCalendarsRequest(),
            pb.ListCalendarsResponse(),
            "calendars",
            limit,
        )

    def table(wide: bool) -> None:
        print_table(
            (
                Column("name"),
                Column("kind"),
                Column("version", 2),
                Column("dates", 1),
                Column("description", 3, wide=True),
            ),
            [
                (
                    c.name,
                    _kind_text(c),
                    str(c.version),
                    _dates_text(c, 0 if wide else 5),
                    c.description or "-",
                )
                for c in listed.calendars
            ],
            wide=wide,
        )

    emit(listed, output, table=table, names=lambda: [c.name for c in listed.calendars])


@app.command()
@connected
def get(
    name: Name, *, conn: Connection, token: TokenOption = "", output: OutputOption = Output.TABLE
) -> None:
    """Show a calendar and all its dates."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.GetCalendar(pb.GetCalendarRequest(name=name), metadata=md)
    emit(
        response,
        output,
        table=lambda _wide: print_calendar(response.calendar),
        names=lambda: [response.calendar.name],
    )


@app.command()
@connected
def update(
    name: Name,
    *,
    exclude: Kind = None,
    date: Dates = None,
    clear_dates: Annotated[bool, typer.Option(help="Remove every date.")] = False,
    description: Description = None,
    expected_version: Version = 0,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Change what the options name (--date replaces all dates). The jobs naming the
    calendar get their next run recomputed at once."""
    calendar = calendar_pb2.Calendar(name=name)
    paths = []
    if exclude is not None:
        calendar.kind = _kind(exclude)
        paths.append("kind")
    if date and clear_dates:
        fail("give --date or --clear-dates, not both")
    if date or clear_dates:
        calendar.dates.extend(date or [])
        paths.append("dates")
    if description is not None:
        calendar.description = description
        paths.append("description")
    if not paths:
        fail("nothing to change: give at least one option (see --help)")
    request = pb.UpdateCalendarRequest(
        calendar=calendar,
        update_mask=field_mask_pb2.FieldMask(paths=paths),
        expected_version=expected_version,
    )
    with jobs_client(conn, token) as (stub, md):
        response = stub.UpdateCalendar(request, metadata=md)

    def table(_wide: bool) -> None:
        print_calendar(response.calendar)
        typer.echo(f"jobs rescheduled: {response.jobs_rescheduled}")

    emit(response, output, table=table, names=lambda: [response.calendar.name])


@app.command()
@connected
def delete(
    name: Name,
    *,
    expected_version: Version = 0,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Delete a calendar no job's schedule names (refused, naming them, while any does)."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.DeleteCalendar(
            pb.DeleteCalendarRequest(name=name, expected_version=expected_version), metadata=md
        )
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(f"deleted calendar {name}"),
        names=lambda: [name],
    )
