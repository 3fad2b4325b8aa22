"""A calendar's checks: its name and dates."""

from __future__ import annotations

import re

from sundial.api.model import (
    CalendarSpec,
)
from sundial.api.validation._fields import MAX_DESCRIPTION_CHARS, _fail, check_text
from sundial.schedule import (
    Calendar,
    parse_calendar_dates,
)

_CALENDAR_NAME_RE = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?")


def check_calendar_name(name: str, field: str) -> None:
    """A calendar name: the rules of a client job id (AIP-122)."""
    if not name:
        raise _fail(field, "is required")
    if not _CALENDAR_NAME_RE.fullmatch(name):
        raise _fail(
            field,
            f"{name[:70]!r} must be 1-63 chars of a-z, 0-9 and '-', starting with a letter "
            "and not ending with '-'",
        )


def check_calendar(spec: CalendarSpec, field: str = "calendar") -> Calendar:
    """Validate a calendar definition and return its meaning (dates parsed, deduplicated)."""
    check_calendar_name(spec.name, f"{field}.name")
    check_text(spec.description, f"{field}.description", MAX_DESCRIPTION_CHARS)
    if spec.kind is None:
        raise _fail(f"{field}.kind", "is required (CALENDAR_KIND_EXCLUDE or CALENDAR_KIND_INCLUDE)")
    dates, yearly = parse_calendar_dates(spec.dates, f"{field}.dates")
    return Calendar(name=spec.name, kind=spec.kind, dates=dates, yearly=yearly)
