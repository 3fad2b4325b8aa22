"""DailyCron (an expression naming times of day only, iterated without croniter) gives
WallCron's (croniter's) answers: the same next wall time from any cursor."""

from __future__ import annotations

import pickle
import uuid
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sundial.schedule._cache import expanded_cron, wall_cron
from sundial.schedule._fire import _LAST_WALL, DailyCron, WallCron

DAILY = [
    "0 * * * *",
    "*/15 * * * *",
    "H H * * *",
    "H * * * *",
    "H/20 H/6 * * *",
    "30 9 * * *",
    "0 0,12 * * *",
    "59 23 * * *",
    "* * * * *",
    "H H H * * *",  # six fields: seconds first
    "15 0,30 8-9 * * *",
    "0,30 */5 * * * *",  # 576 times a day
]
NOT_DAILY = ["0 9 * * MON-FRI", "0 0 1 * *", "0 0 * 2 *", "0 0 L * *", "* * * * * *"]


def _expanded(expression: str, key: str) -> str:
    return expanded_cron(expression, key)


@pytest.mark.parametrize("expression", DAILY)
def test_times_of_day_only_are_iterated_without_croniter(expression: str) -> None:
    assert isinstance(wall_cron(_expanded(expression, "job-1")), DailyCron)


@pytest.mark.parametrize("expression", NOT_DAILY)
def test_other_expressions_keep_croniter(expression: str) -> None:
    assert DailyCron.of(_expanded(expression, "job-1")) is None
    assert isinstance(wall_cron(_expanded(expression, "job-1")), WallCron)


CURSORS = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 31)),
    # Whole seconds and minutes, where "strictly after" matters.
    st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    ),
    st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1)).map(
        lambda d: d.replace(second=0, microsecond=0)
    ),
    # A millisecond before a boundary, as the DST walk asks.
    st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1)).map(
        lambda d: d.replace(second=0, microsecond=0) - timedelta(milliseconds=1)
    ),
    st.sampled_from(
        [
            datetime(9999, 12, 29, 23, 59, 59),
            _LAST_WALL - timedelta(microseconds=1),
            _LAST_WALL,
            datetime(2024, 2, 28, 23, 59, 59, 999_999),
            datetime(2023, 12, 31, 23, 59),
        ]
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    expression=st.sampled_from(DAILY),
    key=st.uuids().map(str),
    cursor=CURSORS,
)
def test_daily_cron_answers_as_croniter_does(expression: str, key: str, cursor: datetime) -> None:
    expanded = _expanded(expression, key)
    daily = DailyCron.of(expanded)
    assert daily is not None
    assert daily.after(cursor) == WallCron(expanded).after(cursor)


def test_a_daily_cron_pickles_as_itself() -> None:
    daily = wall_cron(_expanded("H H * * *", str(uuid.uuid4())))
    copy = pickle.loads(pickle.dumps(daily))
    assert isinstance(copy, DailyCron)
    assert copy.expression == daily.expression
    cursor = datetime(2030, 5, 6, 7, 8, 9)
    assert copy.after(cursor) == daily.after(cursor)
