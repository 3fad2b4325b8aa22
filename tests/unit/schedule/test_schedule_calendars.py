"""Several specs per schedule (a union of fire times) and calendars (by local date).

The oracles are independent of the implementation's merge and skip logic: the union is
the sorted set of each single-spec schedule's fire times, and a calendar's effect is
that sequence filtered by the local date of each fire time.
"""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sundial.core.errors import InvalidArgument
from sundial.schedule import (
    MAX_SEARCH_STEPS,
    Calendar,
    CalendarKind,
    CronSpec,
    IntervalSpec,
    OnceSpec,
    Schedule,
    SearchExceeded,
    Spec,
    compile_schedule,
    parse_calendar_dates,
)

pytestmark = pytest.mark.timeout(120)

SETTINGS = settings(
    max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
ZONES = [
    "UTC",
    "Australia/Sydney",  # DST from the first Sunday of October to the first of April
    "Pacific/Auckland",
    "America/New_York",
    "Europe/Berlin",
    "America/Santiago",  # DST changes at local midnight
    "Asia/Kolkata",
]
CRONS = ["0 9 * * *", "30 2 * * *", "0 * * * *", "*/20 1-3 * * *", "0 0 * * 1-5", "15 9 1 * *"]


def _fires(compiled: object, start: datetime, end: datetime) -> list[object]:
    out = []
    cursor = start
    while True:
        fire = compiled.next_fire(cursor)  # type: ignore[attr-defined]
        if fire is None or fire.at > end:
            return out
        out.append(fire)
        cursor = fire.at


def _excluding(name: str, *days: str) -> Calendar:
    dates, yearly = parse_calendar_dates(days, "dates")
    return Calendar(name, CalendarKind.EXCLUDE, dates, yearly)


def _including(name: str, *days: str) -> Calendar:
    dates, yearly = parse_calendar_dates(days, "dates")
    return Calendar(name, CalendarKind.INCLUDE, dates, yearly)


def test_excluding_25_december_removes_exactly_that_local_days_runs_in_sydney() -> None:
    # Hourly plus 02:30 daily in Sydney, from September to May: across the start of
    # summer time (2026-10-04, when 02:30 does not exist and moves to 03:00) and its end
    # (2027-04-04). 25 December is in summer time (UTC+11): its local day is
    # 2026-12-24T13:00Z to 2026-12-25T13:00Z, not the UTC day.
    holidays = _excluding("holidays", "12-25")
    specs = (IntervalSpec(timedelta(hours=1)), CronSpec("30 2 * * *"))
    plain = Schedule(specs[0], more_specs=specs[1:], spec_list=True, time_zone="Australia/Sydney")
    with_cal = Schedule(
        specs[0],
        more_specs=specs[1:],
        spec_list=True,
        time_zone="Australia/Sydney",
        calendars=("holidays",),
    )
    start, end = datetime(2026, 9, 1, tzinfo=UTC), datetime(2027, 5, 1, tzinfo=UTC)
    every = _fires(compile_schedule(plain, job_id="j"), start, end)
    kept = _fires(
        compile_schedule(with_cal, job_id="j", calendars={"holidays": holidays}), start, end
    )
    removed = sorted({f.at for f in every} - {f.at for f in kept})  # type: ignore[attr-defined]
    day_start = datetime(2026, 12, 24, 13, tzinfo=UTC)
    assert removed == sorted(
        [day_start + timedelta(hours=h) for h in range(24)]
        + [day_start + timedelta(hours=2, minutes=30)]
    )
    assert {f.at for f in kept} <= {f.at for f in every}  # type: ignore[attr-defined]
    # The DST days kept their runs: the 23-hour day's 02:30 moves to 03:00, an instant
    # the hourly spec names, so the two are one run; the 25-hour day runs 02:30 once.
    kept_days = [f.local.date() for f in kept]  # type: ignore[attr-defined]
    assert kept_days.count(date(2026, 10, 4)) == 23
    assert kept_days.count(date(2027, 4, 4)) == 25 + 1


@pytest.mark.parametrize(
    ("zone", "day", "hours"),
    [
        ("Australia/Sydney", "2026-10-04", 23),  # spring forward: a 23-hour local day
        ("Australia/Sydney", "2027-04-04", 25),  # fall back: 25 hours
        ("America/Santiago", "2026-09-06", 23),  # the jump is at local midnight
        ("Europe/Berlin", "2026-10-25", 25),
    ],
)
def test_a_dst_day_excluded_removes_exactly_its_hours(zone: str, day: str, hours: int) -> None:
    excluded = _excluding("x", day)
    hourly = Schedule(IntervalSpec(timedelta(hours=1)), time_zone=zone, calendars=("x",))
    compiled = compile_schedule(hourly, job_id="j", calendars={"x": excluded})
    plain = compile_schedule(Schedule(IntervalSpec(timedelta(hours=1)), time_zone=zone), job_id="j")
    d = date.fromisoformat(day)
    start = datetime.combine(d - timedelta(days=2), datetime.min.time(), tzinfo=UTC)
    end = start + timedelta(days=5)
    every = _fires(plain, start, end)
    kept = {f.at for f in _fires(compiled, start, end)}  # type: ignore[attr-defined]
    removed = [f for f in every if f.at not in kept]  # type: ignore[attr-defined]
    assert len(removed) == hours
    assert all(f.local.date() == d for f in removed)  # type: ignore[attr-defined]
    assert all(f.local.date() != d for f in every if f.at in kept)  # type: ignore[attr-defined]


def test_a_shifted_gap_time_on_an_excluded_day_is_removed() -> None:
    # 02:30 does not exist on 2026-10-04 in Sydney; AUTO shifts it to 03:00 AEDT, which
    # is still that local day, so excluding the day removes it.
    daily = Schedule(CronSpec("30 2 * * *"), time_zone="Australia/Sydney", calendars=("x",))
    compiled = compile_schedule(daily, job_id="j", calendars={"x": _excluding("x", "2026-10-04")})
    fire = compiled.next_fire(datetime(2026, 10, 2, 17, tzinfo=UTC))
    assert fire is not None
    assert fire.local.date() == date(2026, 10, 5)
    entries = compiled.preview(datetime(2026, 10, 2, 17, tzinfo=UTC), 1)
    [removed] = [e for e in entries if e.calendar]
    assert removed.dropped and removed.local.date() == date(2026, 10, 4)
    assert removed.note is not None
    assert "does not exist" in removed.note and "excluded by calendar x" in removed.note


def test_include_calendar_fires_only_on_its_dates_and_then_ends() -> None:
    only = _including("paydays", "2026-01-30", "2026-02-27", "2026-03-31")
    schedule = Schedule(CronSpec("0 9 * * *"), time_zone="Europe/Berlin", calendars=("paydays",))
    compiled = compile_schedule(schedule, job_id="j", calendars={"paydays": only})
    fires = _fires(compiled, datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert [f.local.date() for f in fires] == sorted(only.dates)  # type: ignore[attr-defined]
    assert compiled.next_fire(datetime(2026, 4, 1, tzinfo=UTC)) is None


def test_yearly_include_jumps_whole_years() -> None:
    leap = _including("leap-day", "02-29")
    schedule = Schedule(CronSpec("0 12 * * *"), calendars=("leap-day",))
    compiled = compile_schedule(schedule, job_id="j", calendars={"leap-day": leap})
    fires = _fires(compiled, datetime(2025, 1, 1, tzinfo=UTC), datetime(2037, 1, 1, tzinfo=UTC))
    assert [f.at for f in fires] == [  # type: ignore[attr-defined]
        datetime(y, 2, 29, 12, tzinfo=UTC) for y in (2028, 2032, 2036)
    ]


def test_a_calendar_that_refuses_every_day_is_refused_after_a_bounded_search() -> None:
    every_day = [f"{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 32)]
    valid = [t for t in every_day if _valid_month_day(t)]
    schedule = Schedule(IntervalSpec(timedelta(minutes=1)), calendars=("all",))
    compiled = compile_schedule(schedule, job_id="j", calendars={"all": _excluding("all", *valid)})
    with pytest.raises(SearchExceeded) as refused:
        compiled.next_fire(datetime(2026, 1, 1, tzinfo=UTC))
    assert refused.value.field == "schedule"
    assert "from 2026-01-01 to 2031-01-02" in refused.value.problem
    # Refused days are skipped by date, not searched one by one.
    assert refused.value.steps <= 4


def test_sixteen_specs_against_a_calendar_refusing_every_day_stay_within_the_budget() -> None:
    every_day = [f"{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 32)]
    calendar = _excluding("all", *[t for t in every_day if _valid_month_day(t)])
    specs = [CronSpec(f"{i} {i} * * *") for i in range(16)]
    schedule = Schedule(specs[0], more_specs=tuple(specs[1:]), spec_list=True, calendars=("all",))
    compiled = compile_schedule(schedule, job_id="j", calendars={"all": calendar})
    with pytest.raises(SearchExceeded) as refused:
        compiled.next_fire(datetime(2026, 1, 1, tzinfo=UTC))
    assert refused.value.steps <= MAX_SEARCH_STEPS
    # A preview stops at its budget and returns what it found (removed occurrences).
    entries = compiled.preview(datetime(2026, 1, 1, tzinfo=UTC), 1000)
    assert entries and all(e.dropped for e in entries)


def test_a_refused_stretch_shorter_than_the_horizon_is_crossed() -> None:
    # Every date of 2026-2029 excluded: the first fire time is on 2030-01-01.
    days = [
        date(2026, 1, 1) + timedelta(days=i)
        for i in range((date(2030, 1, 1) - date(2026, 1, 1)).days)
    ]
    calendar = Calendar("long", CalendarKind.EXCLUDE, dates=frozenset(days))
    schedule = Schedule(CronSpec("0 9 * * *"), calendars=("long",))
    compiled = compile_schedule(schedule, job_id="j", calendars={"long": calendar})
    fire = compiled.next_fire(datetime(2026, 1, 1, tzinfo=UTC))
    assert fire is not None and fire.at == datetime(2030, 1, 1, 9, tzinfo=UTC)


def _valid_month_day(text: str) -> bool:
    try:
        date(2000, int(text[:2]), int(text[3:]))
    except ValueError:
        return False
    return True


def test_exclude_wins_over_include_and_preview_names_the_calendar() -> None:
    cals = {
        "work": _including("work", "2026-05-04", "2026-05-05", "2026-05-06"),
        "off": _excluding("off", "2026-05-05"),
    }
    schedule = Schedule(
        CronSpec("0 10 * * *"),
        more_specs=(CronSpec("0 15 * * *"),),
        spec_list=True,
        calendars=("work", "off"),
    )
    compiled = compile_schedule(schedule, job_id="j", calendars=cals)
    entries = compiled.preview(datetime(2026, 5, 3, tzinfo=UTC), 4)
    fired = [(e.at, e.spec_index) for e in entries if not e.dropped]
    assert fired == [
        (datetime(2026, 5, 4, 10, tzinfo=UTC), 0),
        (datetime(2026, 5, 4, 15, tzinfo=UTC), 1),
        (datetime(2026, 5, 6, 10, tzinfo=UTC), 0),
        (datetime(2026, 5, 6, 15, tzinfo=UTC), 1),
    ]
    removed = [(e.at, e.calendar, e.spec_index) for e in entries if e.dropped]
    assert removed == [
        (datetime(2026, 5, 3, 10, tzinfo=UTC), "work", 0),
        (datetime(2026, 5, 3, 15, tzinfo=UTC), "work", 1),
        (datetime(2026, 5, 5, 10, tzinfo=UTC), "off", 0),
        (datetime(2026, 5, 5, 15, tzinfo=UTC), "off", 1),
    ]
    notes = [e.note for e in entries if e.dropped]
    assert notes[0] == "2026-05-03 is not in include calendar work"
    assert notes[2] == "2026-05-05 is excluded by calendar off"


def test_preview_of_a_dense_spec_reports_at_most_100_removals_a_day() -> None:
    schedule = Schedule(IntervalSpec(timedelta(seconds=10)), calendars=("x",))
    compiled = compile_schedule(
        schedule, job_id="j", calendars={"x": _excluding("x", "2026-01-02")}
    )
    entries = compiled.preview(datetime(2026, 1, 1, 23, 59, 50, tzinfo=UTC), 2)
    assert sum(e.dropped for e in entries) == 100
    assert [e.at for e in entries if not e.dropped] == [
        datetime(2026, 1, 3, tzinfo=UTC),
        datetime(2026, 1, 3, 0, 0, 10, tzinfo=UTC),
    ]


# --- unions -------------------------------------------------------------------------------

specs_strategy = st.lists(
    st.one_of(
        st.sampled_from(CRONS).map(CronSpec),
        st.builds(
            lambda every, phase: IntervalSpec(
                timedelta(minutes=every), timedelta(minutes=phase % every)
            ),
            st.sampled_from([7, 20, 30, 60, 90, 1440]),
            st.integers(0, 1439),
        ),
    ),
    min_size=2,
    max_size=4,
)


@SETTINGS
@given(
    specs=specs_strategy,
    zone=st.sampled_from(ZONES),
    start_day=st.integers(0, 365),
    excluded=st.sets(st.integers(0, 9), max_size=4),
    included=st.sets(st.integers(0, 9), max_size=6),
)
def test_union_is_the_sorted_set_of_each_specs_times_filtered_by_calendar(
    specs: list[Spec],
    zone: str,
    start_day: int,
    excluded: set[int],
    included: set[int],
) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=start_day)
    end = start + timedelta(days=8)
    # Oracle: each spec alone, merged as a set; the first spec naming an instant owns it.
    owner: dict[datetime, int] = {}
    local_day: dict[datetime, date] = {}
    for index, spec in enumerate(specs):
        alone = compile_schedule(Schedule(spec, time_zone=zone), job_id="j")
        for fire in _fires(alone, start, end):
            owner.setdefault(fire.at, index)  # type: ignore[attr-defined]
            local_day[fire.at] = fire.local.date()  # type: ignore[attr-defined]
    first_day = start.date()
    excluded_days = {first_day + timedelta(days=d) for d in excluded}
    included_days = {first_day + timedelta(days=d) for d in included}
    calendars = {
        "off": Calendar("off", CalendarKind.EXCLUDE, frozenset(excluded_days)),
        "on": Calendar("on", CalendarKind.INCLUDE, frozenset(included_days)),
    }
    names = ("off", "on") if included else ("off",)
    union = Schedule(
        specs[0], more_specs=tuple(specs[1:]), spec_list=True, time_zone=zone, calendars=names
    )
    compiled = compile_schedule(union, job_id="j", calendars=calendars)
    got = _fires(compiled, start, end)
    instants = [f.at for f in got]  # type: ignore[attr-defined]
    assert all(a < b for a, b in itertools.pairwise(instants))  # strictly increasing
    expected = sorted(
        at
        for at, day in local_day.items()
        if day not in excluded_days and (not included or day in included_days)
    )
    assert instants == expected
    assert [f.spec_index for f in got] == [owner[at] for at in instants]  # type: ignore[attr-defined]
    # Stateless: recomputing from any fire time continues the same sequence.
    for i, fire in enumerate(got[:-1]):
        again = compiled.next_fire(fire.at)  # type: ignore[attr-defined]
        assert again is not None and again.at == instants[i + 1]
    # The preview lists the same fire times, each removed occurrence marked with why.
    entries = compiled.preview(start, len(instants) + 1)
    listed = [e.at for e in entries if not e.dropped and e.at <= end]
    assert listed == instants
    for e in entries:
        if e.calendar and e.at <= end:
            assert e.dropped and e.local.date() not in (included_days - excluded_days)


def test_two_specs_naming_the_same_instant_fire_once() -> None:
    # 09:00 every day by cron, and every 3 h by interval (00, 03, 06, 09, ... UTC).
    schedule = Schedule(
        CronSpec("0 9 * * *"), more_specs=(IntervalSpec(timedelta(hours=3)),), spec_list=True
    )
    compiled = compile_schedule(schedule, job_id="j")
    fires = _fires(compiled, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 23, tzinfo=UTC))
    assert [(f.at.hour, f.spec_index) for f in fires] == [  # type: ignore[attr-defined]
        (3, 1),
        (6, 1),
        (9, 0),
        (12, 1),
        (15, 1),
        (18, 1),
        (21, 1),
    ]


def test_max_runs_and_end_time_bound_the_union() -> None:
    schedule = Schedule(
        CronSpec("0 9 * * *"),
        more_specs=(CronSpec("0 18 * * *"), OnceSpec(datetime(2026, 1, 1, 12, tzinfo=UTC))),
        spec_list=True,
        max_runs=4,
    )
    compiled = compile_schedule(schedule, job_id="j")
    entries = compiled.preview(datetime(2026, 1, 1, tzinfo=UTC), 10)
    assert [(e.at.day, e.at.hour, e.spec_index) for e in entries] == [
        (1, 9, 0),
        (1, 12, 2),
        (1, 18, 1),
        (2, 9, 0),
    ]
    assert compiled.next_fire(datetime(2026, 1, 1, tzinfo=UTC), fired_count=4) is None


def test_h_is_hashed_per_job_alike_in_every_spec() -> None:
    schedule = Schedule(CronSpec("H 9 * * *"), more_specs=(CronSpec("H 9 * * *"),), spec_list=True)
    a = compile_schedule(schedule, job_id="job-a")
    fires = _fires(a, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 3, tzinfo=UTC))
    assert len(fires) == 2  # the two specs hash to the same minute: one run a day


# --- validation ---------------------------------------------------------------------------


def _field(schedule: Schedule, calendars: dict[str, Calendar] | None = None) -> str:
    with pytest.raises(InvalidArgument) as error:
        compile_schedule(schedule, job_id="j", calendars=calendars)
    return error.value.field


def test_errors_name_the_spec_and_the_calendar_reference() -> None:
    listed = Schedule(CronSpec("0 9 * * *"), more_specs=(CronSpec("0 25 * * *"),), spec_list=True)
    assert _field(listed) == "schedule.specs[1].cron"
    bad_interval = Schedule(
        CronSpec("0 9 * * *"), more_specs=(IntervalSpec(timedelta(0)),), spec_list=True
    )
    assert _field(bad_interval) == "schedule.specs[1].interval.every"
    assert _field(Schedule(CronSpec("0 25 * * *"))) == "schedule.cron"
    many = Schedule(CronSpec("0 9 * * *"), more_specs=(CronSpec("0 9 * * *"),) * 16, spec_list=True)
    assert _field(many) == "schedule.specs"
    missing = Schedule(CronSpec("0 9 * * *"), calendars=("a", "b"))
    assert _field(missing, {"a": _excluding("a")}) == "schedule.calendars[1]"
    twice = Schedule(CronSpec("0 9 * * *"), calendars=("a", "a"))
    assert _field(twice, {"a": _excluding("a")}) == "schedule.calendars"


@pytest.mark.parametrize(
    ("text", "index"),
    [("2026-02-30", 1), ("13-01", 1), ("2026/12/25", 1), ("12-25-2026", 1), ("02-30", 1)],
)
def test_calendar_dates_are_checked_naming_the_entry(text: str, index: int) -> None:
    with pytest.raises(InvalidArgument) as error:
        parse_calendar_dates(["2026-12-25", text], "calendar.dates")
    assert error.value.field == f"calendar.dates[{index}]"


def test_calendar_dates_normalise() -> None:
    dates, yearly = parse_calendar_dates(["12-25", "2026-01-01", "12-25", "02-29"], "dates")
    assert Calendar("c", CalendarKind.EXCLUDE, dates, yearly).entries() == [
        "2026-01-01",
        "02-29",
        "12-25",
    ]
