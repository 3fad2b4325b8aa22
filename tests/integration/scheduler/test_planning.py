"""The dispatcher's planning shortcut answers exactly as the time-semantics library."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sundial.job import JobPolicies
from sundial.schedule import (
    Calendar,
    CalendarKind,
    CronSpec,
    IntervalSpec,
    MisfirePolicy,
    Schedule,
    compile_schedule,
    plan_misfire,
)
from sundial.scheduler.planning import plan_occurrences

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def test_shortcut_matches_plan_misfire() -> None:
    rng = random.Random(5)
    specs = [
        CronSpec("* * * * *"),
        CronSpec("*/5 * * * *"),
        CronSpec("0 * * * *"),
        IntervalSpec(timedelta(seconds=1)),
        IntervalSpec(timedelta(seconds=30)),
    ]
    for _ in range(2000):
        schedule = Schedule(
            rng.choice(specs),
            end_time=rng.choice([None, T0 + timedelta(seconds=rng.randint(-120, 7200))]),
            max_runs=rng.choice([0, 0, 1, 2, 5]),
        )
        compiled = compile_schedule(schedule, job_id="job")
        fire = compiled.next_fire(T0 - timedelta(seconds=rng.randint(0, 3600)))
        if fire is None:
            continue
        due = fire.at
        now = due + timedelta(seconds=rng.choice([0, 0.5, 1, 30, 59, 61, 600, 7200]))
        policies = JobPolicies(misfire=rng.choice(list(MisfirePolicy)))
        fired = rng.choice([0, 1, 4])
        expected = plan_misfire(
            compiled,
            due,
            now,
            policies.misfire,
            threshold=policies.misfire_threshold,
            catchup_window=policies.catchup_window,
            max_catchup=policies.max_catchup,
            fired_count=fired,
        )
        got = plan_occurrences(compiled, policies, due, now, fired)
        assert (got.run_now, got.next_due, got.skipped) == (
            expected.run_now,
            expected.next_due,
            expected.skipped,
        ), (schedule, due, now, fired)


def test_a_due_time_its_calendar_now_refuses_is_not_run() -> None:
    holidays = Calendar("holidays", CalendarKind.EXCLUDE, frozenset({datetime(2030, 1, 1).date()}))
    schedule = Schedule(CronSpec("0 * * * *"), calendars=("holidays",))
    compiled = compile_schedule(schedule, job_id="job", calendars={"holidays": holidays})
    policies = JobPolicies()
    # next_run_at stored before the calendar excluded the day: nothing runs, and the job
    # moves to the first allowed hour (still ahead).
    plan = plan_occurrences(compiled, policies, T0, T0, 0)
    assert (plan.run_now, plan.next_due) == ([], datetime(2030, 1, 2, tzinfo=UTC))
    # Found late, after the day: the first allowed hour is planned as the due one.
    late = datetime(2030, 1, 2, 0, 0, 30, tzinfo=UTC)
    plan = plan_occurrences(compiled, policies, T0, late, 0)
    assert plan.run_now == [datetime(2030, 1, 2, tzinfo=UTC)]
    assert plan.next_due == datetime(2030, 1, 2, 1, tzinfo=UTC)
