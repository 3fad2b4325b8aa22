"""Next-fire computation: the DST rules on top of naive wall-clock iteration.

croniter only ever sees naive wall-clock times here; it answers "the next naive time
after X that the expression names". Every DST decision is made in this module:

* A named time that exists once fires at that instant.
* A named time in a spring-forward gap (``[T + before, T + after)``) fires, under
  ``SHIFT``, at ``T``, the instant the clocks jump (02:30 -> 03:00 EDT). Every gap time
  of one job maps to ``T``, and so does the first wall time after the gap, so they make
  one run (no two fire times are ever equal): annotated ``SHIFTED_GAP`` when ``T`` is not
  itself a named time, unannotated when it is (the gap times are then ``MERGED_GAP`` in a
  preview). Under ``SKIP`` it does not fire (``SKIPPED_GAP`` in a preview).
* A named time in a fall-back fold (``[T + after, T + before)``) fires at its first
  instant (``FOLD_FIRST``) and, under ``TWICE``, also at its second (``FOLD_SECOND``);
  under ``ONCE`` the second is ``SKIPPED_FOLD_SECOND`` in a preview.

Ordering. Mapping named times to first instants (or to ``T`` for shifted gap times) is
non-decreasing, and all second instants of a fold lie in ``[T, T + (before - after))``,
exactly the stretch the first instants jump over. So the next fire strictly after an
instant ``a`` is found by one forward walk over named times from ``a``'s wall time, plus
the fold's second instants when ``a`` lies inside a fold (on its first pass: after the
remaining first instants; on its second pass: the remaining second instants). That walk
depends only on ``a``: the stored "next due time" is all the state a scheduler needs,
and recomputing from it equals iterating.
"""

from __future__ import annotations

import bisect
import math
import threading
import zoneinfo
from datetime import UTC, datetime, timedelta

from croniter import CroniterBadDateError, CroniterError, croniter

from sundial.core.errors import InvalidArgument

from ._cron import DAYS_AND
from ._spec import DstAnnotation, FireTime, FoldPolicy, GapPolicy
from ._zone import Transition, format_offset_name, transition_near, wall_offsets

# Just below a boundary: croniter's "strictly after" then finds times >= the boundary
# (boundaries are whole seconds, croniter's finest resolution).
_TINY = timedelta(milliseconds=1)
_US = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# croniter and datetime both end at year 9999; stop a day short so offsets never overflow.
_LAST_WALL = datetime(9999, 12, 30)
_FIRST_WALL = datetime(1, 1, 2)
# Consecutive skipped gaps one walk crosses before it concludes the schedule never fires
# again. An ordinary schedule crosses at most one; ``30 2 * 3 0#2`` in New York under SKIP
# names only times that never exist (the US jumps at 02:00 on the 2nd Sunday of March).
_MAX_GAPS = 128
_DAY = timedelta(days=1)
# Most times of day a DailyCron lists (one a minute); one naming more (seconds) is left to
# croniter.
_DAILY_MAX_TIMES = 1440
# Preview entries a single gap or fold may contribute (an every-second job would add
# thousands of identical explanations).
_MAX_DROPPED = 100


def _hm(wall: datetime) -> str:
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")


def _abbr(local: datetime) -> str:
    return f"{_hm(local)} {format_offset_name(local)}"


class WallCron:
    """Naive wall-clock iteration of one expanded expression (croniter, no zone).

    Zone-independent, so shared by the clocks of every zone and policy (building the
    croniter is most of the cost of a cold compile). Thread-safe: the croniter iterator
    is stateful, so calls into it are serialised.

    Attributes:
        expression: The expanded expression (``H`` resolved, seconds last, and the
            :data:`~sundial.schedule._cron.DAYS_AND` suffix when both day fields must
            match).
    """

    __slots__ = ("_iter", "_lock", "expression")

    def __init__(self, expression: str, *, field: str = "schedule.cron") -> None:
        self.expression = expression
        self._lock = threading.Lock()
        plain = expression.removesuffix(DAYS_AND)
        try:
            self._iter = croniter(
                plain, datetime(2000, 1, 1), ret_type=datetime, day_or=plain == expression
            )
        except (CroniterError, ValueError) as exc:
            # The parser should have rejected anything croniter cannot take.
            raise InvalidArgument(field, f"not supported: {exc}") from None
        if self.after(datetime(2000, 1, 1)) is None:
            raise InvalidArgument(field, "never fires")

    def __reduce__(self) -> tuple[type[WallCron], tuple[str]]:
        """Pickled as its expression (the iterator and its lock are rebuilt): a
        computation may run in another process (the API's offload pool)."""
        return (WallCron, (self.expression,))

    def after(self, cursor: datetime) -> datetime | None:
        """The first named wall time strictly after ``cursor`` (naive), or None."""
        if cursor >= _LAST_WALL:
            return None
        with self._lock:
            try:
                wall: datetime = self._iter.get_next(datetime, start_time=cursor)
            except (CroniterBadDateError, OverflowError, ValueError):
                return None
        return wall if wall < _LAST_WALL else None


class DailyCron:
    """Naive wall-clock iteration of an expanded expression that names times of day only
    (day of month, month and day of week all ``*``): the next named time is the next
    entry of one sorted list of seconds of the day, without croniter.

    The same interface and answers as :class:`WallCron` (tests/unit/schedule compare
    them), for the commonest crons (``0 * * * *``, ``*/15 * * * *``, ``H H * * *``).
    Building one costs microseconds instead of croniter's ~200 µs, which is what a batch
    of jobs using ``H`` (one expansion per job) paid per job. Immutable, so thread-safe.
    """

    __slots__ = ("_times", "expression")

    def __init__(self, expression: str, times: tuple[int, ...]) -> None:
        self.expression = expression
        self._times = times

    @classmethod
    def of(cls, expression: str) -> DailyCron | None:
        """The daily form of an expanded expression, or None when it is not one (a day
        field restricted, or more than :data:`_DAILY_MAX_TIMES` times a day)."""
        fields = expression.split(" ")
        if len(fields) not in (5, 6) or fields[2:5] != ["*", "*", "*"]:
            return None
        try:
            hours = _field_values(fields[1], 24)
            minutes = _field_values(fields[0], 60)
            seconds = _field_values(fields[5], 60) if len(fields) == 6 else [0]
        except ValueError:  # a range, step or letter: croniter's
            return None
        if math.prod(map(len, (hours, minutes, seconds))) > _DAILY_MAX_TIMES:
            return None
        times = {h * 3600 + m * 60 + s for h in hours for m in minutes for s in seconds}
        return cls(expression, tuple(sorted(times)))

    def __reduce__(self) -> tuple[type[DailyCron], tuple[str, tuple[int, ...]]]:
        return (DailyCron, (self.expression, self._times))

    def after(self, cursor: datetime) -> datetime | None:
        """The first named wall time strictly after ``cursor`` (naive), or None."""
        if cursor >= _LAST_WALL:
            return None
        times = self._times
        # Named times are whole seconds: one after the cursor's whole second is after it.
        i = bisect.bisect_right(times, cursor.hour * 3600 + cursor.minute * 60 + cursor.second)
        day = cursor.replace(hour=0, minute=0, second=0, microsecond=0)
        if i == len(times):
            day, i = day + _DAY, 0
        wall = day + timedelta(seconds=times[i])
        return wall if wall < _LAST_WALL else None


def _field_values(text: str, limit: int) -> list[int]:
    """The values of a rendered field: ``*`` or a list (ValueError for anything else)."""
    if text == "*":
        return list(range(limit))
    values = [int(token) for token in text.split(",")]
    if not all(0 <= value < limit for value in values):
        raise ValueError(text)
    return values


class CronClock:
    """Fire times of one expanded cron expression in one zone under resolved DST rules.

    Shared by every job with the same expanded expression, zone and resolved policies
    (see :mod:`sundial.schedule._cache`). Thread-safe.

    Attributes:
        expression: The croniter expression (``H`` resolved, seconds last).
        zone: The zone the expression is read in.
        gap: ``SHIFT`` or ``SKIP`` (never ``AUTO``: resolved by the caller).
        fold: ``ONCE`` or ``TWICE`` (never ``AUTO``).
    """

    __slots__ = ("_match_after", "expression", "fold", "gap", "zone")

    def __init__(
        self,
        cron: WallCron | DailyCron,
        zone: zoneinfo.ZoneInfo,
        gap: GapPolicy,
        fold: FoldPolicy,
    ) -> None:
        if gap is GapPolicy.AUTO or fold is FoldPolicy.AUTO:
            raise ValueError("CronClock needs resolved DST policies, not AUTO")
        self.expression = cron.expression
        self.zone = zone
        self.gap = gap
        self.fold = fold
        self._match_after = cron.after

    def next_fire(self, after: datetime) -> FireTime | None:
        """Return the first fire time strictly after ``after`` (aware), or None."""
        return self.scan(after, None)

    def scan(self, after: datetime, dropped: list[FireTime] | None) -> FireTime | None:
        """Find the next fire time; optionally collect what DST rules dropped on the way.

        Args:
            after: An aware instant.
            dropped: If a list, entries for named times the rules dropped between
                ``after`` and the returned fire time are appended (for previews).

        Returns:
            The first fire time strictly after ``after``, or None if there is none.
        """
        zone = self.zone
        try:
            local = after.astimezone(zone)
        except OverflowError:
            if after.year > _LAST_WALL.year // 2:
                return None
            # Within a day of datetime.min: start from the first representable wall time.
            local = _FIRST_WALL.replace(tzinfo=zone)
        wall = local.replace(tzinfo=None, fold=0)
        if wall >= _LAST_WALL:
            return None
        cursor = wall
        first, second = wall_offsets(zone, wall)
        if first > second:
            # `after` is inside a fold. Named times later on its first pass come first;
            # then the second instants not yet passed.
            tr = transition_near(zone, wall, first, second)
            if local.fold == 0:
                named = self._match_after(wall)
                if named is not None and named < tr.end:
                    return self._fold_first(named, tr)
                seconds_from = tr.start - _TINY
            else:
                seconds_from = wall
            fire = self._fold_seconds(seconds_from, tr, dropped)
            if fire is not None:
                return fire
            cursor = tr.end - _TINY
        for _ in range(_MAX_GAPS):
            named = self._match_after(cursor)
            if named is None:
                return None
            first, second = wall_offsets(zone, named)
            if first == second:
                at = (named - first).replace(tzinfo=UTC)
                return FireTime(at=at, local=named.replace(tzinfo=zone), wall=named)
            tr = transition_near(zone, named, first, second)
            if first > second:
                return self._fold_first(named, tr)
            if self.gap is GapPolicy.SHIFT:
                return self._shifted(named, tr, dropped)
            if dropped is not None:
                self._drop_gap(named, tr, DstAnnotation.SKIPPED_GAP, dropped)
            cursor = tr.end - _TINY
        return None

    # -- folds ---------------------------------------------------------------------

    def _fold_first(self, named: datetime, tr: Transition) -> FireTime:
        local = named.replace(tzinfo=self.zone, fold=0)
        if self.fold is FoldPolicy.ONCE:
            how = f"runs once, at the first occurrence ({format_offset_name(local)})"
        else:
            how = f"first occurrence ({format_offset_name(local)})"
        return FireTime(
            at=(named - tr.before).replace(tzinfo=UTC),
            local=local,
            wall=named,
            annotation=DstAnnotation.FOLD_FIRST,
            note=f"{self._fold_text(named, tr)}; {how}",
        )

    def _fold_seconds(
        self, cursor: datetime, tr: Transition, dropped: list[FireTime] | None
    ) -> FireTime | None:
        """The first second instant of a named fold time after ``cursor``, per policy."""
        if self.fold is FoldPolicy.ONCE and dropped is None:
            return None  # nothing to report: jump past the fold
        budget = _MAX_DROPPED
        while True:
            named = self._match_after(cursor)
            if named is None or named >= tr.end:
                return None
            local = named.replace(tzinfo=self.zone, fold=1)
            at = (named - tr.after).replace(tzinfo=UTC)
            text = self._fold_text(named, tr)
            abbr = format_offset_name(local)
            if self.fold is FoldPolicy.TWICE:
                return FireTime(
                    at=at,
                    local=local,
                    wall=named,
                    annotation=DstAnnotation.FOLD_SECOND,
                    note=f"{text}; second occurrence ({abbr})",
                )
            assert dropped is not None
            if budget > 0:
                dropped.append(
                    FireTime(
                        at=at,
                        local=local,
                        wall=named,
                        annotation=DstAnnotation.SKIPPED_FOLD_SECOND,
                        note=f"{text}; second occurrence ({abbr}) skipped: runs once",
                        dropped=True,
                    )
                )
                budget -= 1
            cursor = named

    def _fold_text(self, named: datetime, tr: Transition) -> str:
        return (
            f"{_hm(named)} occurs twice on {named.date()} in {self.zone.key} "
            f"(clocks go back from {_hm(tr.end)} to {_hm(tr.start)})"
        )

    # -- gaps ----------------------------------------------------------------------

    def _shifted(self, named: datetime, tr: Transition, dropped: list[FireTime] | None) -> FireTime:
        local = tr.at.astimezone(self.zone)
        if self._match_after(tr.end - _TINY) == tr.end:
            # The jump lands on a time the schedule names anyway: that run stands for
            # the gap times too (one run per instant).
            if dropped is not None:
                self._drop_gap(named, tr, DstAnnotation.MERGED_GAP, dropped)
            return FireTime(at=tr.at, local=local, wall=tr.end)
        if dropped is not None:
            later = self._match_after(named)
            if later is not None and later < tr.end:
                self._drop_gap(later, tr, DstAnnotation.MERGED_GAP, dropped)
        return FireTime(
            at=tr.at,
            local=local,
            wall=named,
            annotation=DstAnnotation.SHIFTED_GAP,
            note=f"{self._gap_text(named, tr)}; moved to {_abbr(local)}",
        )

    def _drop_gap(
        self,
        named: datetime,
        tr: Transition,
        annotation: DstAnnotation,
        dropped: list[FireTime],
    ) -> None:
        """Report ``named`` and every later named time in the same gap as dropped."""
        local = tr.at.astimezone(self.zone)
        if annotation is DstAnnotation.SKIPPED_GAP:
            how = "skipped"
        else:
            how = f"moved to {_abbr(local)}, which already has a run"
        current: datetime | None = named
        for _ in range(_MAX_DROPPED):
            if current is None or current >= tr.end:
                return
            dropped.append(
                FireTime(
                    at=tr.at,
                    local=local,
                    wall=current,
                    annotation=annotation,
                    note=f"{self._gap_text(current, tr)}; {how}",
                    dropped=True,
                )
            )
            current = self._match_after(current)

    def _gap_text(self, named: datetime, tr: Transition) -> str:
        return (
            f"{_hm(named)} does not exist on {named.date()} in {self.zone.key} "
            f"(clocks jump from {_hm(tr.start)} to {_hm(tr.end)})"
        )


class _ElapsedClock:
    """A clock of UTC arithmetic: nothing is ever dropped, and the zone only names each
    fire time's local time."""

    __slots__ = ()
    zone: zoneinfo.ZoneInfo

    def next_fire(self, after: datetime) -> FireTime | None:
        raise NotImplementedError

    def scan(self, after: datetime, dropped: list[FireTime] | None) -> FireTime | None:
        """Same as :meth:`next_fire` (nothing is ever dropped)."""
        return self.next_fire(after)

    def _fire(self, at: datetime) -> FireTime | None:
        try:
            local = at.astimezone(self.zone)
        except OverflowError:
            return None
        return FireTime(at=at, local=local, wall=local.replace(tzinfo=None))


class IntervalClock(_ElapsedClock):
    """Fire times ``epoch + offset + k * every``: UTC arithmetic, immune to DST.

    Attributes:
        every: The period.
        offset: The phase from the Unix epoch.
        zone: Used only for the ``local`` of fire times.
    """

    __slots__ = ("_every_us", "_offset_us", "every", "offset", "zone")

    def __init__(self, every: timedelta, offset: timedelta, zone: zoneinfo.ZoneInfo) -> None:
        self.every = every
        self.offset = offset
        self.zone = zone
        self._every_us = every // _US
        self._offset_us = offset // _US

    def next_fire(self, after: datetime) -> FireTime | None:
        """Return the first fire time strictly after ``after`` (aware), or None."""
        after_us = (after - _EPOCH) // _US
        k = (after_us - self._offset_us) // self._every_us + 1
        try:
            at = _EPOCH + timedelta(microseconds=self._offset_us + k * self._every_us)
        except OverflowError:
            return None
        return self._fire(at)


class FixedDelayClock(_ElapsedClock):
    """Fixed delay (``IntervalSpec.from_end``): the next fire time is ``every`` after the
    instant asked about, or ``start`` while that is later. The scheduler asks with the
    end of the previous run; anything else (a preview, a first fire time) gets the
    earliest time the schedule can fire.

    Attributes:
        every: The delay.
        start: The schedule's ``start_time`` (UTC), or None.
        zone: Used only for the ``local`` of fire times.
    """

    __slots__ = ("every", "start", "zone")

    def __init__(self, every: timedelta, start: datetime | None, zone: zoneinfo.ZoneInfo) -> None:
        self.every = every
        self.start = start
        self.zone = zone

    def next_fire(self, after: datetime) -> FireTime | None:
        """Return ``start`` if it is after ``after``, else ``after + every`` (or None
        past the last representable time)."""
        if self.start is not None and self.start > after:
            return self._fire(self.start)
        try:
            return self._fire(after.astimezone(UTC) + self.every)
        except OverflowError:
            return None


class OnceClock:
    """A single fire time.

    Attributes:
        at: The instant (aware UTC).
        zone: Used only for the ``local`` of the fire time.
    """

    __slots__ = ("_fire", "at", "zone")

    def __init__(self, at: datetime, zone: zoneinfo.ZoneInfo) -> None:
        self.at = at.astimezone(UTC)
        self.zone = zone
        local = self.at.astimezone(zone)
        self._fire = FireTime(at=self.at, local=local, wall=local.replace(tzinfo=None))

    def next_fire(self, after: datetime) -> FireTime | None:
        """Return the instant if it is strictly after ``after``, else None."""
        return self._fire if self.at > after else None

    def scan(self, after: datetime, dropped: list[FireTime] | None) -> FireTime | None:
        """Same as :meth:`next_fire`."""
        return self.next_fire(after)


Clock = CronClock | IntervalClock | FixedDelayClock | OnceClock
