"""Calendars: wire <-> what a tenant defines and what is stored."""

from __future__ import annotations

from sundial.api.convert._enums import _by_name, _enum, _number
from sundial.api.model import (
    CalendarSpec,
    StoredCalendar,
)
from sundial.core import wire
from sundial.schedule import (
    CalendarKind,
)
from sundial.v1 import calendar_pb2

_CALENDAR_KIND = _by_name(CalendarKind, calendar_pb2.CalendarKind, "CALENDAR_KIND_")


def calendar_in(message: calendar_pb2.Calendar, field: str = "calendar") -> CalendarSpec:
    """A wire calendar as what a tenant defines (limits checked by validation)."""
    if message.kind == calendar_pb2.CALENDAR_KIND_UNSPECIFIED:
        kind = None
    else:
        kind = _enum(message.kind, _CALENDAR_KIND, None, f"{field}.kind")
    return CalendarSpec(
        name=message.name,
        description=message.description,
        kind=kind,
        dates=tuple(message.dates),
    )


def calendar_out(calendar: StoredCalendar) -> calendar_pb2.Calendar:
    """A stored calendar, dates normalised."""
    message = calendar_pb2.Calendar(
        name=calendar.calendar.name,
        description=calendar.description,
        kind=_number(calendar.calendar.kind, _CALENDAR_KIND),
        dates=calendar.calendar.entries(),
        version=calendar.calendar.version,
    )
    message.create_time.CopyFrom(wire.timestamp(calendar.create_time))
    message.update_time.CopyFrom(wire.timestamp(calendar.update_time))
    return message
