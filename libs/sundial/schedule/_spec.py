"""The schedule vocabulary: specs, policies and the fire times computed from them.

These are plain frozen values with no behaviour beyond their fields. They are validated
in one place, :func:`sundial.schedule.compile_schedule`, which raises
:class:`sundial.core.errors.InvalidArgument` naming the offending field; constructing an
invalid value here is allowed so the API layer can build one from a request and have it
judged as a whole.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta


class GapPolicy(enum.Enum):
    """What a cron time that does not exist (spring-forward gap) does.

    Attributes:
        AUTO: Vixie cron / cronie: ``SHIFT`` for a fixed-time schedule, ``SKIP`` for a
            wildcard-hour or wildcard-minute schedule.
        SHIFT: Run at the instant the clocks jump (02:30 -> 03:00 EDT). Several gap
            times of one job collapse into that one run.
        SKIP: No run for that time.
    """

    AUTO = "AUTO"
    SHIFT = "SHIFT"
    SKIP = "SKIP"


class FoldPolicy(enum.Enum):
    """What a cron time that occurs twice (fall-back fold) does.

    Attributes:
        AUTO: Vixie cron / cronie: ``ONCE`` for a fixed-time schedule, ``TWICE`` for a
            wildcard-hour or wildcard-minute schedule.
        ONCE: Run at the first occurrence only.
        TWICE: Run at both occurrences (it follows elapsed wall-clock time).
    """

    AUTO = "AUTO"
    ONCE = "ONCE"
    TWICE = "TWICE"


class MisfirePolicy(enum.Enum):
    """What to do with occurrences found due later than the misfire threshold.

    Attributes:
        RUN_ONCE: One run for the latest missed occurrence, then resume.
        SKIP: No run for missed occurrences; wait for the next slot.
        CATCH_UP: A run for every missed occurrence within the catch-up window, at most
            ``max_catchup`` of them (the most recent), dispatched oldest first.
    """

    RUN_ONCE = "RUN_ONCE"
    SKIP = "SKIP"
    CATCH_UP = "CATCH_UP"


class DstAnnotation(enum.Enum):
    """Why a fire time is not simply "the named wall-clock time, once".

    Attributes:
        SHIFTED_GAP: The named time does not exist; the run happens at the instant the
            clocks jump.
        SKIPPED_GAP: The named time does not exist and the gap policy skips it
            (preview only: ``dropped=True``).
        MERGED_GAP: The named time does not exist; shifting it would land on an instant
            that already has a run of this job, so the two are one run (preview only).
        FOLD_FIRST: The named time occurs twice; this is the first occurrence.
        FOLD_SECOND: The named time occurs twice; this is the second occurrence.
        SKIPPED_FOLD_SECOND: The second occurrence of a repeated time, not run because
            the fold policy runs it once (preview only).
    """

    SHIFTED_GAP = "SHIFTED_GAP"
    SKIPPED_GAP = "SKIPPED_GAP"
    MERGED_GAP = "MERGED_GAP"
    FOLD_FIRST = "FOLD_FIRST"
    FOLD_SECOND = "FOLD_SECOND"
    SKIPPED_FOLD_SECOND = "SKIPPED_FOLD_SECOND"


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A cron expression.

    Five fields (minute hour day-of-month month day-of-week), or six with seconds first
    (Quartz/Spring order), or a macro (``@yearly @annually @monthly @weekly @daily
    @midnight @hourly``). ``L``, ``W``, ``#`` and Jenkins ``H`` are supported; see
    :mod:`sundial.schedule._cron` for the grammar.

    Attributes:
        expression: The expression as the user wrote it.
    """

    expression: str


@dataclass(frozen=True, slots=True)
class IntervalSpec:
    """Every ``every``, at instants ``epoch + offset + k * every``.

    Elapsed-time based and immune to DST (it is UTC arithmetic). The anchor is the Unix
    epoch shifted by ``offset`` (as Temporal's interval spec does), not ``start_time``,
    so the sequence is a pure function of the spec and survives edits of the bounds.

    With ``from_end`` (fixed delay) the grid is gone: an occurrence is ``every`` after the
    previous scheduled run ended, which only the scheduler knows (docs/design.md section
    4, "Fixed delay"); computed alone, each fire time is ``every`` after the instant
    asked about, the earliest the next one can be.

    Attributes:
        every: The period; at least one second.
        offset: The phase, ``0 <= offset < every``; 0 with ``from_end``.
        from_end: Fixed delay: count ``every`` from the end of the previous run.
    """

    every: timedelta
    offset: timedelta = timedelta(0)
    from_end: bool = False


@dataclass(frozen=True, slots=True)
class OnceSpec:
    """A single instant.

    Attributes:
        at: The instant (timezone-aware).
    """

    at: datetime


Spec = CronSpec | IntervalSpec | OnceSpec


@dataclass(frozen=True, slots=True)
class Schedule:
    """A job's schedule: when occurrences are due.

    A schedule has one spec or several: its fire times are then the union of theirs,
    an instant named by more than one spec fires once (attributed to the first spec that
    names it). Bounds, ``max_runs``, jitter and the DST policies apply to the union;
    calendars filter it by local date.

    Attributes:
        spec: What repeats (cron, interval or once); the first spec of a list.
        time_zone: IANA zone name the cron expression is read in; ``""`` means UTC
            (proto3's unset string). Also used for the ``local`` of every fire time.
        start_time: No fire time before this instant (inclusive bound).
        end_time: No fire time after this instant (inclusive bound).
        jitter: Upper bound (exclusive) of the deterministic delay added at dispatch;
            the run key keeps the nominal time.
        dst_gap: Override for times in a spring-forward gap (cron only).
        dst_fold: Override for times in a fall-back fold (cron only).
        max_runs: Stop after this many runs; ``0`` means unlimited. The caller counts
            runs and passes the count to ``next_fire``.
    """

    spec: Spec
    time_zone: str = "UTC"
    start_time: datetime | None = None
    end_time: datetime | None = None
    jitter: timedelta = timedelta(0)
    dst_gap: GapPolicy = GapPolicy.AUTO
    dst_fold: FoldPolicy = FoldPolicy.AUTO
    max_runs: int = 0
    more_specs: tuple[Spec, ...] = ()
    """The other specs of a list (after ``spec``)."""
    spec_list: bool = False
    """True when the schedule was given as a list (``Schedule.specs`` on the wire), even
    of one spec: it is stored and returned in that form."""
    calendars: tuple[str, ...] = ()
    """Names of the tenant calendars that filter the fire times (resolved at compile)."""

    @property
    def specs(self) -> tuple[Spec, ...]:
        """Every spec, the first one first."""
        return (self.spec, *self.more_specs)

    def spec_field(self, index: int) -> str:
        """The field path of spec ``index`` in errors: ``schedule.specs[1]`` for a list,
        ``schedule`` for the single-spec form."""
        return f"schedule.specs[{index}]" if self.spec_list else "schedule"


@dataclass(frozen=True, slots=True)
class FireTime:
    """One computed occurrence (or, in a preview, one occurrence a DST rule dropped).

    Attributes:
        at: The nominal instant in UTC: the run key's ``scheduled_at``.
        local: ``at`` in the schedule's zone (aware; ``fold`` set for a repeated time).
        wall: The naive wall-clock time the schedule named. It differs from ``local``
            only for a time moved out of a gap (``02:30`` named, ``03:00`` run).
        annotation: Set when a DST rule moved, dropped or disambiguated this time.
        note: Human text for ``annotation``, e.g. ``"02:30 does not exist on 2026-03-08
            in America/New_York (clocks jump from 02:00 to 03:00); moved to 03:00 EDT"``.
        dropped: True for a preview entry that is not a run (skipped or merged); never
            returned by ``next_fire``. For a dropped gap time ``at`` is the instant the
            clocks jump; for a dropped second occurrence it is that second instant.
        spec_index: Which spec of the schedule named this time (0 for a single spec;
            the lowest index when several name the same instant).
        calendar: For a preview entry a calendar removed (``dropped``): the calendar's
            name; ``note`` says why. Empty otherwise.
    """

    at: datetime
    local: datetime
    wall: datetime
    annotation: DstAnnotation | None = None
    note: str | None = None
    dropped: bool = False
    spec_index: int = 0
    calendar: str = ""
