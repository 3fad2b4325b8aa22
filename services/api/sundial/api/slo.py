"""A job's SLO: did its schedule run on time (docs/design.md section 11).

Derived when asked, never maintained: the store counts the job's scheduled runs per
window in SQL, bounding each run's due time by ``[scheduled_at, scheduled_at + jitter
bound)``; the few runs that started (or still wait) inside that band are decided here
with their own jitter; skipped misfires come from their records (``job_misfires``,
written by the dispatcher only when it skips). So the dispatch, lease and completion
paths write nothing for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from sundial.api.model import MisfireRecord, Slo, SloRunCounts, SloUnsure
from sundial.core.errors import InvalidArgument
from sundial.schedule import CompiledSchedule

DEFAULT_WINDOWS = (timedelta(hours=1), timedelta(hours=24), timedelta(days=7))
"""DescribeJob's SLO windows when the request names none."""

MIN_WINDOW = timedelta(minutes=1)
MAX_WINDOW = timedelta(days=90)
MAX_WINDOWS = 4


def check_windows(windows: Sequence[timedelta]) -> tuple[timedelta, ...]:
    """The requested windows, or the defaults when none.

    Raises:
        InvalidArgument: Naming ``slo_windows`` or ``slo_windows[i]``.
    """
    if not windows:
        return DEFAULT_WINDOWS
    if len(windows) > MAX_WINDOWS:
        raise InvalidArgument("slo_windows", f"at most {MAX_WINDOWS} windows, got {len(windows)}")
    seen: set[timedelta] = set()
    for i, window in enumerate(windows):
        field = f"slo_windows[{i}]"
        if window % timedelta(seconds=1):
            raise InvalidArgument(field, "must be whole seconds")
        if not MIN_WINDOW <= window <= MAX_WINDOW:
            raise InvalidArgument(field, "must be 1 min to 90 days")
        if window in seen:
            raise InvalidArgument(field, "repeats an earlier window")
        seen.add(window)
    return tuple(windows)


def missed_since(record: MisfireRecord, start: datetime) -> int:
    """How many of a record's skipped occurrences are nominally at or after ``start``.

    A record keeps only its span and count, so one that starts before ``start`` is
    counted as if its occurrences were evenly spaced over the span (exact for interval
    schedules; a cron's occurrences are only nearly so).
    """
    if record.first_at >= start:
        return record.skipped
    if record.last_at < start:
        return 0
    step = (record.last_at - record.first_at) / (record.skipped - 1)
    before = math.ceil((start - record.first_at) / step)  # occurrences earlier than start
    return max(0, record.skipped - before)


def summarise(
    windows: Sequence[timedelta],
    now: datetime,
    threshold: timedelta,
    compiled: CompiledSchedule,
    *,
    counts: Sequence[SloRunCounts],
    unsure: Sequence[SloUnsure],
    misfires: Sequence[MisfireRecord],
) -> list[Slo]:
    """Each window's SLO from the store's counts (``counts[i]`` for ``windows[i]``)."""
    out = []
    for window, c in zip(windows, counts, strict=True):
        start = now - window
        on_time, late, throttled = c.on_time, c.late, c.throttled
        for run in unsure:
            if run.scheduled_at < start:
                continue
            lateness = (run.started_at or now) - compiled.dispatch_at(run.scheduled_at)
            if lateness > threshold and run.throttled and run.started_at is not None:
                throttled += 1
            elif lateness > threshold:
                late += 1
            elif run.started_at is not None:
                on_time += 1
        missed = sum(missed_since(m, start) for m in misfires)
        out.append(
            Slo(
                window=window,
                window_start=start,
                as_of=now,
                lateness_threshold=threshold,
                due=c.runs + missed,
                on_time=on_time,
                late=late,
                missed=missed,
                skipped=c.skipped,
                failed=c.failed,
                throttled=throttled,
            )
        )
    return out
