"""Misfire planning: what to run when a job is found due late.

The scheduler stores one instant per job, its next nominal time ``due``. When it claims
the job at ``now`` it asks :func:`plan_misfire` which occurrences to dispatch and what to
store next. The rules:

* An occurrence is *due* when its dispatch time (nominal plus jitter) is at or before
  ``now``; it is *missed* when that dispatch time is more than ``threshold`` before
  ``now``, else *on time*. On-time occurrences always run.
* ``RUN_ONCE``: if there is no on-time occurrence, one run for the latest missed one;
  if there is, that run already catches the job up and every missed one is skipped.
  Either way the job gets one run for the outage (Quartz's "fire once now").
* ``SKIP``: missed occurrences do not run.
* ``CATCH_UP``: missed occurrences whose nominal time is within ``catchup_window`` of
  ``now`` run, at most ``max_catchup`` of them: the most recent ones (like the window,
  the cap drops the oldest), dispatched oldest first.
* ``next_due`` is the first occurrence not yet due; None when the schedule is exhausted
  (including by ``max_runs``, which truncates ``run_now`` oldest first).

Counting every missed occurrence of a dense schedule after a long outage (an
every-second job down for a week) would cost a computation per occurrence, so after
:data:`SCAN_LIMIT` occurrences the walk jumps to the stretch before ``now`` that can
still matter; ``skipped`` is then a lower bound and ``skipped_exact`` is False.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sundial.core.errors import InvalidArgument

from ._compile import CompiledSchedule
from ._spec import MisfirePolicy

DEFAULT_MISFIRE_THRESHOLD = timedelta(seconds=60)
DEFAULT_CATCHUP_WINDOW = timedelta(days=1)
DEFAULT_MAX_CATCHUP = 100
SCAN_LIMIT = 10_000

_US = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class MisfirePlan:
    """The outcome of :func:`plan_misfire`.

    Attributes:
        run_now: Nominal instants (run keys) to dispatch now, oldest first.
        next_due: The nominal instant to store as the job's next due time, or None if
            the schedule is exhausted.
        skipped: Missed occurrences that will never run (for the job's stats).
        skipped_exact: False when ``skipped`` is a lower bound (see module doc).
        first_skipped: The nominal time of the earliest skipped occurrence (None when
            none was skipped).
        last_skipped: The nominal time of the latest skipped occurrence.
    """

    run_now: list[datetime] = field(default_factory=list)
    next_due: datetime | None = None
    skipped: int = 0
    skipped_exact: bool = True
    first_skipped: datetime | None = None
    last_skipped: datetime | None = None


def validate_misfire(
    policy: MisfirePolicy,
    threshold: timedelta,
    catchup_window: timedelta,
    max_catchup: int,
) -> None:
    """Raise :class:`InvalidArgument` naming the ``policies.*`` field that is invalid.

    Args:
        policy: The misfire policy (``policies.misfire``).
        threshold: Lateness tolerated before an occurrence counts as missed
            (``policies.misfire_threshold``, >= 0).
        catchup_window: How far back ``CATCH_UP`` reaches (``policies.catchup_window``,
            > 0).
        max_catchup: Most missed runs ``CATCH_UP`` dispatches (``policies.max_catchup``,
            >= 1).
    """
    if not isinstance(policy, MisfirePolicy):
        raise InvalidArgument("policies.misfire", f"unknown misfire policy {policy!r}")
    if not isinstance(threshold, timedelta) or threshold < timedelta(0):
        raise InvalidArgument("policies.misfire_threshold", "must be a non-negative duration")
    if not isinstance(catchup_window, timedelta) or catchup_window <= timedelta(0):
        raise InvalidArgument("policies.catchup_window", "must be a positive duration")
    if isinstance(max_catchup, bool) or not isinstance(max_catchup, int) or max_catchup < 1:
        raise InvalidArgument("policies.max_catchup", "must be an integer of at least 1")


def plan_misfire(
    compiled: CompiledSchedule,
    due: datetime,
    now: datetime,
    policy: MisfirePolicy = MisfirePolicy.RUN_ONCE,
    *,
    threshold: timedelta = DEFAULT_MISFIRE_THRESHOLD,
    catchup_window: timedelta = DEFAULT_CATCHUP_WINDOW,
    max_catchup: int = DEFAULT_MAX_CATCHUP,
    fired_count: int = 0,
) -> MisfirePlan:
    """Decide which occurrences from ``due`` up to ``now`` run, and the next due time.

    Args:
        compiled: The job's compiled schedule.
        due: The job's stored next nominal time (an occurrence of the schedule).
        now: The current instant.
        policy: What to do with missed occurrences.
        threshold: Lateness up to which an occurrence is on time.
        catchup_window: ``CATCH_UP`` only runs missed occurrences this recent.
        max_catchup: ``CATCH_UP`` runs at most this many missed occurrences.
        fired_count: Runs the job has had so far (for ``max_runs``).

    Returns:
        The plan. With ``due`` in the future: nothing to run, ``next_due == due``.

    Raises:
        InvalidArgument: A policy value is invalid (see :func:`validate_misfire`).
        ValueError: ``due`` or ``now`` is naive.
    """
    validate_misfire(policy, threshold, catchup_window, max_catchup)
    due, now = _utc(due, "due"), _utc(now, "now")
    remaining = compiled.remaining_runs(fired_count)
    if remaining == 0 or (compiled.end_time is not None and due > compiled.end_time):
        return MisfirePlan()
    if compiled.dispatch_at(due) > now:
        return MisfirePlan(next_due=due)

    keep = {MisfirePolicy.RUN_ONCE: 1, MisfirePolicy.SKIP: 0}.get(policy, max_catchup)
    recent: deque[datetime] = deque(maxlen=keep)
    # The first and last few missed occurrences: at most ``keep`` of them run, so the
    # earliest and latest skipped ones are among these (for the SLO's misfire record).
    head: list[datetime] = []
    tail: deque[datetime] = deque(maxlen=keep + 1)
    on_time: list[datetime] = []
    missed = 0
    exact = True
    window_start = now - catchup_window
    # Nominal times at or before this are missed whatever their jitter.
    surely_missed = now - threshold - compiled.jitter
    occurrence: datetime | None = due
    steps = 0
    while occurrence is not None:
        if compiled.dispatch_at(occurrence) > now:
            break
        if now - compiled.dispatch_at(occurrence) > threshold:
            missed += 1
            if len(head) <= keep:
                head.append(occurrence)
            tail.append(occurrence)
            if policy is MisfirePolicy.RUN_ONCE or (
                policy is MisfirePolicy.CATCH_UP and occurrence >= window_start
            ):
                recent.append(occurrence)
        else:
            on_time.append(occurrence)
        steps += 1
        fire = compiled.next_fire(occurrence)
        following = fire.at if fire is not None else None
        if steps >= SCAN_LIMIT and following is not None and following < surely_missed:
            lower = (
                max(occurrence, window_start) if policy is MisfirePolicy.CATCH_UP else occurrence
            )
            jump = _tail_start(compiled, lower, surely_missed, keep, (occurrence - due) / steps)
            if jump > occurrence:
                exact = False
                fire = compiled.next_fire(jump)
                following = fire.at if fire is not None else None
            steps = 0
        occurrence = following

    if policy is MisfirePolicy.CATCH_UP:
        caught_up = list(recent)
    elif policy is MisfirePolicy.RUN_ONCE and not on_time and recent:
        caught_up = [recent[-1]]
    else:
        caught_up = []
    run_now = caught_up + on_time
    next_due = occurrence
    if remaining is not None and len(run_now) >= remaining:
        run_now = run_now[:remaining]
        next_due = None
    caught_set = set(caught_up)
    ran_missed = sum(1 for at in run_now if at in caught_set)
    ran = set(run_now)
    first = next((at for at in head if at not in ran), None)
    last = next((at for at in reversed(tail) if at not in ran), None)
    return MisfirePlan(
        run_now=run_now,
        next_due=next_due,
        skipped=missed - ran_missed,
        skipped_exact=exact,
        first_skipped=first,
        last_skipped=last,
    )


def _tail_start(
    compiled: CompiledSchedule,
    lower: datetime,
    upper: datetime,
    keep: int,
    spacing: timedelta,
) -> datetime:
    """Return an instant in ``[lower, upper)`` with at least ``keep`` occurrences after it.

    Looks back from ``upper`` by a growing span (starting from ``keep + 1`` times the
    average spacing seen so far) until the span holds ``keep`` occurrences or reaches
    ``lower``. The walk resumes strictly after the returned instant.
    """
    lookback = max(spacing, _US) * (keep + 1) * 2
    while True:
        start = max(upper - lookback, lower)
        if start <= lower or keep == 0:
            return start
        count = 0
        fire = compiled.next_fire(start)
        while fire is not None and fire.at <= upper and count < keep:
            count += 1
            fire = compiled.next_fire(fire.at)
        if count >= keep:
            return start
        lookback *= 4


def _utc(value: datetime, name: str) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware")
    return value.astimezone(UTC)
