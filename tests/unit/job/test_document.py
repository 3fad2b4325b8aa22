"""The stored job document: the schedule, policies and target JSON codecs.

Every encoded document must decode to the value it came from, be valid proto3 JSON of
its ``sundial.v1`` message (``json_format.ParseDict``: the API writes these columns from
the wire form, the scheduler and the executor read them back), and a missing field must
read as its default, since the API omits defaults.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf import duration_pb2, json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from sundial.core import wire
from sundial.job import (
    JobPolicies,
    OverlapPolicy,
    duration_from_json,
    duration_to_json,
    policies_from_json,
    policies_to_json,
    schedule_from_json,
    schedule_to_json,
    target_from_json,
    target_to_json,
)
from sundial.run import GrpcTarget, HttpTarget, RetryPolicy, Target
from sundial.schedule import (
    DEFAULT_CATCHUP_WINDOW,
    DEFAULT_MAX_CATCHUP,
    DEFAULT_MISFIRE_THRESHOLD,
    CronSpec,
    FoldPolicy,
    GapPolicy,
    IntervalSpec,
    MisfirePolicy,
    OnceSpec,
    Schedule,
)
from sundial.v1 import job_pb2


def _stored(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as it comes back from a jsonb column."""
    decoded: dict[str, Any] = json.loads(json.dumps(doc))
    return decoded


def _api_form(doc: dict[str, Any], message: Any) -> dict[str, Any]:
    """``doc`` read into its proto message and written back as the API writes it."""
    parsed = json_format.ParseDict(doc, message)
    api: dict[str, Any] = json_format.MessageToDict(parsed, preserving_proto_field_name=True)
    return api


# --- schedule ------------------------------------------------------------------------

SCHEDULES = [
    pytest.param(Schedule(CronSpec("*/5 * * * *")), id="cron, defaults"),
    pytest.param(
        Schedule(
            CronSpec("30 2 * * *"),
            time_zone="America/New_York",
            start_time=datetime(2026, 1, 1, tzinfo=UTC),
            end_time=datetime(2026, 12, 31, 23, 59, 59, 250_000, tzinfo=UTC),
            jitter=timedelta(seconds=30),
            dst_gap=GapPolicy.SKIP,
            dst_fold=FoldPolicy.TWICE,
            max_runs=10,
        ),
        id="cron, every field",
    ),
    pytest.param(
        Schedule(
            IntervalSpec(timedelta(minutes=15), timedelta(minutes=5, milliseconds=250)),
            jitter=timedelta(milliseconds=1),
            dst_gap=GapPolicy.SHIFT,
            dst_fold=FoldPolicy.ONCE,
        ),
        id="interval with offset",
    ),
    pytest.param(Schedule(IntervalSpec(timedelta(hours=1))), id="interval, no offset"),
    pytest.param(
        Schedule(IntervalSpec(timedelta(minutes=15), from_end=True), max_runs=3),
        id="fixed delay",
    ),
    pytest.param(
        Schedule(OnceSpec(datetime(2026, 7, 4, 9, 30, 0, 123_456, tzinfo=UTC))),
        id="once, microseconds",
    ),
]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_schedule_round_trips(schedule: Schedule) -> None:
    doc = schedule_to_json(schedule)
    assert schedule_from_json(_stored(doc)) == schedule
    assert schedule_from_json(_api_form(doc, job_pb2.Schedule())) == schedule


def test_schedule_document_is_written_in_full() -> None:
    schedule = Schedule(
        CronSpec("0 * * * *"),
        time_zone="Europe/Berlin",
        end_time=datetime(2026, 12, 31, tzinfo=UTC),
        jitter=timedelta(milliseconds=250),
        dst_gap=GapPolicy.SHIFT,
        max_runs=10,
    )
    assert schedule_to_json(schedule) == {
        "cron": "0 * * * *",
        "time_zone": "Europe/Berlin",
        "end_time": "2026-12-31T00:00:00Z",
        "jitter": "0.250000s",
        "dst": {"gap": "GAP_POLICY_SHIFT", "fold": "FOLD_POLICY_AUTO"},
        "max_runs": "10",
    }
    assert schedule_to_json(Schedule(IntervalSpec(timedelta(seconds=90))))["interval"] == {
        "every": "90s",
        "offset": "0s",
    }


def test_fixed_delay_is_written_only_when_set() -> None:
    """An epoch interval's document is the one written before fixed delays existed (its
    digest, and so the dispatcher's cache, unchanged); a fixed delay says so, as the
    scheduler's SQL reads it (``from_end`` true beside ``every``)."""
    epoch = schedule_to_json(Schedule(IntervalSpec(timedelta(minutes=15))))
    assert "from_end" not in epoch["interval"]
    fixed = schedule_to_json(Schedule(IntervalSpec(timedelta(minutes=15), from_end=True)))
    assert fixed["interval"] == {"every": "900s", "offset": "0s", "from_end": True}
    assert json.loads(json.dumps(fixed))["interval"]["from_end"] is True


@pytest.mark.parametrize(
    ("doc", "schedule"),
    [
        ({"cron": "0 * * * *"}, Schedule(CronSpec("0 * * * *"))),
        ({"cron": "0 * * * *", "time_zone": ""}, Schedule(CronSpec("0 * * * *"))),
        ({"interval": {"every": "60s"}}, Schedule(IntervalSpec(timedelta(minutes=1)))),
        # Numbers are seconds; enums by short name; UNSPECIFIED is the default.
        (
            {
                "interval": {"every": 60, "offset": 1.5},
                "jitter": 2,
                "dst": {"gap": "SKIP", "fold": "FOLD_POLICY_UNSPECIFIED"},
                "max_runs": 3,
            },
            Schedule(
                IntervalSpec(timedelta(minutes=1), timedelta(seconds=1.5)),
                jitter=timedelta(seconds=2),
                dst_gap=GapPolicy.SKIP,
                max_runs=3,
            ),
        ),
        (
            {"once": "2026-07-04T11:30:00+02:00"},
            Schedule(OnceSpec(datetime(2026, 7, 4, 9, 30, tzinfo=UTC))),
        ),
        (
            {"once": "2026-07-04T09:30:00z"},
            Schedule(OnceSpec(datetime(2026, 7, 4, 9, 30, tzinfo=UTC))),
        ),
    ],
)
def test_schedule_reads_missing_fields_as_defaults(doc: dict[str, Any], schedule: Schedule) -> None:
    decoded = schedule_from_json(doc)
    assert decoded == schedule
    assert decoded.time_zone == "UTC"
    assert decoded.start_time is None
    assert decoded.end_time is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({}, "one of cron, interval or once is required"),
        ({"time_zone": "UTC"}, "one of cron, interval or once is required"),
        ({"cron": "* * * * *", "jitter": "soon"}, "schedule.jitter: not a duration"),
        ({"interval": {"every": "1m"}}, "schedule.interval.every: not a duration"),
        ({"once": "2026-07-04T09:30:00"}, "schedule.once: timestamp without offset"),
        ({"once": "tomorrow"}, "schedule.once: not a timestamp"),
        ({"cron": "* * * * *", "end_time": "never"}, "schedule.end_time: not a timestamp"),
    ],
)
def test_schedule_refuses_malformed_documents_naming_the_field(
    doc: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        schedule_from_json(doc)


@settings(max_examples=150, deadline=None, database=None)
@given(
    at=st.datetimes(
        min_value=datetime(1, 1, 1),
        max_value=datetime(9999, 12, 31, 23, 59, 59, 999_999),
        timezones=st.just(UTC),
    ),
    jitter_us=st.integers(min_value=0, max_value=3_600_000_000),
)
def test_any_once_schedule_round_trips(at: datetime, jitter_us: int) -> None:
    schedule = Schedule(OnceSpec(at), jitter=timedelta(microseconds=jitter_us))
    doc = schedule_to_json(schedule)
    assert schedule_from_json(_stored(doc)) == schedule
    assert schedule_from_json(_api_form(doc, job_pb2.Schedule())) == schedule


# --- policies ------------------------------------------------------------------------

CUSTOM_POLICIES = JobPolicies(
    misfire=MisfirePolicy.CATCH_UP,
    misfire_threshold=timedelta(seconds=90),
    catchup_window=timedelta(hours=6),
    max_catchup=7,
    overlap=OverlapPolicy.BUFFER_ALL,
    retry_max_attempts=9,
    retry_base_delay=timedelta(milliseconds=1500),
    retry_max_delay=timedelta(minutes=20),
    run_timeout=timedelta(seconds=45),
    lateness_threshold=timedelta(minutes=2),
    pause_after_consecutive_dead=3,
    priority=1,
    rate_limit_key="crm",
    concurrency_key="customer=42",
)


@pytest.mark.parametrize(
    "policies",
    [
        pytest.param(JobPolicies(), id="defaults"),
        pytest.param(CUSTOM_POLICIES, id="every field"),
        *(
            pytest.param(JobPolicies(overlap=overlap), id=f"overlap {overlap.name}")
            for overlap in OverlapPolicy
        ),
        *(
            pytest.param(JobPolicies(misfire=misfire), id=f"misfire {misfire.name}")
            for misfire in MisfirePolicy
        ),
    ],
)
def test_policies_round_trip(policies: JobPolicies) -> None:
    doc = policies_to_json(policies)
    assert policies_from_json(_stored(doc)) == policies
    assert policies_from_json(_api_form(doc, job_pb2.Policies())) == policies


def test_policies_document_is_written_in_full() -> None:
    assert policies_to_json(CUSTOM_POLICIES) == {
        "misfire": "MISFIRE_POLICY_CATCH_UP",
        "misfire_threshold": "90s",
        "catchup_window": "21600s",
        "max_catchup": 7,
        "overlap": "OVERLAP_POLICY_BUFFER_ALL",
        "retry": {"max_attempts": 9, "base_delay": "1.500000s", "max_delay": "1200s"},
        "run_timeout": "45s",
        "lateness_threshold": "120s",
        "failure": {"pause_after_consecutive_dead": 3},
        "flow": {"priority": 1, "rate_limit_key": "crm", "concurrency_key": "customer=42"},
    }


@pytest.mark.parametrize(
    ("doc", "policies"),
    [
        ({}, JobPolicies()),
        ({"retry": {}}, JobPolicies()),
        ({"retry": None, "misfire": None, "overlap": ""}, JobPolicies()),
        # proto3 zeros are "unset": the default applies.
        (
            {
                "max_catchup": 0,
                "retry": {"max_attempts": 0},
                "misfire": "MISFIRE_POLICY_UNSPECIFIED",
            },
            JobPolicies(),
        ),
        ({"retry": {"max_attempts": 2}}, JobPolicies(retry_max_attempts=2)),
        ({"failure": {}}, JobPolicies()),
        ({"flow": {"priority": 0}}, JobPolicies()),
        (
            {"failure": {"pause_after_consecutive_dead": 1}},
            JobPolicies(pause_after_consecutive_dead=1),
        ),
        (
            {"overlap": "BUFFER_ONE", "run_timeout": 60},
            JobPolicies(overlap=OverlapPolicy.BUFFER_ONE, run_timeout=timedelta(minutes=1)),
        ),
    ],
)
def test_policies_read_missing_fields_as_defaults(
    doc: dict[str, Any], policies: JobPolicies
) -> None:
    assert policies_from_json(doc) == policies


def test_default_policies() -> None:
    assert JobPolicies() == JobPolicies(
        misfire=MisfirePolicy.RUN_ONCE,
        misfire_threshold=DEFAULT_MISFIRE_THRESHOLD,
        catchup_window=DEFAULT_CATCHUP_WINDOW,
        max_catchup=DEFAULT_MAX_CATCHUP,
        overlap=OverlapPolicy.SKIP,
        retry_max_attempts=5,
        retry_base_delay=timedelta(seconds=10),
        retry_max_delay=timedelta(hours=1),
        run_timeout=timedelta(minutes=30),
    )


def test_policies_retry_is_the_state_machines_policy() -> None:
    assert JobPolicies().retry == RetryPolicy(5, timedelta(seconds=10), timedelta(hours=1))
    # The machine's own defaults are the job document's.
    assert JobPolicies().retry == RetryPolicy()
    assert CUSTOM_POLICIES.retry == RetryPolicy(
        max_attempts=9,
        base_delay=timedelta(milliseconds=1500),
        max_delay=timedelta(minutes=20),
    )


def test_policies_refuse_malformed_durations_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"policies\.retry\.base_delay: not a duration"):
        policies_from_json({"retry": {"base_delay": "ten seconds"}})
    with pytest.raises(ValueError, match=r"policies\.run_timeout: not a duration"):
        policies_from_json({"run_timeout": "30m"})


# --- durations -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(seconds=30), "30s"),
        (timedelta(milliseconds=250), "0.250000s"),
        (timedelta(days=1, microseconds=1), "86400.000001s"),
        (timedelta(seconds=-1.5), "-1.500000s"),
        (timedelta(seconds=-30), "-30s"),
    ],
)
def test_duration_text(delta: timedelta, text: str) -> None:
    assert duration_to_json(delta) == text
    assert duration_from_json(text, "d") == delta
    # The protobuf JSON mapping reads it as the same duration.
    parsed = json_format.Parse(json.dumps(text), duration_pb2.Duration())
    assert wire.timedelta_in(parsed, "d") == delta


@settings(max_examples=200, deadline=None, database=None)
@given(micros=st.integers(min_value=-(10**14), max_value=10**14))
def test_any_duration_round_trips(micros: int) -> None:
    delta = timedelta(microseconds=micros)
    text = duration_to_json(delta)
    assert duration_from_json(text, "d") == delta
    parsed = json_format.Parse(json.dumps(text), duration_pb2.Duration())
    assert wire.timedelta_in(parsed, "d") == delta


# --- target --------------------------------------------------------------------------

TARGETS: list[Target] = [
    HttpTarget("https://example.com/hook"),
    HttpTarget(
        "http://10.0.0.7:8080/run?x=1",
        method="PUT",
        headers={"Authorization": "Bearer t", "X-Trace": "é"},
    ),
    GrpcTarget("worker.internal:443"),
    GrpcTarget("127.0.0.1:50051", plaintext=True, metadata={"tenant": "acme"}),
]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: type(t).__name__)
def test_target_round_trips(target: Target) -> None:
    doc = target_to_json(target)
    assert target_from_json(_stored(doc)) == target
    assert target_from_json(_api_form(doc, job_pb2.Target())) == target
    # The stored document and the wire message say the same thing.
    assert wire.target_in(json_format.ParseDict(doc, job_pb2.Target())) == target
    assert (
        target_from_json(
            json_format.MessageToDict(wire.target(target), preserving_proto_field_name=True)
        )
        == target
    )


def test_target_document_is_written_in_full() -> None:
    assert target_to_json(HttpTarget("https://example.com")) == {
        "http": {"url": "https://example.com", "method": "POST", "headers": {}}
    }
    assert target_to_json(GrpcTarget("w:1")) == {
        "grpc": {"address": "w:1", "plaintext": False, "metadata": {}}
    }


@pytest.mark.parametrize(
    ("doc", "target"),
    [
        (None, None),
        ({}, None),
        ({"labels": {}}, None),
        ({"http": {"url": "https://e.com"}}, HttpTarget("https://e.com")),
        (
            {"http": {"url": "https://e.com", "method": "patch"}},
            HttpTarget("https://e.com", "PATCH"),
        ),
        (
            {"http": {"url": "https://e.com", "method": "", "headers": None}},
            HttpTarget("https://e.com"),
        ),
        ({"http": None}, HttpTarget("")),
        ({"grpc": {"address": "w:1"}}, GrpcTarget("w:1")),
        (
            {"grpc": {"address": "w:1", "metadata": {"k": 1}}},
            GrpcTarget("w:1", metadata={"k": "1"}),
        ),
    ],
)
def test_target_reads_missing_fields_as_defaults(
    doc: dict[str, Any] | None, target: Target | None
) -> None:
    assert target_from_json(doc) == target
