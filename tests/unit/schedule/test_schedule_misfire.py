"""Misfire planning and deterministic jitter."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from sundial.core.errors import InvalidArgument
from sundial.schedule import (
    CronSpec,
    IntervalSpec,
    MisfirePolicy,
    Schedule,
    compile_schedule,
    jitter_offset,
    load_zone,
    plan_misfire,
)

pytestmark = pytest.mark.timeout(120)

H = timedelta(hours=1)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _hourly(**kw: object) -> object:
    return compile_schedule(Schedule(CronSpec("0 * * * *"), **kw), job_id="job")  # type: ignore[arg-type]


def _hm(values: list[datetime]) -> list[str]:
    return [v.strftime("%H:%M:%S") for v in values]


# -- the outage from the issue -------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "run_now", "skipped"),
    [
        (MisfirePolicy.RUN_ONCE, ["12:00:00"], 2),
        (MisfirePolicy.SKIP, [], 3),
        (MisfirePolicy.CATCH_UP, ["10:00:00", "11:00:00", "12:00:00"], 0),
    ],
)
def test_hourly_job_after_three_hour_outage(
    policy: MisfirePolicy, run_now: list[str], skipped: int
) -> None:
    # Due at 10:00, scheduler back at 12:30: 10:00, 11:00 and 12:00 were missed.
    plan = plan_misfire(_hourly(), _utc("2026-05-01T10:00"), _utc("2026-05-01T12:30"), policy)
    assert _hm(plan.run_now) == run_now
    assert plan.next_due == _utc("2026-05-01T13:00")
    assert plan.skipped == skipped
    assert plan.skipped_exact


@pytest.mark.parametrize(
    ("policy", "run_now", "skipped"),
    [
        # 13:00 is 30 s late: on time. It is the one run RUN_ONCE grants the outage.
        (MisfirePolicy.RUN_ONCE, ["13:00:00"], 3),
        (MisfirePolicy.SKIP, ["13:00:00"], 3),
        (MisfirePolicy.CATCH_UP, ["10:00:00", "11:00:00", "12:00:00", "13:00:00"], 0),
    ],
)
def test_outage_ending_just_after_a_slot(
    policy: MisfirePolicy, run_now: list[str], skipped: int
) -> None:
    plan = plan_misfire(_hourly(), _utc("2026-05-01T10:00"), _utc("2026-05-01T13:00:30"), policy)
    assert _hm(plan.run_now) == run_now
    assert plan.next_due == _utc("2026-05-01T14:00")
    assert plan.skipped == skipped


@pytest.mark.parametrize(
    ("policy", "now", "max_catchup", "span"),
    [
        # RUN_ONCE runs 12:00 (the latest missed): 10:00 and 11:00 are skipped.
        (MisfirePolicy.RUN_ONCE, "12:30", 100, ("10:00:00", "11:00:00")),
        # 13:00 is on time and RUN_ONCE runs it: every missed one is skipped.
        (MisfirePolicy.RUN_ONCE, "13:00:30", 100, ("10:00:00", "12:00:00")),
        (MisfirePolicy.SKIP, "12:30", 100, ("10:00:00", "12:00:00")),
        # CATCH_UP keeps the 2 most recent: 10:00 and 11:00 are skipped.
        (MisfirePolicy.CATCH_UP, "13:30", 2, ("10:00:00", "11:00:00")),
        (MisfirePolicy.CATCH_UP, "12:30", 100, None),
    ],
)
def test_the_skipped_span_is_recorded(
    policy: MisfirePolicy, now: str, max_catchup: int, span: tuple[str, str] | None
) -> None:
    # The SLO's misfire record (job_misfires): the nominal times of the first and the
    # last skipped occurrence; the skipped ones are consecutive.
    plan = plan_misfire(
        _hourly(),
        _utc("2026-05-01T10:00"),
        _utc(f"2026-05-01T{now}"),
        policy,
        max_catchup=max_catchup,
    )
    if span is None:
        assert plan.skipped == 0 and plan.first_skipped is None and plan.last_skipped is None
        return
    assert plan.first_skipped is not None and plan.last_skipped is not None
    assert (_hm([plan.first_skipped])[0], _hm([plan.last_skipped])[0]) == span
    assert not set(plan.run_now) & {plan.first_skipped, plan.last_skipped}


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_within_threshold_is_not_a_misfire(policy: MisfirePolicy) -> None:
    compiled = _hourly()
    due = _utc("2026-05-01T10:00")
    for late in (timedelta(0), timedelta(seconds=30), timedelta(seconds=60)):
        plan = plan_misfire(compiled, due, due + late, policy)
        assert plan.run_now == [due] and plan.skipped == 0
        assert plan.next_due == _utc("2026-05-01T11:00")
    plan = plan_misfire(compiled, due, due + timedelta(seconds=61), policy)
    expected = [] if policy is MisfirePolicy.SKIP else [due]
    assert plan.run_now == expected


def test_custom_threshold() -> None:
    due = _utc("2026-05-01T10:00")
    now = due + timedelta(minutes=5)
    plan = plan_misfire(_hourly(), due, now, MisfirePolicy.SKIP, threshold=timedelta(minutes=10))
    assert plan.run_now == [due]
    plan = plan_misfire(_hourly(), due, now, MisfirePolicy.SKIP, threshold=timedelta(0))
    assert plan.run_now == [] and plan.skipped == 1


def test_not_yet_due() -> None:
    due = _utc("2026-05-01T10:00")
    plan = plan_misfire(_hourly(), due, due - timedelta(seconds=1), MisfirePolicy.CATCH_UP)
    assert plan.run_now == [] and plan.next_due == due and plan.skipped == 0


def test_catch_up_window_and_cap() -> None:
    due, now = _utc("2026-05-01T10:00"), _utc("2026-05-01T14:30")  # 10..14 missed
    plan = plan_misfire(
        _hourly(), due, now, MisfirePolicy.CATCH_UP, catchup_window=timedelta(hours=2)
    )
    assert _hm(plan.run_now) == ["13:00:00", "14:00:00"]  # 12:30 or later
    assert plan.skipped == 3
    plan = plan_misfire(_hourly(), due, now, MisfirePolicy.CATCH_UP, max_catchup=2)
    assert _hm(plan.run_now) == ["13:00:00", "14:00:00"]  # the most recent, oldest first
    assert plan.skipped == 3


def test_max_runs_truncates_and_ends() -> None:
    compiled = _hourly(max_runs=3)
    due, now = _utc("2026-05-01T10:00"), _utc("2026-05-01T12:30")
    plan = plan_misfire(compiled, due, now, MisfirePolicy.CATCH_UP, fired_count=1)
    assert _hm(plan.run_now) == ["10:00:00", "11:00:00"]
    assert plan.next_due is None
    assert plan.skipped == 1
    plan = plan_misfire(compiled, due, now, MisfirePolicy.CATCH_UP, fired_count=3)
    assert plan.run_now == [] and plan.next_due is None


def test_end_time_bounds_the_plan() -> None:
    compiled = _hourly(end_time=_utc("2026-05-01T11:00"))
    plan = plan_misfire(
        compiled, _utc("2026-05-01T10:00"), _utc("2026-05-01T12:30"), MisfirePolicy.CATCH_UP
    )
    assert _hm(plan.run_now) == ["10:00:00", "11:00:00"]
    assert plan.next_due is None


def test_interval_job_misfire() -> None:
    compiled = compile_schedule(Schedule(IntervalSpec(timedelta(minutes=20))), job_id="job")
    plan = plan_misfire(
        compiled, _utc("2026-05-01T10:00"), _utc("2026-05-01T11:05"), MisfirePolicy.CATCH_UP
    )
    assert _hm(plan.run_now) == ["10:00:00", "10:20:00", "10:40:00", "11:00:00"]
    assert plan.next_due == _utc("2026-05-01T11:20")


def test_dense_backlog_is_bounded() -> None:
    # An every-second job down for two days: 172,800 missed occurrences.
    compiled = compile_schedule(Schedule(CronSpec("* * * * * *")), job_id="job")
    due, now = _utc("2026-05-01T00:00"), _utc("2026-05-03T00:00")
    started = time.monotonic()
    plan = plan_misfire(compiled, due, now, MisfirePolicy.CATCH_UP, max_catchup=5)
    assert time.monotonic() - started < 20
    on_time = [now - timedelta(seconds=s) for s in range(60, -1, -1)]  # <= 60 s late
    caught_up = [now - timedelta(seconds=s) for s in range(65, 60, -1)]
    assert plan.run_now == caught_up + on_time
    assert plan.next_due == now + timedelta(seconds=1)
    assert not plan.skipped_exact and plan.skipped >= 10_000
    plan = plan_misfire(compiled, due, now, MisfirePolicy.SKIP)
    assert plan.run_now == on_time
    # An hourly-in-a-minute pattern: sparse and dense stretches.
    sparse = compile_schedule(Schedule(CronSpec("* 9 * * *")), job_id="job")
    plan = plan_misfire(
        sparse, _utc("2025-01-01T09:00"), _utc("2026-05-03T12:00"), MisfirePolicy.RUN_ONCE
    )
    assert plan.run_now == [_utc("2026-05-03T09:59")]
    assert plan.next_due == _utc("2026-05-04T09:00")


def test_jitter_decides_when_an_occurrence_is_due() -> None:
    compiled = _hourly(jitter=timedelta(minutes=30))
    due = _utc("2026-05-01T10:00")
    dispatch = compiled.dispatch_at(due)
    assert due <= dispatch < due + timedelta(minutes=30)
    before = plan_misfire(compiled, due, dispatch - timedelta(microseconds=1))
    assert before.run_now == [] and before.next_due == due
    at = plan_misfire(compiled, due, dispatch)
    assert at.run_now == [due] and at.skipped == 0  # not late relative to its dispatch


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"threshold": timedelta(seconds=-1)}, "policies.misfire_threshold"),
        ({"catchup_window": timedelta(0)}, "policies.catchup_window"),
        ({"max_catchup": 0}, "policies.max_catchup"),
        ({"policy": "CATCH_UP"}, "policies.misfire"),
    ],
)
def test_invalid_policy_values(kwargs: dict, field: str) -> None:
    args = {"policy": MisfirePolicy.CATCH_UP, **kwargs}
    with pytest.raises(InvalidArgument) as info:
        plan_misfire(_hourly(), _utc("2026-05-01T10:00"), _utc("2026-05-01T12:00"), **args)
    assert info.value.field == field
    assert str(info.value).startswith(field + ": ")


# -- jitter -------------------------------------------------------------------------------


def test_jitter_is_deterministic_and_bounded() -> None:
    bound = timedelta(minutes=5)
    nominal = _utc("2026-05-01T10:00")
    offsets = [jitter_offset(f"job-{i}", nominal, bound) for i in range(2000)]
    assert offsets == [jitter_offset(f"job-{i}", nominal, bound) for i in range(2000)]
    assert all(timedelta(0) <= o < bound for o in offsets)
    # Spread: every 30 s bucket of the 5 minutes is used.
    assert len({o // timedelta(seconds=30) for o in offsets}) == 10
    # Depends on the nominal time too.
    assert jitter_offset("job-1", nominal, bound) != jitter_offset("job-1", nominal + H, bound)
    # The same instant in another zone is the same nominal time.
    other = nominal.astimezone(timezone_of("Asia/Tokyo"))
    assert jitter_offset("job-1", other, bound) == jitter_offset("job-1", nominal, bound)


def timezone_of(name: str) -> object:
    return load_zone(name)


def test_jitter_edge_cases() -> None:
    nominal = _utc("2026-05-01T10:00")
    assert jitter_offset("job", nominal, timedelta(0)) == timedelta(0)
    assert jitter_offset("job", nominal, timedelta(seconds=-5)) == timedelta(0)
    assert jitter_offset("job", nominal, timedelta(microseconds=1)) == timedelta(0)
    with pytest.raises(ValueError, match="aware"):
        jitter_offset("job", datetime(2026, 5, 1), timedelta(seconds=1))


def test_jitter_is_pinned_and_process_independent() -> None:
    # Golden value: changing it moves every jittered dispatch (a migration, not a refactor).
    expected = jitter_offset("job-42", _utc("2026-05-01T10:00"), timedelta(minutes=10))
    code = (
        "from datetime import datetime, timedelta, UTC\n"
        "from sundial.schedule import jitter_offset\n"
        "n = datetime(2026, 5, 1, 10, tzinfo=UTC)\n"
        "print(jitter_offset('job-42', n, timedelta(minutes=10)) // timedelta(microseconds=1))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="999", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert int(out.stdout) == expected // timedelta(microseconds=1) == GOLDEN_JITTER_US


GOLDEN_JITTER_US = 456_502_223
