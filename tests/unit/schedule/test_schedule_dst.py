"""DST rules: exact UTC instants for the cases docs/design.md section 4 names.

Expected instants are written out by hand from the zones' published rules, not computed
by the code under test:

* America/New_York 2026: clocks jump 02:00 EST -> 03:00 EDT on 03-08 at 07:00Z; they go
  back 02:00 EDT -> 01:00 EST on 11-01 at 06:00Z (01:00-02:00 occurs at 05:xxZ, then
  06:xxZ).
* Europe/Berlin 2026-10-25: 03:00 CEST -> 02:00 CET at 01:00Z.
* Australia/Lord_Howe 2026 (+10:30 / +11:00, a 30-minute shift): 2026-04-05 02:00 ->
  01:30 at 04-04 15:00Z; 2026-10-04 02:00 -> 02:30 at 10-03 15:30Z.
* Australia/Sydney 2026: 04-05 03:00 AEDT -> 02:00 AEST at 04-04 16:00Z; 10-04 02:00
  AEST -> 03:00 AEDT at 10-03 16:00Z.
* America/Santiago 2026 (transitions at midnight): 09-06 00:00 -04 -> 01:00 -03 at
  04:00Z; 04-05 00:00 -03 -> 04-04 23:00 -04 at 03:00Z.
* Atlantic/Azores 2026 (transitions at midnight): 03-29 00:00 -01 -> 01:00 +00 at 01:00Z;
  10-25 01:00 +00 -> 00:00 -01 at 01:00Z.

(These follow the pinned tzdata, which can differ from a host's zoneinfo: tzdata 2026f
has no 2026 fall-back for America/Havana, so it is not used here.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sundial.schedule import (
    CronSpec,
    DstAnnotation,
    FoldPolicy,
    GapPolicy,
    IntervalSpec,
    Schedule,
    compile_schedule,
)

pytestmark = pytest.mark.timeout(120)

NY = "America/New_York"


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _fires(
    expr: str,
    zone: str,
    after: str,
    until: str,
    *,
    gap: GapPolicy = GapPolicy.AUTO,
    fold: FoldPolicy = FoldPolicy.AUTO,
) -> list[str]:
    """Fire instants in (after, until] as 'MM-DDTHH:MM' UTC strings."""
    compiled = compile_schedule(
        Schedule(CronSpec(expr), time_zone=zone, dst_gap=gap, dst_fold=fold), job_id="job"
    )
    out = []
    cursor = _utc(after)
    while (fire := compiled.next_fire(cursor)) is not None and fire.at <= _utc(until):
        out.append(fire.at.strftime("%m-%dT%H:%M"))
        cursor = fire.at
    return out


# Expected instants per (expression, resolved policy). AUTO resolves to SHIFT/ONCE for
# the fixed-time expressions and SKIP/TWICE for the wildcard ones.
FIXED = {"30 2 * * *": True, "0 2 * * *": True, "30 1 * * *": True}
SPRING = {  # 2026-03-08, window 03-08T03:59Z .. 03-08T09:00Z; fold policy is irrelevant
    ("30 2 * * *", GapPolicy.SHIFT): ["03-08T07:00"],
    ("30 2 * * *", GapPolicy.SKIP): [],
    ("0 2 * * *", GapPolicy.SHIFT): ["03-08T07:00"],
    ("0 2 * * *", GapPolicy.SKIP): [],
    ("30 1 * * *", GapPolicy.SHIFT): ["03-08T06:30"],
    ("30 1 * * *", GapPolicy.SKIP): ["03-08T06:30"],
    # 23:00 EST .. 01:00 EST, (02:00 missing), 03:00 EDT .. 05:00 EDT: under SHIFT the
    # 02:00 run would land on 03:00, which runs anyway: one run.
    ("0 * * * *", GapPolicy.SKIP): [f"03-08T{h:02}:00" for h in range(4, 10)],
    ("0 * * * *", GapPolicy.SHIFT): [f"03-08T{h:02}:00" for h in range(4, 10)],
    ("*/15 * * * *", GapPolicy.SKIP): [
        f"03-08T{h:02}:{m:02}" for h in range(4, 9) for m in (0, 15, 30, 45)
    ]
    + ["03-08T09:00"],
    ("*/15 * * * *", GapPolicy.SHIFT): [
        f"03-08T{h:02}:{m:02}" for h in range(4, 9) for m in (0, 15, 30, 45)
    ]
    + ["03-08T09:00"],
}
FALL = {  # 2026-11-01, window 11-01T03:59Z .. 11-01T08:00Z; gap policy is irrelevant
    ("30 2 * * *", FoldPolicy.ONCE): ["11-01T07:30"],
    ("30 2 * * *", FoldPolicy.TWICE): ["11-01T07:30"],
    ("0 2 * * *", FoldPolicy.ONCE): ["11-01T07:00"],  # 02:00 is after the fold
    ("0 2 * * *", FoldPolicy.TWICE): ["11-01T07:00"],
    ("30 1 * * *", FoldPolicy.ONCE): ["11-01T05:30"],  # 01:30 EDT only
    ("30 1 * * *", FoldPolicy.TWICE): ["11-01T05:30", "11-01T06:30"],  # EDT and EST
    # 00:00 EDT, 01:00 EDT, 01:00 EST, 02:00 EST, 03:00 EST
    ("0 * * * *", FoldPolicy.TWICE): [
        "11-01T04:00",
        "11-01T05:00",
        "11-01T06:00",
        "11-01T07:00",
        "11-01T08:00",
    ],
    ("0 * * * *", FoldPolicy.ONCE): ["11-01T04:00", "11-01T05:00", "11-01T07:00", "11-01T08:00"],
    ("*/15 * * * *", FoldPolicy.TWICE): [
        f"11-01T{h:02}:{m:02}" for h in range(4, 8) for m in (0, 15, 30, 45)
    ]
    + ["11-01T08:00"],
    ("*/15 * * * *", FoldPolicy.ONCE): [
        f"11-01T{h:02}:{m:02}" for h in (4, 5) for m in (0, 15, 30, 45)
    ]
    + ["11-01T07:00", "11-01T07:15", "11-01T07:30", "11-01T07:45", "11-01T08:00"],
}
EXPRESSIONS = ["30 2 * * *", "0 2 * * *", "30 1 * * *", "0 * * * *", "*/15 * * * *"]


def _resolve_gap(expr: str, gap: GapPolicy) -> GapPolicy:
    if gap is GapPolicy.AUTO:
        return GapPolicy.SHIFT if FIXED.get(expr) else GapPolicy.SKIP
    return gap


def _resolve_fold(expr: str, fold: FoldPolicy) -> FoldPolicy:
    if fold is FoldPolicy.AUTO:
        return FoldPolicy.ONCE if FIXED.get(expr) else FoldPolicy.TWICE
    return fold


@pytest.mark.parametrize("fold", list(FoldPolicy))
@pytest.mark.parametrize("gap", list(GapPolicy))
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_new_york_spring_forward(expr: str, gap: GapPolicy, fold: FoldPolicy) -> None:
    expected = SPRING[(expr, _resolve_gap(expr, gap))]
    assert _fires(expr, NY, "2026-03-08T03:59", "2026-03-08T09:00", gap=gap, fold=fold) == expected


@pytest.mark.parametrize("fold", list(FoldPolicy))
@pytest.mark.parametrize("gap", list(GapPolicy))
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_new_york_fall_back(expr: str, gap: GapPolicy, fold: FoldPolicy) -> None:
    expected = FALL[(expr, _resolve_fold(expr, fold))]
    assert _fires(expr, NY, "2026-11-01T03:59", "2026-11-01T08:00", gap=gap, fold=fold) == expected


def test_shifted_fire_is_annotated_and_explained() -> None:
    compiled = compile_schedule(Schedule(CronSpec("30 2 * * *"), time_zone=NY), job_id="j")
    fire = compiled.next_fire(_utc("2026-03-08T00:00"))
    assert fire is not None
    assert fire.at == _utc("2026-03-08T07:00")
    assert fire.local.isoformat() == "2026-03-08T03:00:00-04:00"
    assert fire.wall == datetime(2026, 3, 8, 2, 30)
    assert fire.annotation is DstAnnotation.SHIFTED_GAP
    assert fire.note == (
        "02:30 does not exist on 2026-03-08 in America/New_York "
        "(clocks jump from 02:00 to 03:00); moved to 03:00 EDT"
    )
    assert not fire.dropped


def test_fold_fires_are_annotated() -> None:
    compiled = compile_schedule(
        Schedule(CronSpec("30 1 * * *"), time_zone=NY, dst_fold=FoldPolicy.TWICE), job_id="j"
    )
    first = compiled.next_fire(_utc("2026-11-01T00:00"))
    assert first is not None
    second = compiled.next_fire(first.at)
    assert second is not None
    assert first.annotation is DstAnnotation.FOLD_FIRST
    assert first.local.isoformat() == "2026-11-01T01:30:00-04:00" and first.local.fold == 0
    assert second.annotation is DstAnnotation.FOLD_SECOND
    assert second.local.isoformat() == "2026-11-01T01:30:00-05:00" and second.local.fold == 1
    assert "second occurrence (EST)" in (second.note or "")


@pytest.mark.parametrize(
    ("expr", "gap", "fold", "start", "expected"),
    [
        # SKIP: the gap time is reported as dropped, never run.
        (
            "30 2 * * *",
            GapPolicy.SKIP,
            FoldPolicy.AUTO,
            "2026-03-07T12:00",
            [
                ("03-08T07:00", DstAnnotation.SKIPPED_GAP, True),
                ("03-09T06:30", None, False),
            ],
        ),
        # Wildcard under SHIFT: 02:00 lands on 03:00, which runs anyway.
        (
            "0 * * * *",
            GapPolicy.SHIFT,
            FoldPolicy.AUTO,
            "2026-03-08T06:30",
            [
                ("03-08T07:00", DstAnnotation.MERGED_GAP, True),
                ("03-08T07:00", None, False),
            ],
        ),
        # Two gap times of one job become one shifted run.
        (
            "0,30 2 * * *",
            GapPolicy.AUTO,
            FoldPolicy.AUTO,
            "2026-03-08T06:30",
            [
                ("03-08T07:00", DstAnnotation.SHIFTED_GAP, False),
                ("03-08T07:00", DstAnnotation.MERGED_GAP, True),
            ],
        ),
        # ONCE: the second occurrence is reported as dropped.
        (
            "30 1 * * *",
            GapPolicy.AUTO,
            FoldPolicy.AUTO,
            "2026-11-01T05:00",
            [
                ("11-01T05:30", DstAnnotation.FOLD_FIRST, False),
                ("11-01T06:30", DstAnnotation.SKIPPED_FOLD_SECOND, True),
            ],
        ),
    ],
)
def test_preview_reports_dropped_times(
    expr: str, gap: GapPolicy, fold: FoldPolicy, start: str, expected: list[tuple]
) -> None:
    compiled = compile_schedule(
        Schedule(CronSpec(expr), time_zone=NY, dst_gap=gap, dst_fold=fold), job_id="j"
    )
    # Dropped entries are reported between returned fire times: ask for one more.
    real = sum(1 for _, _, dropped in expected if not dropped) + 1
    entries = compiled.preview(_utc(start), real)[: len(expected)]
    got = [(e.at.strftime("%m-%dT%H:%M"), e.annotation, e.dropped) for e in entries]
    assert got == expected
    assert all(e.note for e in entries if e.annotation is not None)


def test_no_collision_between_shifted_and_real_times() -> None:
    # 02:00 and 02:30 do not exist; 03:00 runs anyway; 03:30 is ordinary.
    assert _fires("0,30 2,3 * * *", NY, "2026-03-08T06:00", "2026-03-08T08:00") == [
        "03-08T07:00",
        "03-08T07:30",
    ]


def test_berlin_fall_back_fixed_time_runs_once() -> None:
    assert _fires("0 2 * * *", "Europe/Berlin", "2026-10-23T12:00", "2026-10-26T12:00") == [
        "10-24T00:00",  # 02:00 CEST
        "10-25T00:00",  # 02:00 CEST, the first of the two 02:00s; not 01:00Z
        "10-26T01:00",  # 02:00 CET
    ]
    assert _fires(
        "0 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00",
        "2026-10-25T12:00",
        fold=FoldPolicy.TWICE,
    ) == ["10-25T00:00", "10-25T01:00"]


def test_lord_howe_thirty_minute_shift() -> None:
    zone = "Australia/Lord_Howe"
    # Spring forward: 02:00-02:30 does not exist.
    assert _fires("0 2 * * *", zone, "2026-10-03T00:00", "2026-10-04T00:00") == ["10-03T15:30"]
    assert _fires("15 2 * * *", zone, "2026-10-03T00:00", "2026-10-04T00:00") == ["10-03T15:30"]
    assert _fires("30 2 * * *", zone, "2026-10-03T00:00", "2026-10-04T00:00") == ["10-03T15:30"]
    assert _fires("*/15 * * * *", zone, "2026-10-03T14:59", "2026-10-03T16:00") == [
        "10-03T15:00",  # 01:30 +10:30
        "10-03T15:15",  # 01:45 +10:30; 02:00 and 02:15 do not exist
        "10-03T15:30",  # 02:30 +11
        "10-03T15:45",
        "10-03T16:00",
    ]
    # Fall back: 01:30-02:00 occurs twice (+11, then +10:30).
    assert _fires("45 1 * * *", zone, "2026-04-04T00:00", "2026-04-05T00:00") == ["04-04T14:45"]
    assert _fires(
        "45 1 * * *", zone, "2026-04-04T00:00", "2026-04-05T00:00", fold=FoldPolicy.TWICE
    ) == ["04-04T14:45", "04-04T15:15"]
    assert _fires("*/15 * * * *", zone, "2026-04-04T13:59", "2026-04-04T15:45") == [
        "04-04T14:00",  # 01:00 +11
        "04-04T14:15",
        "04-04T14:30",  # 01:30 +11 (first)
        "04-04T14:45",  # 01:45 +11 (first)
        "04-04T15:00",  # 01:30 +10:30 (second)
        "04-04T15:15",  # 01:45 +10:30 (second)
        "04-04T15:30",  # 02:00 +10:30
        "04-04T15:45",
    ]


def test_lord_howe_annotation_names_the_offset() -> None:
    compiled = compile_schedule(
        Schedule(CronSpec("0 2 * * *"), time_zone="Australia/Lord_Howe"), job_id="j"
    )
    fire = compiled.next_fire(_utc("2026-10-03T00:00"))
    assert fire is not None and fire.annotation is DstAnnotation.SHIFTED_GAP
    assert fire.note is not None and fire.note.endswith("moved to 02:30 UTC+11")


def test_southern_hemisphere_sydney() -> None:
    zone = "Australia/Sydney"
    # October: spring forward (southern hemisphere), 02:30 does not exist.
    assert _fires("30 2 * * *", zone, "2026-10-02T00:00", "2026-10-05T00:00") == [
        "10-02T16:30",  # 02:30 AEST
        "10-03T16:00",  # shifted to 03:00 AEDT
        "10-04T15:30",  # 02:30 AEDT
    ]
    # April: fall back, 02:30 occurs twice.
    assert _fires("30 2 * * *", zone, "2026-04-03T00:00", "2026-04-06T00:00") == [
        "04-03T15:30",  # 02:30 AEDT
        "04-04T15:30",  # 02:30 AEDT, first of two
        "04-05T16:30",  # 02:30 AEST
    ]
    assert _fires(
        "30 2 * * *", zone, "2026-04-04T00:00", "2026-04-05T00:00", fold=FoldPolicy.TWICE
    ) == ["04-04T15:30", "04-04T16:30"]


def test_midnight_transition_santiago_daily_midnight_job() -> None:
    zone = "America/Santiago"
    # 2026-09-06 00:00 does not exist: the midnight job runs when clocks reach 01:00.
    assert _fires("0 0 * * *", zone, "2026-09-04T12:00", "2026-09-07T12:00") == [
        "09-05T04:00",  # 09-05 00:00 -04
        "09-06T04:00",  # 09-06 01:00 -03 (shifted)
        "09-07T03:00",  # 09-07 00:00 -03
    ]
    compiled = compile_schedule(Schedule(CronSpec("0 0 * * *"), time_zone=zone), job_id="j")
    fires = compiled.preview(_utc("2026-09-04T12:00"), 3)
    assert [f.local.date().day for f in fires] == [5, 6, 7]  # once on every local day
    assert fires[1].annotation is DstAnnotation.SHIFTED_GAP
    # April: 23:00-24:00 on 04-04 repeats; midnight itself is unambiguous.
    assert _fires("0 0 * * *", zone, "2026-04-03T12:00", "2026-04-06T12:00") == [
        "04-04T03:00",  # 04-04 00:00 -03
        "04-05T04:00",  # 04-05 00:00 -04
        "04-06T04:00",
    ]


def test_midnight_transition_azores_daily_midnight_job() -> None:
    zone = "Atlantic/Azores"
    # 03-29 00:00 (-01) does not exist: clocks jump to 01:00 (+00) at 01:00Z.
    assert _fires("0 0 * * *", zone, "2026-03-27T12:00", "2026-03-30T12:00") == [
        "03-28T01:00",  # 00:00 -01
        "03-29T01:00",  # 01:00 +00 (shifted)
        "03-30T00:00",  # 00:00 +00
    ]
    # 10-25 00:00 occurs twice (+00, then -01): once under AUTO, both under TWICE.
    assert _fires("0 0 * * *", zone, "2026-10-23T12:00", "2026-10-26T12:00") == [
        "10-24T00:00",
        "10-25T00:00",
        "10-26T01:00",
    ]
    assert _fires(
        "0 0 * * *", zone, "2026-10-24T12:00", "2026-10-25T12:00", fold=FoldPolicy.TWICE
    ) == ["10-25T00:00", "10-25T01:00"]


def test_interval_is_immune_to_dst() -> None:
    compiled = compile_schedule(
        Schedule(IntervalSpec(timedelta(hours=1)), time_zone=NY), job_id="j"
    )
    cursor = _utc("2026-03-08T05:30")
    got = []
    for _ in range(4):
        fire = compiled.next_fire(cursor)
        assert fire is not None and fire.annotation is None
        got.append((fire.at.strftime("%H:%M"), fire.local.strftime("%H:%M%z")))
        cursor = fire.at
    assert got == [
        ("06:00", "01:00-0500"),
        ("07:00", "03:00-0400"),
        ("08:00", "04:00-0400"),
        ("09:00", "05:00-0400"),
    ]


def test_after_inside_a_fold_resumes_correctly() -> None:
    # Stateless: asking from any instant inside the fold gives the next fire.
    compiled = compile_schedule(Schedule(CronSpec("*/15 * * * *"), time_zone=NY), job_id="j")
    cases = {
        "2026-11-01T05:50": "2026-11-01T06:00",  # 01:50 EDT -> 01:00 EST (second pass)
        "2026-11-01T06:00": "2026-11-01T06:15",  # at the transition
        "2026-11-01T06:20": "2026-11-01T06:30",  # 01:20 EST -> 01:30 EST
        "2026-11-01T06:50": "2026-11-01T07:00",  # 01:50 EST -> 02:00 EST
        "2026-11-01T05:59:59.999999": "2026-11-01T06:00",
    }
    for after, expected in cases.items():
        fire = compiled.next_fire(_utc(after))
        assert fire is not None and fire.at == _utc(expected), after
    once = compile_schedule(Schedule(CronSpec("30 1 * * *"), time_zone=NY), job_id="j")
    fire = once.next_fire(_utc("2026-11-01T06:10"))  # 01:10 EST, after the first 01:30
    assert fire is not None and fire.at == _utc("2026-11-02T06:30")
    twice = compile_schedule(
        Schedule(CronSpec("30 1 * * *"), time_zone=NY, dst_fold=FoldPolicy.TWICE), job_id="j"
    )
    fire = twice.next_fire(_utc("2026-11-01T05:45"))  # 01:45 EDT: the EST 01:30 is next
    assert fire is not None and fire.at == _utc("2026-11-01T06:30")


def test_a_schedule_that_only_names_missing_times() -> None:
    # The 2nd Sunday of March at 02:30 never exists in New York.
    expr = "30 2 * 3 0#2"
    skip = compile_schedule(
        Schedule(CronSpec(expr), time_zone=NY, dst_gap=GapPolicy.SKIP), job_id="j"
    )
    assert skip.next_fire(_utc("2026-01-01T00:00")) is None
    assert [e.dropped for e in skip.preview(_utc("2026-01-01T00:00"), 1)][:3] == [True] * 3
    shift = compile_schedule(Schedule(CronSpec(expr), time_zone=NY), job_id="j")
    assert _fires(expr, NY, "2026-01-01T00:00", "2028-12-31T00:00") == [
        "03-08T07:00",  # 2026
        "03-14T07:00",  # 2027
        "03-12T07:00",  # 2028
    ]
    assert shift.next_fire(_utc("2026-01-01T00:00")).annotation is DstAnnotation.SHIFTED_GAP  # type: ignore[union-attr]
