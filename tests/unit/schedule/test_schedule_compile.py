"""compile_schedule: zones, bounds, interval and once specs, previews and the herd cache."""

from __future__ import annotations

import itertools
import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest

from sundial.core.errors import InvalidArgument
from sundial.schedule import (
    Calendar,
    CalendarKind,
    CronSpec,
    FoldPolicy,
    GapPolicy,
    IntervalSpec,
    OnceSpec,
    Schedule,
    cache_info,
    clear_caches,
    compile_schedule,
    load_zone,
)

pytestmark = pytest.mark.timeout(120)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _compile(spec: object = None, **kw: object):
    return compile_schedule(Schedule(spec or CronSpec("0 * * * *"), **kw), job_id="job")  # type: ignore[arg-type]


def _iterate(compiled, after: datetime, n: int) -> list[datetime]:
    out: list[datetime] = []
    while len(out) < n and (fire := compiled.next_fire(after, len(out))) is not None:
        out.append(fire.at)
        after = fire.at
    return out


# -- zones -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["UTC", "Etc/UTC", "GMT", "Europe/Berlin", "America/Argentina/Buenos_Aires", "US/Eastern"],
)
def test_accepted_zones(name: str) -> None:
    compiled = _compile(time_zone=name)
    assert compiled.zone.key == name


def test_empty_zone_means_utc() -> None:
    assert _compile(time_zone="").zone.key == "UTC"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Mars/Olympus_Mons", "unknown time zone 'Mars/Olympus_Mons'"),
        ("america/new_york", "did you mean 'America/New_York'?"),
        ("UTC+3", "is a fixed UTC offset"),
        ("+03:00", "is a fixed UTC offset"),
        ("-0500", "is a fixed UTC offset"),
        ("GMT-5", "is a fixed UTC offset"),
        ("Etc/GMT+3", "is a fixed UTC offset, not a place"),
        ("EST", "is a fixed UTC offset, not a place"),
        ("HST", "is a fixed UTC offset, not a place"),
        ("Factory", "is a fixed UTC offset, not a place"),
        ("EST5EDT", "such as 'America/New_York'"),
        ("PST8PDT", "such as 'America/Los_Angeles'"),
        ("../../etc/passwd", "unknown time zone"),
        ("/usr/share/zoneinfo/UTC", "unknown time zone"),
        ("localtime", "unknown time zone"),
    ],
)
def test_rejected_zones(name: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        _compile(time_zone=name)
    assert info.value.field == "schedule.time_zone"
    assert message in str(info.value)


def test_zones_come_from_tzdata_and_pickle() -> None:
    zone = load_zone("America/New_York")
    assert zone is load_zone("America/New_York")
    assert type(zone).__name__ == "TzdataZone"
    local = datetime(2026, 7, 1, 12, tzinfo=zone)
    assert pickle.loads(pickle.dumps(local)) == local


# -- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "field", "message"),
    [
        (
            Schedule(
                CronSpec("0 * * * *"),
                start_time=_utc("2026-02-01T00:00"),
                end_time=_utc("2026-01-01T00:00"),
            ),
            "schedule.end_time",
            "is before start_time",
        ),
        (
            Schedule(CronSpec("0 * * * *"), start_time=datetime(2026, 1, 1)),
            "schedule.start_time",
            "must be timezone-aware",
        ),
        (
            Schedule(CronSpec("0 * * * *"), end_time="2026-01-01"),  # type: ignore[arg-type]
            "schedule.end_time",
            "must be a datetime",
        ),
        (Schedule(IntervalSpec(timedelta(0))), "schedule.interval.every", "at least 1s, got 0s"),
        (
            Schedule(IntervalSpec(timedelta(milliseconds=500))),
            "schedule.interval.every",
            "at least 1s",
        ),
        (
            Schedule(IntervalSpec(timedelta(seconds=-60))),
            "schedule.interval.every",
            "must not be negative",
        ),
        (
            Schedule(IntervalSpec(timedelta(minutes=5), timedelta(minutes=5))),
            "schedule.interval.offset",
            "must be shorter than the interval",
        ),
        (
            Schedule(IntervalSpec(300)),  # type: ignore[arg-type]
            "schedule.interval.every",
            "must be a duration",
        ),
        (Schedule(OnceSpec(datetime(2026, 1, 1))), "schedule.once", "must be timezone-aware"),
        (
            Schedule(CronSpec("0 * * * *"), jitter=timedelta(seconds=-1)),
            "schedule.jitter",
            "must not be negative",
        ),
        (Schedule(CronSpec("0 * * * *"), max_runs=-1), "schedule.max_runs", "must not be negative"),
        (Schedule(CronSpec("0 * * * *"), dst_gap="SHIFT"), "schedule.dst.gap", "unknown gap"),  # type: ignore[arg-type]
        (Schedule(CronSpec("0 * * * *"), dst_fold=None), "schedule.dst.fold", "unknown fold"),  # type: ignore[arg-type]
        (Schedule(None), "schedule", "one of cron, interval or once is required"),  # type: ignore[arg-type]
        (Schedule(CronSpec("0 0 * * *"), time_zone="Nowhere/City"), "schedule.time_zone", ""),
    ],
)
def test_invalid_schedules_name_the_field(schedule: Schedule, field: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        compile_schedule(schedule, job_id="job")
    assert info.value.field == field
    assert message in info.value.problem
    assert str(info.value).startswith(f"{field}: ")


def test_not_a_schedule() -> None:
    with pytest.raises(InvalidArgument) as info:
        compile_schedule("0 * * * *", job_id="job")  # type: ignore[arg-type]
    assert info.value.field == "schedule"


# -- bounds and counts -----------------------------------------------------------------


def test_start_and_end_are_inclusive() -> None:
    compiled = _compile(start_time=_utc("2026-01-01T10:00"), end_time=_utc("2026-01-01T12:00"))
    assert _iterate(compiled, _utc("2025-01-01T00:00"), 10) == [
        _utc("2026-01-01T10:00"),
        _utc("2026-01-01T11:00"),
        _utc("2026-01-01T12:00"),
    ]
    assert compiled.next_fire(_utc("2026-01-01T12:00")) is None


def test_end_equal_to_start_is_allowed() -> None:
    at = _utc("2026-01-01T10:00")
    compiled = _compile(start_time=at, end_time=at)
    assert _iterate(compiled, _utc("2025-01-01T00:00"), 5) == [at]


def test_max_runs_counts_what_the_caller_reports() -> None:
    compiled = _compile(max_runs=2)
    after = _utc("2026-01-01T00:30")
    assert compiled.next_fire(after, 0) is not None
    assert compiled.next_fire(after, 1) is not None
    assert compiled.next_fire(after, 2) is None
    assert compiled.remaining_runs(1) == 1 and _compile().remaining_runs(10**6) is None


def test_next_fire_needs_an_aware_instant() -> None:
    with pytest.raises(ValueError, match="aware"):
        _compile().next_fire(datetime(2026, 1, 1))


def test_any_zone_for_after_is_accepted() -> None:
    compiled = _compile()
    tokyo = timezone(timedelta(hours=9))
    fire = compiled.next_fire(datetime(2026, 1, 1, 9, 30, tzinfo=tokyo))
    assert fire is not None and fire.at == _utc("2026-01-01T01:00")
    assert fire.at.tzinfo is UTC


# -- interval and once -----------------------------------------------------------------


def test_interval_is_anchored_on_the_epoch_plus_offset() -> None:
    compiled = _compile(IntervalSpec(timedelta(minutes=15), timedelta(minutes=5)))
    assert _iterate(compiled, _utc("2026-01-01T10:07"), 3) == [
        _utc("2026-01-01T10:20"),
        _utc("2026-01-01T10:35"),
        _utc("2026-01-01T10:50"),
    ]
    assert compiled.next_fire(_utc("2026-01-01T10:20")).at == _utc("2026-01-01T10:35")  # type: ignore[union-attr]
    # Start time filters but does not re-anchor.
    started = _compile(IntervalSpec(timedelta(hours=1)), start_time=_utc("2026-01-01T10:07"))
    assert started.next_fire(_utc("2020-01-01T00:00")).at == _utc("2026-01-01T11:00")  # type: ignore[union-attr]


def test_interval_with_odd_period() -> None:
    compiled = _compile(IntervalSpec(timedelta(seconds=7)))
    fires = _iterate(compiled, _utc("2026-01-01T00:00"), 50)
    assert all(b - a == timedelta(seconds=7) for a, b in itertools.pairwise(fires))
    assert all(int(f.timestamp()) % 7 == 0 for f in fires)


def test_fixed_delay_counts_from_the_instant_asked_about() -> None:
    """A fixed delay has no grid: each fire time is ``every`` after the instant asked
    about (the scheduler asks with the previous run's end), or ``start_time`` while that
    is later; bounds and max_runs hold as for any schedule."""
    compiled = _compile(IntervalSpec(timedelta(minutes=15), from_end=True))
    assert compiled.fixed_delay == timedelta(minutes=15)
    assert compiled.next_fire(_utc("2026-01-01T10:07:03.5")).at == _utc(  # type: ignore[union-attr]
        "2026-01-01T10:22:03.5"
    )
    assert _iterate(compiled, _utc("2026-01-01T10:07"), 3) == [
        _utc("2026-01-01T10:22"),
        _utc("2026-01-01T10:37"),
        _utc("2026-01-01T10:52"),
    ]
    started = _compile(
        IntervalSpec(timedelta(minutes=15), from_end=True), start_time=_utc("2026-01-02T09:00")
    )
    assert started.next_fire(_utc("2026-01-01T00:00")).at == _utc("2026-01-02T09:00")  # type: ignore[union-attr]
    assert started.next_fire(_utc("2026-01-02T09:00")).at == _utc("2026-01-02T09:15")  # type: ignore[union-attr]
    ended = _compile(
        IntervalSpec(timedelta(minutes=15), from_end=True), end_time=_utc("2026-01-01T10:20")
    )
    assert ended.next_fire(_utc("2026-01-01T10:07")) is None
    assert _compile(IntervalSpec(timedelta(minutes=15))).fixed_delay is None
    assert _compile(CronSpec("0 * * * *")).fixed_delay is None


@pytest.mark.parametrize(
    ("schedule", "field", "message"),
    [
        (
            Schedule(IntervalSpec(timedelta(minutes=15), timedelta(minutes=1), from_end=True)),
            "schedule.interval.offset",
            "must be 0 with from_end",
        ),
        (
            Schedule(
                IntervalSpec(timedelta(minutes=15), from_end=True),
                more_specs=(CronSpec("0 * * * *"),),
                spec_list=True,
            ),
            "schedule.specs[0].interval.from_end",
            "stands alone",
        ),
        (
            Schedule(IntervalSpec(timedelta(minutes=15), from_end=True), spec_list=True),
            "schedule.specs[0].interval.from_end",
            "stands alone",
        ),
    ],
)
def test_fixed_delay_limits_name_the_field(schedule: Schedule, field: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        compile_schedule(schedule, job_id="job")
    assert caught.value.field == field
    assert message in caught.value.problem


def test_fixed_delay_takes_no_calendars() -> None:
    holidays = Calendar("holidays", CalendarKind.EXCLUDE, yearly=frozenset({(12, 25)}))
    schedule = Schedule(IntervalSpec(timedelta(minutes=15), from_end=True), calendars=("holidays",))
    with pytest.raises(InvalidArgument) as caught:
        compile_schedule(schedule, job_id="job", calendars={"holidays": holidays})
    assert caught.value.field == "schedule.calendars"


def test_once() -> None:
    at = datetime(2026, 6, 1, 9, 0, tzinfo=load_zone("Europe/Berlin"))
    compiled = _compile(OnceSpec(at), time_zone="America/New_York")
    fire = compiled.next_fire(_utc("2026-01-01T00:00"))
    assert fire is not None and fire.at == _utc("2026-06-01T07:00")
    assert fire.local.isoformat() == "2026-06-01T03:00:00-04:00"
    assert compiled.next_fire(fire.at) is None
    assert compiled.next_fire(_utc("2027-01-01T00:00")) is None
    assert (
        _compile(OnceSpec(at), end_time=_utc("2026-05-01T00:00")).next_fire(
            _utc("2026-01-01T00:00")
        )
        is None
    )


# -- preview ---------------------------------------------------------------------------


def test_preview_counts_runs_and_honours_bounds() -> None:
    compiled = _compile(CronSpec("0 2 * * *"), time_zone="America/New_York", max_runs=3)
    entries = compiled.preview(_utc("2026-03-06T00:00"), 10)
    assert [e.at for e in entries] == [
        _utc("2026-03-06T07:00"),
        _utc("2026-03-07T07:00"),
        _utc("2026-03-08T07:00"),  # shifted, annotated
    ]
    assert entries[-1].annotation is not None
    assert compiled.preview(_utc("2026-03-06T00:00"), 10, fired_count=3) == []
    assert compiled.preview(_utc("2026-03-06T00:00"), 0) == []
    skip = _compile(CronSpec("0 2 * * *"), time_zone="America/New_York", dst_gap=GapPolicy.SKIP)
    entries = skip.preview(_utc("2026-03-07T12:00"), 1)
    assert [(e.at, e.dropped) for e in entries] == [
        (_utc("2026-03-08T07:00"), True),
        (_utc("2026-03-09T06:00"), False),
    ]


def test_preview_matches_next_fire() -> None:
    compiled = _compile(
        CronSpec("*/20 * * * *"), time_zone="Europe/London", dst_fold=FoldPolicy.TWICE
    )
    after = _utc("2026-10-24T22:00")
    runs = [e for e in compiled.preview(after, 40) if not e.dropped]
    assert [e.at for e in runs] == _iterate(compiled, after, 40)


def test_dispatch_at_adds_deterministic_jitter() -> None:
    compiled = _compile(jitter=timedelta(seconds=30))
    nominal = _utc("2026-01-01T10:00")
    assert nominal <= compiled.dispatch_at(nominal) < nominal + timedelta(seconds=30)
    assert compiled.dispatch_at(nominal) == compiled.dispatch_at(nominal)
    assert _compile().dispatch_at(nominal) == nominal


# -- herd cache ------------------------------------------------------------------------


def test_a_herd_costs_one_computation() -> None:
    clear_caches()
    after = _utc("2026-01-01T10:00")
    fires = set()
    for i in range(5000):
        compiled = compile_schedule(
            Schedule(CronSpec("0 * * * *"), time_zone="Europe/Berlin"), job_id=f"job-{i}"
        )
        fire = compiled.next_fire(after)
        assert fire is not None
        fires.add(fire.at)
    assert fires == {_utc("2026-01-01T11:00")}
    info = cache_info()
    assert info.next_fire.misses == 1 and info.next_fire.hits == 4999
    assert info.clocks.misses == 1
    assert info.parsed.misses == 1


def test_hashed_jobs_do_not_share_results_wrongly() -> None:
    clear_caches()
    after = _utc("2026-01-01T10:00")
    minutes = set()
    for i in range(200):
        compiled = compile_schedule(Schedule(CronSpec("H * * * *")), job_id=f"job-{i}")
        fire = compiled.next_fire(after)
        assert fire is not None
        assert fire.at.minute == int(compiled.expanded_cron.split()[0])  # type: ignore[union-attr]
        minutes.add(fire.at.minute)
    assert len(minutes) > 40


FOR_JOB = [
    Schedule(CronSpec("H H * * *"), time_zone="Europe/Berlin"),
    Schedule(CronSpec("H/15 H(8-17) * * MON-FRI"), time_zone="America/New_York"),
    Schedule(CronSpec("30 H * * *"), jitter=timedelta(minutes=5)),
    Schedule(
        CronSpec("H 3 * * *"),
        more_specs=(IntervalSpec(timedelta(hours=7)), CronSpec("0 H H * *")),
        time_zone="Asia/Tokyo",
        start_time=datetime(2026, 1, 1, tzinfo=UTC),
        end_time=datetime(2031, 1, 1, tzinfo=UTC),
    ),
]


@pytest.mark.parametrize("schedule", FOR_JOB)
def test_for_job_is_compiling_for_that_job(schedule: Schedule) -> None:
    """A compiled schedule rebound to another job (BatchCreateJobs: its `H` per job)
    answers as the schedule compiled for that job does."""
    first = compile_schedule(schedule, job_id="job-a")
    after = datetime(2027, 3, 1, tzinfo=UTC)
    for job_id in ("job-b", "0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9", "job-a"):
        rebound = first.for_job(job_id)
        direct = compile_schedule(schedule, job_id=job_id)
        assert rebound.job_id == job_id
        assert rebound.expanded_cron == direct.expanded_cron
        assert rebound.preview(after, 40) == direct.preview(after, 40)
        fires = [f.at for f in direct.preview(after, 10)]
        assert [rebound.dispatch_at(at) for at in fires] == [direct.dispatch_at(at) for at in fires]
    assert first.for_job("job-b").expanded_cron != first.expanded_cron
