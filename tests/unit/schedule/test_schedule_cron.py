"""Cron parsing, validation errors and Jenkins H (sundial.schedule._cron)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta

import pytest

from sundial.core.errors import InvalidArgument
from sundial.schedule import CronSpec, Schedule, compile_schedule, parse_cron

pytestmark = pytest.mark.timeout(120)


def _fires(expr: str, after: datetime, n: int, zone: str = "UTC", job_id: str = "job") -> list[str]:
    compiled = compile_schedule(Schedule(CronSpec(expr), time_zone=zone), job_id=job_id)
    out = []
    for _ in range(n):
        fire = compiled.next_fire(after)
        assert fire is not None
        out.append(fire.at.strftime("%Y-%m-%d %H:%M:%S"))
        after = fire.at
    return out


T0 = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday


# -- what expressions mean -------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("0 * * * *", ["2026-01-01 01:00:00", "2026-01-01 02:00:00"]),
        ("*/20 9 * * *", ["2026-01-01 09:00:00", "2026-01-01 09:20:00", "2026-01-01 09:40:00"]),
        ("5-7 0 * * *", ["2026-01-01 00:05:00", "2026-01-01 00:06:00", "2026-01-01 00:07:00"]),
        ("10/25 0 * * *", ["2026-01-01 00:10:00", "2026-01-01 00:35:00", "2026-01-02 00:10:00"]),
        ("0 9 * * mon-fri", ["2026-01-01 09:00:00", "2026-01-02 09:00:00", "2026-01-05 09:00:00"]),
        ("0 9 * * FRI-SUN", ["2026-01-02 09:00:00", "2026-01-03 09:00:00", "2026-01-04 09:00:00"]),
        ("0 9 * * 7", ["2026-01-04 09:00:00", "2026-01-11 09:00:00"]),
        ("0 0 L * *", ["2026-01-31 00:00:00", "2026-02-28 00:00:00", "2026-03-31 00:00:00"]),
        ("0 0 1,L * *", ["2026-01-31 00:00:00", "2026-02-01 00:00:00", "2026-02-28 00:00:00"]),
        # 2026-02-15 is a Sunday -> Monday 16th; 2026-03-15 is a Sunday -> 16th.
        ("0 0 15W * *", ["2026-01-15 00:00:00", "2026-02-16 00:00:00", "2026-03-16 00:00:00"]),
        ("0 9 * * 1#2", ["2026-01-12 09:00:00", "2026-02-09 09:00:00"]),
        ("0 9 ? * MON#1", ["2026-01-05 09:00:00", "2026-02-02 09:00:00"]),
        ("0 9 * * 5L", ["2026-01-30 09:00:00", "2026-02-27 09:00:00"]),
        ("0 0 1 jan,jul *", ["2026-07-01 00:00:00", "2027-01-01 00:00:00"]),
        # Both day fields restricted: either matches (POSIX). 1st or any Monday.
        ("0 0 1 * 1", ["2026-01-05 00:00:00", "2026-01-12 00:00:00", "2026-01-19 00:00:00"]),
        # ...unless one starts with "*" (Vixie cron, cronie): both. Odd-numbered Mondays.
        ("5 4 */2 * 1", ["2026-01-05 04:05:00", "2026-01-19 04:05:00", "2026-02-09 04:05:00"]),
        ("@hourly", ["2026-01-01 01:00:00", "2026-01-01 02:00:00"]),
        ("@daily", ["2026-01-02 00:00:00", "2026-01-03 00:00:00"]),
        ("@midnight", ["2026-01-02 00:00:00"]),
        ("@weekly", ["2026-01-04 00:00:00", "2026-01-11 00:00:00"]),
        ("@monthly", ["2026-02-01 00:00:00", "2026-03-01 00:00:00"]),
        ("@yearly", ["2027-01-01 00:00:00", "2028-01-01 00:00:00"]),
        ("@ANNUALLY", ["2027-01-01 00:00:00"]),
        # Six fields: seconds first.
        ("30 0 12 * * *", ["2026-01-01 12:00:30", "2026-01-02 12:00:30"]),
        ("*/20 * * * * *", ["2026-01-01 00:00:20", "2026-01-01 00:00:40", "2026-01-01 00:01:00"]),
        ("0 0 0 29 2 *", ["2028-02-29 00:00:00", "2032-02-29 00:00:00"]),
    ],
)
def test_expression_meaning(expr: str, expected: list[str]) -> None:
    assert _fires(expr, T0, len(expected)) == expected


def test_a_single_value_range_is_that_value() -> None:
    # croniter widens "5-5" to the whole field; Sundial renders explicit values.
    assert _fires("0 5-5 * * *", T0, 2) == ["2026-01-01 05:00:00", "2026-01-02 05:00:00"]


def test_wildcard_classification_follows_vixie() -> None:
    assert parse_cron("30 2 * * *").fixed_time
    assert parse_cron("0 0-23 * * *").fixed_time  # only a leading * is a wildcard
    assert parse_cron("H H * * *").fixed_time
    assert parse_cron("0 2,3 * * *").fixed_time
    assert not parse_cron("0 * * * *").fixed_time
    assert not parse_cron("*/15 * * * *").fixed_time
    assert not parse_cron("0 */2 * * *").fixed_time
    assert not parse_cron("* 2 * * *").fixed_time
    assert not parse_cron("H/15 3 * * *").fixed_time
    assert not parse_cron("@hourly").fixed_time
    assert parse_cron("@daily").fixed_time
    assert parse_cron("*/5 30 2 * * *").fixed_time  # a seconds field does not count


# -- validation errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("", "schedule.cron: must not be empty"),
        ("   ", "schedule.cron: must not be empty"),
        ("* * * *", "schedule.cron: expected 5 fields"),
        ("* * * * * * *", "got 7"),
        ("0 25 * * *", "schedule.cron: field 2 (hour): value 25 out of range 0-23"),
        ("60 * * * *", "field 1 (minute): value 60 out of range 0-59"),
        ("0 0 32 * *", "field 3 (day of month): value 32 out of range 1-31"),
        ("0 0 0 * *", "field 3 (day of month): value 0 out of range 1-31"),
        ("0 0 * 13 *", "field 4 (month): value 13 out of range 1-12"),
        ("0 0 * * 8", "field 5 (day of week): value 8 out of range 0-7"),
        ("61 0 0 * * *", "field 1 (second): value 61 out of range 0-59"),
        ("0 60 0 * * *", "field 2 (minute): value 60 out of range 0-59"),
        ("0 0 24 * * *", "field 3 (hour): value 24 out of range 0-23"),
        ("abc * * * *", "field 1 (minute): invalid value 'abc'"),
        ("0 0 * foo *", "field 4 (month): invalid value 'foo'"),
        ("0 0 * * funday", "field 5 (day of week): invalid value 'funday'"),
        ("*/0 * * * *", "field 1 (minute): step 0 out of range 1-60"),
        ("*/61 * * * *", "field 1 (minute): step 61 out of range 1-60"),
        ("0 */x * * *", "field 2 (hour): invalid step 'x'"),
        ("0 22-2 * * *", "field 2 (hour): range 22-2 is reversed"),
        ("1,,2 * * * *", "field 1 (minute): empty item"),
        ("? * * * *", "field 1 (minute): '?' is only allowed"),
        ("0 0 1,? * *", "'?' must be the whole field"),
        ("0 0 LW * *", "field 3 (day of month): 'LW' is not supported"),
        ("0 0 L-3 * *", "'L-3' is not supported"),
        ("0 0 1,15W * *", "'W' must be the only item"),
        ("0 0 32W * *", "value 32 out of range 1-31"),
        ("0 0 * * 1#6", "field 5 (day of week): '#6' must be #1 to #5"),
        ("0 0 * * 1#2,3", "'#' and 'L' items cannot be mixed with plain days"),
        ("0 0 * * L", "'L' needs a day"),
        ("0 0 15W * 1", "field 3 (day of month): 'W' cannot be combined"),
        ("0 0 1 * 1#2", "field 5 (day of week): '#' and 'L' cannot be combined"),
        ("0 0 30 2 *", "field 3 (day of month): day 30 never occurs in FEB"),
        ("0 0 31 4,6,9,11 *", "day 31 never occurs in APR,JUN,SEP,NOV"),
        ("H(0-99) * * * *", "field 1 (minute): value 99 out of range 0-59"),
        ("H(30-10) * * * *", "range 30-10 in H(30-10) is reversed"),
        ("H/0 * * * *", "step 0 out of range"),
        ("Hx * * * *", "invalid value 'HX'"),
        ("@fortnightly", "schedule.cron: unknown macro '@fortnightly'"),
        ("@reboot", "@reboot is not supported"),
        ("@every 5m", "use an interval schedule"),
        ("0 0 * * * é", "only ASCII"),
    ],
)
def test_invalid_expressions_name_the_field(expr: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        compile_schedule(Schedule(CronSpec(expr)), job_id="job")
    assert info.value.field == "schedule.cron"
    assert message in str(info.value)
    assert str(info.value).startswith("schedule.cron: ")
    assert info.value.code.name == "INVALID_ARGUMENT"


def test_feb_29_is_possible() -> None:
    compile_schedule(Schedule(CronSpec("0 0 29 2 *")), job_id="job")
    compile_schedule(Schedule(CronSpec("0 0 31 1,4 *")), job_id="job")  # January has a 31st


def test_non_string_expression() -> None:
    with pytest.raises(InvalidArgument) as info:
        compile_schedule(Schedule(CronSpec(42)), job_id="job")  # type: ignore[arg-type]
    assert info.value.field == "schedule.cron"


# -- Jenkins H ---------------------------------------------------------------------------

H_EXPRESSIONS = [
    "H H * * *",
    "H/15 * * * *",
    "H(0-29) H(9-17) * * 1-5",
    "H H(0-2) H * H",
    "H * * * * *",
]


def _expansions(job_ids: list[str]) -> dict[str, list[str]]:
    return {e: [parse_cron(e).expand(j) for j in job_ids] for e in H_EXPRESSIONS}


def test_h_is_pinned_forever() -> None:
    # Golden values: if this fails, every hashed job in production moves. Never update
    # them in a refactor; changing the hash is a data migration.
    assert parse_cron("H H * * *").expand("job-42") == "19 11 * * *"
    assert parse_cron("H/15 * * * *").expand("job-42") == "4,19,34,49 * * * *"
    assert parse_cron("H H * * *").expand("tenant-a/report") == "42 3 * * *"


def test_h_is_the_same_in_a_fresh_process() -> None:
    job_ids = [f"job-{i}" for i in range(20)] + ["ünïcode-job", ""]
    here = _expansions(job_ids)
    code = (
        "import json, sys\n"
        "from sundial.schedule import parse_cron\n"
        f"exprs = {H_EXPRESSIONS!r}\n"
        f"ids = {job_ids!r}\n"
        "print(json.dumps({e: [parse_cron(e).expand(j) for j in ids] for e in exprs}))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout) == here


def test_h_spreads_jobs_and_respects_ranges() -> None:
    minutes = set()
    for i in range(300):
        minute, hour, dom, month, dow = parse_cron("H H(9-17) H * H").expand(f"job-{i}").split()
        assert month == "*"
        minute, hour, dom, dow = int(minute), int(hour), int(dom), int(dow)
        assert 0 <= minute <= 59 and 9 <= hour <= 17 and 1 <= dom <= 28 and 0 <= dow <= 6
        minutes.add(minute)
    assert len(minutes) > 45  # 300 jobs over 60 minutes: well spread


def test_h_step_starts_within_the_first_step() -> None:
    for i in range(100):
        values = [int(v) for v in parse_cron("H/20 * * * *").expand(f"j{i}").split()[0].split(",")]
        assert len(values) == 3 and values[0] < 20
        assert values == [values[0], values[0] + 20, values[0] + 40]
        ranged = parse_cron("H(10-40)/15 * * * *").expand(f"j{i}").split()[0].split(",")
        start = int(ranged[0])
        assert 10 <= start < 25 and all(int(v) <= 40 for v in ranged)


def test_jobs_without_h_share_one_expansion() -> None:
    a = compile_schedule(Schedule(CronSpec("0 * * * *")), job_id="a")
    b = compile_schedule(Schedule(CronSpec("0 * * * *")), job_id="b")
    assert a._clock is b._clock
    c = compile_schedule(Schedule(CronSpec("H * * * *")), job_id="a")
    d = compile_schedule(Schedule(CronSpec("H * * * *")), job_id="b")
    assert c.expanded_cron != d.expanded_cron


def _cronie_days(dom: str, dow: str, start: date, days: int) -> list[date]:
    """The days cronie fires ``0 0 <dom> * <dow>`` on, by its own rule (a different
    algorithm from ours: cron's bit sets and DOM_STAR/DOW_STAR flags, day by day)."""

    def values(text: str, lo: int, hi: int) -> set[int]:
        chosen: set[int] = set()
        for item in text.split(","):
            body, _, step = item.partition("/")
            if body == "*":
                first, last = lo, hi
            elif "-" in body:
                first, last = (int(v) for v in body.split("-"))
            else:
                first = last = int(body)
                if step:
                    last = hi
            chosen.update(range(first, last + 1, int(step or 1)))
        return chosen

    dom_bits, dow_bits = values(dom, 1, 31), {d % 7 for d in values(dow, 0, 7)}
    star = dom.startswith("*") or dow.startswith("*")  # cronie: DOM_STAR || DOW_STAR
    fired = []
    for offset in range(days):
        day = start + timedelta(days=offset)
        in_dom, in_dow = day.day in dom_bits, (day.weekday() + 1) % 7 in dow_bits
        if (in_dom and in_dow) if star else (in_dom or in_dow):
            fired.append(day)
    return fired


@pytest.mark.parametrize(
    ("dom", "dow"),
    [
        ("*/2", "1"),
        ("*/3", "1-5"),
        ("1-31/2", "0"),
        ("1", "1"),
        ("*", "1"),
        ("*/2", "*"),
        ("15", "*/2"),
        ("*/5", "*/3"),
        ("2-20/3", "6,0"),
        ("*", "*"),
    ],
)
def test_day_fields_combine_exactly_as_cronie_does(dom: str, dow: str) -> None:
    start, days = date(2026, 1, 1), 400
    expected = _cronie_days(dom, dow, start, days)
    fires = _fires(f"0 0 {dom} * {dow}", datetime(2025, 12, 31, 12, tzinfo=UTC), len(expected))
    assert [datetime.fromisoformat(f).date() for f in fires] == expected
