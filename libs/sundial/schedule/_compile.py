"""Validate a :class:`Schedule` and compile it into something that answers "when next?".

Decisions the design leaves open, made here:

* ``start_time`` and ``end_time`` are inclusive bounds; ``end_time`` equal to
  ``start_time`` is allowed (at most one fire), ``end_time`` before it is an error.
* ``max_runs`` is counted by the caller (the scheduler's stats) and passed in as
  ``fired_count``; ``0`` means unlimited.
* Interval schedules are anchored on the Unix epoch plus ``offset`` (Temporal's rule),
  not on ``start_time``; ``every`` must be at least one second. A fixed-delay interval
  (``from_end``) has no anchor: it stands alone (no list, no calendars, no offset), and
  its fire times here are the earliest ones (each ``every`` after the instant asked about).
* ``time_zone`` ``""`` means UTC. The DST policies only affect cron schedules.
* Several specs: the next fire time is the earliest of every spec's next one; an instant
  more than one names is one fire time, the lowest spec index's. Each spec resolves DST
  ``AUTO`` by its own fields.
* Calendars filter that union by the fire time's local date; refused days are skipped
  whole (to the next date no calendar refuses, found by set lookups).
* Every search is bounded (docs/design.md section 4, "Bounded searches"): a search for
  the next fire time through calendars looks at most :data:`SEARCH_HORIZON` ahead and
  makes at most :data:`MAX_SEARCH_STEPS` clock steps (one spec's next fire time each);
  past either it raises :class:`SearchExceeded` (an ``InvalidArgument`` on
  ``schedule``, so a write is refused and the dispatcher quarantines the job) instead of
  searching on. A preview stops at its own budget and returns what it found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta

from sundial.core.errors import InvalidArgument

from . import _cache
from ._calendar import Calendar, CalendarFilter, before_day, resolve_calendars
from ._fire import Clock, CronClock, FixedDelayClock, IntervalClock, OnceClock
from ._jitter import jitter_offset
from ._spec import (
    CronSpec,
    FireTime,
    FoldPolicy,
    GapPolicy,
    IntervalSpec,
    OnceSpec,
    Schedule,
    Spec,
)
from ._zone import TzdataZone, load_zone

_US = timedelta(microseconds=1)
MIN_INTERVAL = timedelta(seconds=1)
MAX_SPECS = 16
"""Specs one schedule may list."""
MAX_CALENDARS = 8
"""Calendars one schedule may reference."""
SEARCH_HORIZON = timedelta(days=5 * 365 + 2)
"""How far past its start a fire-time search through calendars looks (five years)."""
MAX_SEARCH_STEPS = 4096
"""Clock steps (one spec's next fire time: the unit of cost, tens of microseconds) one
search may take; a union of 16 specs spends 16 per candidate day."""


class SearchExceeded(InvalidArgument):
    """A fire-time search reached its horizon or step budget without finding a fire
    time its calendars allow. The field is ``schedule``; the message says how far the
    search looked."""

    def __init__(self, start: datetime, looked_until: datetime, steps: int) -> None:
        super().__init__(
            "schedule",
            f"no fire time its calendars allow from {start:%Y-%m-%d} to "
            f"{looked_until:%Y-%m-%d} ({steps} steps; a search looks at most 5 years "
            "ahead): check its specs against its calendars",
            reason="SCHEDULE_SEARCH_EXCEEDED",
        )
        self.start = start
        self.looked_until = looked_until
        self.steps = steps


# Occurrences a preview reports as removed per refused day (an every-second spec would
# add 86,400 identical explanations).
_MAX_REMOVED_PER_DAY = 100
# And per preview (an INCLUDE calendar of a few dates a year refuses most days).
_MAX_REMOVED = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class _Scan:
    """One spec's scan: its next fire time after ``after`` and what it dropped."""

    after: datetime
    fire: FireTime | None
    dropped: list[FireTime]


@dataclasses.dataclass(slots=True)
class _Walk:
    """The state of one preview: each spec's last scan and the clock steps spent."""

    scans: dict[int, _Scan] = dataclasses.field(default_factory=dict)
    steps: int = 0


class CompiledSchedule:
    """A validated schedule bound to a job: computes its fire times.

    Cheap to build (every expensive part is shared through caches), immutable and
    thread-safe. All instants in and out are timezone-aware; results are in UTC.

    Attributes:
        schedule: The schedule it was compiled from.
        job_id: The job (``H`` and jitter are hashed from it).
        zone: The schedule's zone.
        start_time: Inclusive lower bound, UTC, or None.
        end_time: Inclusive upper bound, UTC, or None.
        max_runs: Maximum number of runs, ``0`` for unlimited.
        jitter: Exclusive upper bound of the dispatch delay.
        fixed_time: Cron only: neither minute nor hour is a wildcard (decides AUTO).
        gap_policy: Cron only: the resolved gap rule (``SHIFT`` or ``SKIP``), else None.
        fold_policy: Cron only: the resolved fold rule (``ONCE`` or ``TWICE``), else None.
        expanded_cron: Cron only: the expression croniter iterates (``H`` resolved).
        calendars: The referenced calendars, compiled (None: no calendar).
        fixed_delay: The delay of a fixed-delay interval (``from_end``), else None: the
            scheduler then counts each occurrence from the previous run's end.

    Several specs: ``fixed_time``, ``gap_policy``, ``fold_policy`` and
    ``expanded_cron`` describe the first spec; each spec resolves its own ``AUTO``.
    """

    __slots__ = (
        "_clock",
        "_clocks",
        "_cron",
        "_memo",
        "calendars",
        "end_time",
        "expanded_cron",
        "fixed_delay",
        "fixed_time",
        "fold_policy",
        "gap_policy",
        "jitter",
        "job_id",
        "max_runs",
        "schedule",
        "start_time",
        "zone",
    )

    def __init__(
        self,
        schedule: Schedule,
        job_id: str,
        clock: Clock,
        *,
        start_time: datetime | None,
        end_time: datetime | None,
        fixed_time: bool | None = None,
        expanded_cron: str | None = None,
        more_clocks: tuple[Clock, ...] = (),
        calendars: CalendarFilter | None = None,
    ) -> None:
        self.schedule = schedule
        self.job_id = job_id
        self._clock = clock
        self._clocks = (clock, *more_clocks)
        # Only cron fire times go through the shared next-fire cache (None otherwise).
        self._cron = clock if isinstance(clock, CronClock) else None
        self.calendars = calendars
        # The last calendar-filtered search (after, result): a herd sharing one compiled
        # schedule asks the same question once per job.
        self._memo: tuple[datetime, FireTime | None] | None = None
        self.zone = clock.zone
        self.start_time = start_time
        self.end_time = end_time
        self.max_runs = schedule.max_runs
        self.jitter = schedule.jitter
        self.fixed_time = fixed_time
        self.expanded_cron = expanded_cron
        self.gap_policy = clock.gap if isinstance(clock, CronClock) else None
        self.fold_policy = clock.fold if isinstance(clock, CronClock) else None
        self.fixed_delay = clock.every if isinstance(clock, FixedDelayClock) else None

    def __repr__(self) -> str:
        return f"CompiledSchedule(job_id={self.job_id!r}, schedule={self.schedule!r})"

    def for_job(self, job_id: str) -> CompiledSchedule:
        """The same schedule compiled for ``job_id``: only what depends on the job id
        (each cron spec's ``H`` expansion and its clock) is computed again, the rest
        (validated when this one was compiled) is shared. What :func:`compile_schedule`
        of the schedule for ``job_id`` would return, at a fraction of its cost (a batch
        of jobs sharing an ``H`` schedule).

        Raises:
            InvalidArgument: This job's expansion can never fire (the field is named).
        """
        schedule = self.schedule
        zone = load_zone(schedule.time_zone)
        compiled = [
            _compile_spec(spec, schedule, zone, job_id, schedule.spec_field(i))
            for i, spec in enumerate(schedule.specs)
        ]
        clock, fixed_time, expanded = compiled[0]
        return CompiledSchedule(
            schedule,
            job_id,
            clock,
            start_time=self.start_time,
            end_time=self.end_time,
            fixed_time=fixed_time,
            expanded_cron=expanded,
            more_clocks=tuple(c[0] for c in compiled[1:]),
            calendars=self.calendars,
        )

    def next_fire(self, after: datetime, fired_count: int = 0) -> FireTime | None:
        """Return the first fire time strictly after ``after``.

        Honours ``start_time``, ``end_time`` and ``max_runs``. Served from the shared
        next-fire cache for cron schedules.

        Args:
            after: Any aware instant (typically the last fire time, or now).
            fired_count: Runs the job has had so far (for ``max_runs``).

        Returns:
            The fire time, or None when the schedule is exhausted.

        Raises:
            ValueError: ``after`` is naive.
        """
        if self.max_runs and fired_count >= self.max_runs:
            return None
        after = self._lower_bound(_as_utc(after, "after"))
        if self.calendars is None:
            fire = self._raw_next(after)
            if fire is None or not self._within_end(fire.at):
                return None
            return fire
        memo = self._memo
        if memo is not None and memo[0] == after:
            return memo[1]
        found = self._allowed_next(after)
        self._memo = (after, found)
        return found

    def _allowed_next(self, after: datetime) -> FireTime | None:
        """The first fire time after ``after`` the calendars allow, within ``end_time``.

        Raises:
            SearchExceeded: None found within the horizon or the step budget.
        """
        assert self.calendars is not None
        start = after
        horizon, limit = self._horizon(start)
        steps = 0
        while True:
            fire = self._raw_next(after)
            steps += len(self._clocks)
            if fire is None or not self._within_end(fire.at):
                return None
            if fire.at > horizon:
                raise SearchExceeded(start, horizon, steps)
            day = fire.local.date()
            if self.calendars.refusal(day) is None:
                return fire
            if steps >= MAX_SEARCH_STEPS:
                raise SearchExceeded(start, fire.at, steps)
            cursor = self._skip_to(fire, day, limit)
            if cursor is None:
                return None
            after = cursor

    def preview(self, after: datetime, count: int, *, fired_count: int = 0) -> list[FireTime]:
        """Return the next ``count`` fire times, with what DST rules and calendars
        dropped between them.

        Dropped entries (``dropped=True``: skipped gap times, gap times merged into
        another run, skipped second occurrences, occurrences a calendar removed) are
        extra: ``count`` counts runs only. Entries are ordered by instant, then by the
        wall time they name. At most 100 dropped entries are reported per DST
        transition, 100 per day a calendar refused and 1,000 calendar removals in all
        (later removed occurrences are skipped silently). Bounded like every search:
        past :data:`SEARCH_HORIZON` after its start, or past ``count`` fire times'
        steps plus :data:`MAX_SEARCH_STEPS` spent on refused days, it stops and
        returns what it found.

        Args:
            after: Any aware instant; entries are strictly after it.
            count: Number of fire times wanted.
            fired_count: Runs the job has had so far (for ``max_runs``).

        Returns:
            The entries; fewer fire times than ``count`` if the schedule ends.
        """
        if count < 0:
            raise ValueError("count must not be negative")
        cursor = self._lower_bound(_as_utc(after, "after"))
        horizon, limit = self._horizon(cursor)
        entries: list[FireTime] = []
        seen: set[tuple[datetime, datetime, int]] = set()
        fires = 0
        walk = _Walk()
        refused_steps = 0
        removed_day: date | None = None
        removed = reported = 0
        while fires < count and not (self.max_runs and fired_count + fires >= self.max_runs):
            dropped: list[FireTime] = []
            before = walk.steps
            fire = self._raw_scan(cursor, dropped, walk)
            for d in dropped:
                key = (d.at, d.wall, d.spec_index)
                if key not in seen and self._within_end(d.at):
                    seen.add(key)
                    entries.append(d)
            if fire is None or not self._within_end(fire.at):
                break
            day = fire.local.date()
            why = None if self.calendars is None else self.calendars.refusal(day)
            if why is None:
                entries.append(fire)
                fires += 1
                cursor = fire.at
                continue
            assert self.calendars is not None
            refused_steps += walk.steps - before
            if refused_steps > MAX_SEARCH_STEPS or fire.at > horizon:
                break
            if day != removed_day:
                removed_day, removed = day, 0
            removed += 1
            if reported >= _MAX_REMOVED:
                skip = self._skip_to(fire, day, limit)
                if skip is None:
                    break
                cursor = skip
                continue
            entries.append(
                dataclasses.replace(
                    fire,
                    dropped=True,
                    calendar=self.calendars.refusing(day),
                    note=why if fire.note is None else f"{fire.note}; {why}",
                )
            )
            reported += 1
            if removed < _MAX_REMOVED_PER_DAY and reported < _MAX_REMOVED:
                if not self.calendars.may_fire_after(day):
                    break  # no later date can fire
                cursor = fire.at
                continue
            skip = self._skip_to(fire, day, limit)
            if skip is None:
                break
            cursor = skip
        entries.sort(key=lambda e: (e.at, e.wall))
        return entries

    def allows(self, at: datetime) -> bool:
        """Whether the calendars let an occurrence at ``at`` fire (its local date in the
        schedule's zone); True without calendars."""
        if self.calendars is None:
            return True
        day = _as_utc(at, "at").astimezone(self.zone).date()
        return self.calendars.refusal(day) is None

    def dispatch_at(self, nominal: datetime) -> datetime:
        """Return when the occurrence ``nominal`` should start: nominal plus jitter."""
        return nominal + jitter_offset(self.job_id, nominal, self.jitter)

    def remaining_runs(self, fired_count: int) -> int | None:
        """Runs left under ``max_runs`` after ``fired_count``; None if unlimited."""
        if not self.max_runs:
            return None
        return max(0, self.max_runs - fired_count)

    def _raw_next(self, after: datetime) -> FireTime | None:
        """The union's next fire time strictly after ``after``, before calendars."""
        if len(self._clocks) == 1:
            if self._cron is not None:
                return _cache.next_fire(self._cron, after)
            return self._clock.next_fire(after)
        best: FireTime | None = None
        for index, clock in enumerate(self._clocks):
            if isinstance(clock, CronClock):
                fire = _cache.next_fire(clock, after)
            else:
                fire = clock.next_fire(after)
            # Strictly earlier only: an instant two specs name keeps the first spec's.
            if fire is not None and (best is None or fire.at < best.at):
                best = fire if index == 0 else dataclasses.replace(fire, spec_index=index)
        return best

    def _raw_scan(self, after: datetime, dropped: list[FireTime], walk: _Walk) -> FireTime | None:
        """:meth:`_raw_next` collecting what DST rules dropped up to the fire time.

        ``walk`` keeps each spec's last scan across the calls of one walk: a spec whose
        next fire time is still ahead of ``after`` is not scanned again, so a preview
        of a union of n specs costs about one scan per fire time, not n.
        """
        walk.steps += 1 if len(self._clocks) == 1 else 0
        if len(self._clocks) == 1:
            return self._clock.scan(after, dropped)
        best: FireTime | None = None
        found: list[FireTime] = []
        for index, clock in enumerate(self._clocks):
            scan = walk.scans.get(index)
            if (
                scan is None
                or after < scan.after
                or (scan.fire is not None and after >= scan.fire.at)
            ):
                mine: list[FireTime] = []
                fire = clock.scan(after, mine)
                if index:
                    fire = None if fire is None else dataclasses.replace(fire, spec_index=index)
                    mine = [dataclasses.replace(d, spec_index=index) for d in mine]
                scan = walk.scans[index] = _Scan(after, fire, mine)
                walk.steps += 1
                found.extend(mine)
            else:  # reused: only what lies ahead of the cursor is news
                found.extend(d for d in scan.dropped if d.at > after)
            fire = scan.fire
            if fire is not None and (best is None or fire.at < best.at):
                best = fire
        # Another spec's drops beyond the chosen fire are reported when the walk gets there.
        dropped.extend(d for d in found if best is None or d.at <= best.at)
        return best

    def _skip_to(self, fire: FireTime, day: date, limit: date) -> datetime | None:
        """A cursor past the refused ``day`` of ``fire``: just before the next date that
        may fire, looking up to ``limit`` (never before ``fire``, so every step makes
        progress); None: never."""
        assert self.calendars is not None
        following = self.calendars.next_candidate(day, limit)
        if following is None:
            return None
        start = before_day(self.zone, following)
        if start is None:
            return None
        return max(fire.at, start)

    def _horizon(self, start: datetime) -> tuple[datetime, date]:
        """How far a search from ``start`` looks: the instant, and its local date (the
        last date a calendar skip may reach); capped at the last representable day."""
        try:
            horizon = start + SEARCH_HORIZON
            return horizon, horizon.astimezone(self.zone).date()
        except OverflowError:
            return datetime.max.replace(tzinfo=UTC), date.max - timedelta(days=2)

    def _lower_bound(self, after: datetime) -> datetime:
        # "strictly after start - 1us" is "at or after start": start is inclusive.
        if self.start_time is not None and after < self.start_time:
            return self.start_time - _US
        return after

    def _within_end(self, at: datetime) -> bool:
        return self.end_time is None or at <= self.end_time


def depends_on_job_id(schedule: Schedule) -> bool:
    """Whether compiling ``schedule`` for different jobs can give different results
    (jitter, or a cron field using Jenkins ``H``). When not, one compilation serves every
    job with this schedule (a herd, a batch import). An expression that does not parse
    counts as dependent: compiling it per job reports the error."""
    if schedule.jitter:
        return True
    for spec in schedule.specs:
        if isinstance(spec, CronSpec):
            try:
                if _cache.parsed_cron(spec.expression).uses_hash:
                    return True
            except InvalidArgument:
                return True
    return False


def compile_schedule(
    schedule: Schedule, *, job_id: str, calendars: Mapping[str, Calendar] | None = None
) -> CompiledSchedule:
    """Validate ``schedule`` and compile it for ``job_id``.

    Every problem raises :class:`~sundial.core.errors.InvalidArgument` naming the field:
    ``schedule.cron``, ``schedule.interval.every``, ``schedule.interval.offset``,
    ``schedule.once`` (``schedule.specs[i].cron`` and so on for a list),
    ``schedule.specs``, ``schedule.calendars[i]``, ``schedule.time_zone``,
    ``schedule.start_time``, ``schedule.end_time``, ``schedule.jitter``,
    ``schedule.max_runs``, ``schedule.dst.gap``, ``schedule.dst.fold`` (or ``schedule``
    when no spec is set).

    Args:
        schedule: The schedule.
        job_id: The job's id (hashed for ``H`` and jitter; per job, whichever spec).
        calendars: The calendars the schedule may reference, by name (the tenant's);
            every name in ``schedule.calendars`` must be there.

    Returns:
        The compiled schedule. Compiling many jobs that share an expression and zone is
        cheap: parsed expressions and clocks come from shared caches.

    Raises:
        InvalidArgument: The schedule is invalid (the field is named).
        TypeError: ``job_id`` is not a string (a programming error, not user input).
    """
    if not isinstance(job_id, str):
        raise TypeError(f"job_id must be a str, got {type(job_id).__name__}")
    if not isinstance(schedule, Schedule):
        raise InvalidArgument("schedule", f"expected a Schedule, got {type(schedule).__name__}")
    zone = load_zone(schedule.time_zone)
    start = _optional_instant(schedule.start_time, "schedule.start_time")
    end = _optional_instant(schedule.end_time, "schedule.end_time")
    if start is not None and end is not None and end < start:
        raise InvalidArgument(
            "schedule.end_time",
            f"{end.isoformat()} is before start_time {start.isoformat()}",
        )
    _check_duration(schedule.jitter, "schedule.jitter")
    if not isinstance(schedule.max_runs, int) or isinstance(schedule.max_runs, bool):
        raise InvalidArgument("schedule.max_runs", "must be an integer")
    if schedule.max_runs < 0:
        raise InvalidArgument("schedule.max_runs", f"must not be negative, got {schedule.max_runs}")
    if not isinstance(schedule.dst_gap, GapPolicy):
        raise InvalidArgument("schedule.dst.gap", f"unknown gap policy {schedule.dst_gap!r}")
    if not isinstance(schedule.dst_fold, FoldPolicy):
        raise InvalidArgument("schedule.dst.fold", f"unknown fold policy {schedule.dst_fold!r}")
    specs = schedule.specs
    if len(specs) > MAX_SPECS:
        raise InvalidArgument("schedule.specs", f"at most {MAX_SPECS} specs, got {len(specs)}")
    if len(schedule.calendars) > MAX_CALENDARS:
        raise InvalidArgument(
            "schedule.calendars",
            f"at most {MAX_CALENDARS} calendars, got {len(schedule.calendars)}",
        )
    if len(set(schedule.calendars)) != len(schedule.calendars):
        raise InvalidArgument("schedule.calendars", "names a calendar more than once")
    calendar_filter = resolve_calendars(schedule.calendars, calendars, "schedule.calendars")
    compiled = [
        _compile_spec(spec, schedule, zone, job_id, schedule.spec_field(i))
        for i, spec in enumerate(specs)
    ]
    if isinstance(compiled[0][0], FixedDelayClock) and schedule.calendars:
        raise InvalidArgument(
            "schedule.calendars",
            "a fixed-delay interval (interval.from_end) takes no calendars: its fire times "
            "follow the runs' ends, not dates",
        )
    clock, fixed_time, expanded = compiled[0]
    return CompiledSchedule(
        schedule,
        job_id,
        clock,
        start_time=start,
        end_time=end,
        fixed_time=fixed_time,
        expanded_cron=expanded,
        more_clocks=tuple(c[0] for c in compiled[1:]),
        calendars=calendar_filter,
    )


def _compile_spec(
    spec: Spec, schedule: Schedule, zone: TzdataZone, job_id: str, field: str
) -> tuple[Clock, bool | None, str | None]:
    """One spec's clock, with (cron only) whether it is fixed-time and its expansion."""
    if isinstance(spec, CronSpec):
        if not isinstance(spec.expression, str):
            raise InvalidArgument(f"{field}.cron", "must be a string")
        try:
            parsed = _cache.parsed_cron(spec.expression)
            expanded = _cache.expanded_cron(spec.expression, job_id if parsed.uses_hash else "")
            gap = schedule.dst_gap
            if gap is GapPolicy.AUTO:
                gap = GapPolicy.SHIFT if parsed.fixed_time else GapPolicy.SKIP
            fold = schedule.dst_fold
            if fold is FoldPolicy.AUTO:
                fold = FoldPolicy.ONCE if parsed.fixed_time else FoldPolicy.TWICE
            clock = _cache.cron_clock(expanded, zone.key, gap, fold)
        except InvalidArgument as exc:
            if field == "schedule" or not exc.field.startswith("schedule."):
                raise
            raise InvalidArgument(field + exc.field.removeprefix("schedule"), exc.problem) from None
        return clock, parsed.fixed_time, expanded
    if isinstance(spec, IntervalSpec):
        _check_duration(spec.every, f"{field}.interval.every")
        if spec.every < MIN_INTERVAL:
            raise InvalidArgument(
                f"{field}.interval.every", f"must be at least 1s, got {_seconds(spec.every)}"
            )
        _check_duration(spec.offset, f"{field}.interval.offset")
        if spec.from_end:
            return _fixed_delay_clock(spec, schedule, zone, field), None, None
        if spec.offset >= spec.every:
            raise InvalidArgument(
                f"{field}.interval.offset",
                f"must be shorter than the interval ({_seconds(spec.every)}), "
                f"got {_seconds(spec.offset)}",
            )
        return IntervalClock(spec.every, spec.offset, zone), None, None
    if isinstance(spec, OnceSpec):
        at = _optional_instant(spec.at, f"{field}.once")
        if at is None:
            raise InvalidArgument(f"{field}.once", "is required")
        return OnceClock(at, zone), None, None
    raise InvalidArgument(field, "one of cron, interval or once is required")


def _fixed_delay_clock(
    spec: IntervalSpec, schedule: Schedule, zone: TzdataZone, field: str
) -> FixedDelayClock:
    """The clock of a fixed-delay interval; its limits: alone, and no offset."""
    if schedule.spec_list:
        raise InvalidArgument(
            f"{field}.interval.from_end",
            "a fixed-delay interval stands alone: use schedule.interval, not schedule.specs",
        )
    if spec.offset:
        raise InvalidArgument(
            f"{field}.interval.offset",
            f"must be 0 with from_end (the runs' ends set the phase), got {_seconds(spec.offset)}",
        )
    start = _optional_instant(schedule.start_time, "schedule.start_time")
    return FixedDelayClock(spec.every, start, zone)


def _as_utc(value: datetime, name: str) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware, got {value!r}")
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _optional_instant(value: object, field: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidArgument(field, f"must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(field, "must be timezone-aware")
    return value.astimezone(UTC)


def _check_duration(value: object, field: str) -> None:
    if not isinstance(value, timedelta):
        raise InvalidArgument(field, f"must be a duration, got {type(value).__name__}")
    if value < timedelta(0):
        raise InvalidArgument(field, f"must not be negative, got {_seconds(value)}")


def _seconds(value: timedelta) -> str:
    return f"{value.total_seconds():g}s"
