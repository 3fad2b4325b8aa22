"""Calendars: named sets of local dates that remove occurrences of a schedule.

A calendar is a set of dates (``2026-12-25``) and yearly dates (``12-25``: every 25
December; ``02-29`` only in leap years) with a kind:

* ``EXCLUDE`` (holidays): an occurrence whose local date is in the set does not fire;
* ``INCLUDE``: only occurrences whose local date is in the set fire.

A schedule may reference several. An occurrence fires when its local date (the date of
the fire time in the schedule's zone, after DST rules moved it) is in no ``EXCLUDE``
calendar and, if any ``INCLUDE`` calendar is referenced, in at least one of them.
Calendars never add fire times: they filter the union of the schedule's specs, so fire
times stay strictly increasing and never equal (docs/design.md section 4).
"""

from __future__ import annotations

import bisect
import enum
import re
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from sundial.core.errors import InvalidArgument

MAX_CALENDAR_DATES = 1000
"""Entries one calendar may hold (dates and yearly dates together)."""

_DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_YEARLY_RE = re.compile(r"^(\d{2})-(\d{2})$")
_US = timedelta(microseconds=1)
_ONE_DAY = timedelta(days=1)


class CalendarKind(enum.Enum):
    """What a calendar's dates mean to the schedules that reference it.

    Attributes:
        EXCLUDE: Occurrences on these dates are removed (holidays).
        INCLUDE: Only occurrences on these dates fire.
    """

    EXCLUDE = "EXCLUDE"
    INCLUDE = "INCLUDE"


@dataclass(frozen=True, slots=True)
class Calendar:
    """One tenant calendar, as the schedule library needs it.

    Attributes:
        name: Its name (what schedules reference).
        kind: EXCLUDE or INCLUDE.
        dates: Single dates.
        yearly: ``(month, day)`` pairs that recur every year.
        version: The stored calendar's version (0 when not stored); not part of the
            meaning, kept so a caller can tell which version it computed with.
    """

    name: str
    kind: CalendarKind
    dates: frozenset[date] = frozenset()
    yearly: frozenset[tuple[int, int]] = frozenset()
    version: int = 0
    _ordered: tuple[date, ...] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        # Sorted once: an include calendar's search asks for the next date at every step.
        object.__setattr__(self, "_ordered", tuple(sorted(self.dates)))

    def __contains__(self, day: object) -> bool:
        if not isinstance(day, date):
            return False
        return day in self.dates or (day.month, day.day) in self.yearly

    def entries(self) -> list[str]:
        """The dates as text, sorted: dates (``YYYY-MM-DD``) first, then yearly (``MM-DD``)."""
        return [d.isoformat() for d in self._ordered] + [
            f"{m:02d}-{d:02d}" for m, d in sorted(self.yearly)
        ]

    def next_on_or_after(self, day: date) -> date | None:
        """The first date of this calendar on or after ``day``, or None."""
        found = _next_date(self._ordered, day)
        for month, dom in self.yearly:
            for year in range(day.year, min(day.year + 9, date.max.year) + 1):
                try:
                    candidate = date(year, month, dom)
                except ValueError:  # 02-29 outside a leap year
                    continue
                if candidate >= day:
                    if found is None or candidate < found:
                        found = candidate
                    break
        return found


def _next_date(ordered: Sequence[date], day: date) -> date | None:
    i = bisect.bisect_left(ordered, day)
    return ordered[i] if i < len(ordered) else None


def parse_calendar_dates(
    texts: Iterable[str], field: str
) -> tuple[frozenset[date], frozenset[tuple[int, int]]]:
    """Parse calendar entries: ``YYYY-MM-DD`` (one date) or ``MM-DD`` (every year).

    Raises:
        InvalidArgument: An entry is malformed (``field[i]`` named), or there are more
            than :data:`MAX_CALENDAR_DATES`.
    """
    dates: set[date] = set()
    yearly: set[tuple[int, int]] = set()
    for i, text in enumerate(texts):
        if i >= MAX_CALENDAR_DATES:
            raise InvalidArgument(field, f"more than {MAX_CALENDAR_DATES} dates")
        where = f"{field}[{i}]"
        if not isinstance(text, str):
            raise InvalidArgument(where, "must be a string")
        full = _DATE_RE.match(text)
        if full is not None:
            try:
                dates.add(date(int(full[1]), int(full[2]), int(full[3])))
            except ValueError as exc:
                raise InvalidArgument(where, f"{text!r} is not a date: {exc}") from None
            continue
        each_year = _YEARLY_RE.match(text)
        if each_year is not None:
            month, day = int(each_year[1]), int(each_year[2])
            try:
                date(2000, month, day)  # a leap year: 02-29 is a valid yearly date
            except ValueError as exc:
                raise InvalidArgument(where, f"{text!r} is not a month and day: {exc}") from None
            yearly.add((month, day))
            continue
        raise InvalidArgument(
            where, f"{text!r} must be YYYY-MM-DD (one date) or MM-DD (every year)"
        )
    return frozenset(dates), frozenset(yearly)


class CalendarFilter:
    """The referenced calendars of one schedule, compiled: which local dates may fire.

    Attributes:
        names: The calendars' names in reference order.
    """

    __slots__ = ("_exclude", "_include", "names")

    def __init__(self, calendars: Sequence[Calendar]) -> None:
        self.names = tuple(c.name for c in calendars)
        self._exclude = tuple(c for c in calendars if c.kind is CalendarKind.EXCLUDE)
        self._include = tuple(c for c in calendars if c.kind is CalendarKind.INCLUDE)

    def refusal(self, day: date) -> str | None:
        """Why ``day`` may not fire (a note naming the calendar), or None when it may."""
        for calendar in self._exclude:
            if day in calendar:
                return f"{day.isoformat()} is excluded by calendar {calendar.name}"
        if self._include and not any(day in c for c in self._include):
            names = ", ".join(c.name for c in self._include)
            return f"{day.isoformat()} is not in include calendar {names}"
        return None

    def refusing(self, day: date) -> str:
        """The name of the calendar that refuses ``day`` (the first exclude one that
        holds it, else the first include one); call only when :meth:`refusal` is set."""
        for calendar in self._exclude:
            if day in calendar:
                return calendar.name
        return self._include[0].name

    def may_fire_after(self, day: date) -> bool:
        """False when no date after ``day`` can ever fire (every include calendar has
        no later date); exclude calendars alone never end a schedule."""
        if not self._include or day >= date.max:
            return day < date.max
        following = day + _ONE_DAY
        return any(c.next_on_or_after(following) is not None for c in self._include)

    def next_candidate(self, day: date, limit: date) -> date | None:
        """The first date after ``day`` that no calendar refuses, looking no further
        than ``limit``: a date after ``limit`` when every date up to it is refused;
        None when no date can ever fire again (no later included date).

        Refused days are skipped here, by set lookups, rather than by searching a
        fire time on each of them: a calendar excluding every day of the year costs
        one walk over the dates up to ``limit``, not a fire-time search per day.
        """
        following = day
        while following < limit:
            following += _ONE_DAY
            if self._include:
                found = [c.next_on_or_after(following) for c in self._include]
                dates = [d for d in found if d is not None]
                if not dates:
                    return None
                following = min(dates)
                if following > limit:
                    return following
            if not any(following in c for c in self._exclude):
                return following
        return limit + _ONE_DAY if limit < date.max else None


def resolve_calendars(
    names: Sequence[str], available: Mapping[str, Calendar] | None, field: str
) -> CalendarFilter | None:
    """The filter for a schedule's calendar references (None when it has none).

    Raises:
        InvalidArgument: A name is not in ``available`` (``field[i]`` named).
    """
    if not names:
        return None
    found = []
    for i, name in enumerate(names):
        calendar = None if available is None else available.get(name)
        if calendar is None:
            raise InvalidArgument(f"{field}[{i}]", f"no calendar named {name!r}")
        found.append(calendar)
    return CalendarFilter(found)


def day_start(zone: zoneinfo.ZoneInfo, day: date) -> datetime:
    """The earliest UTC instant whose local date in ``zone`` may be ``day``: local
    midnight, or the earlier reading of it when midnight is repeated. When midnight does
    not exist (a gap at 00:00) this is at or before the day's first instant: callers use
    it only to skip ahead, and an early cursor merely costs a step."""
    starts = []
    for fold in (0, 1):
        try:
            starts.append(datetime.combine(day, time(0), tzinfo=zone).replace(fold=fold))
        except OverflowError:  # pragma: no cover - guarded by the callers' bounds
            continue
    return min(s.astimezone(UTC) for s in starts)


def before_day(zone: zoneinfo.ZoneInfo, day: date) -> datetime | None:
    """``day_start(zone, day)`` minus 1 µs (a cursor for "strictly after"), or None when
    ``day`` is past what datetime represents in that zone."""
    try:
        return day_start(zone, day) - _US
    except OverflowError:
        return None
