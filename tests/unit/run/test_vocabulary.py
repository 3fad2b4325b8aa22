"""The run vocabulary pinned to the wire and to the stored text, and the run's key.

Every member of every run enum is written out below with its proto constant, its
number and its stored text: a proto change that renames or renumbers a value, a member
added on one side only, or a changed ``.value`` (which SQL and the migrations spell as
literals) fails here.
"""

from __future__ import annotations

import enum
import importlib.resources
import re
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from hypothesis import given, settings
from hypothesis import strategies as st

from sundial.core import wire
from sundial.core.errors import InvalidArgument
from sundial.internal.v1 import ledger_pb2
from sundial.run import (
    ACTIVE_STATUSES,
    ENDED_STATUSES,
    FINISHED_STATUSES,
    ErrorClass,
    FenceReason,
    OutcomeStatus,
    RejectReason,
    RunKind,
    RunRef,
    RunStatus,
    SkipReason,
    format_timestamp,
    parse_run_key,
    run_key,
)
from sundial.v1 import run_pb2

# (member, its proto constant, the number written out, the stored/text value)
PINS: list[tuple[enum.Enum, int, int, str]] = [
    (RunStatus.PENDING, run_pb2.RUN_STATUS_PENDING, 1, "pending"),
    (RunStatus.QUEUED, run_pb2.RUN_STATUS_QUEUED, 2, "queued"),
    (RunStatus.RUNNING, run_pb2.RUN_STATUS_RUNNING, 3, "running"),
    (RunStatus.RETRYING, run_pb2.RUN_STATUS_RETRYING, 4, "retrying"),
    (RunStatus.SUCCEEDED, run_pb2.RUN_STATUS_SUCCEEDED, 5, "succeeded"),
    (RunStatus.DEAD, run_pb2.RUN_STATUS_DEAD, 6, "dead"),
    (RunStatus.SKIPPED, run_pb2.RUN_STATUS_SKIPPED, 7, "skipped"),
    (RunStatus.CANCELLED, run_pb2.RUN_STATUS_CANCELLED, 8, "cancelled"),
    (RunKind.SCHEDULED, run_pb2.RUN_KIND_SCHEDULED, 1, "scheduled"),
    (RunKind.MANUAL, run_pb2.RUN_KIND_MANUAL, 2, "manual"),
    (RunKind.BACKFILL, run_pb2.RUN_KIND_BACKFILL, 3, "backfill"),
    (ErrorClass.RETRYABLE, run_pb2.ERROR_CLASS_RETRYABLE, 1, "retryable"),
    (ErrorClass.FINAL, run_pb2.ERROR_CLASS_FINAL, 2, "final"),
    (ErrorClass.TIMEOUT, run_pb2.ERROR_CLASS_TIMEOUT, 3, "timeout"),
    (ErrorClass.CONNECTION, run_pb2.ERROR_CLASS_CONNECTION, 4, "connection"),
    (ErrorClass.REFUSED, run_pb2.ERROR_CLASS_REFUSED, 5, "refused"),
    (ErrorClass.CANCELLED, run_pb2.ERROR_CLASS_CANCELLED, 6, "cancelled"),
    (ErrorClass.LEASE_EXPIRED, run_pb2.ERROR_CLASS_LEASE_EXPIRED, 7, "lease_expired"),
    (
        ErrorClass.TARGET_FORBIDDEN,
        run_pb2.ERROR_CLASS_TARGET_FORBIDDEN,
        8,
        "target_forbidden",
    ),
    (SkipReason.OVERLAP, run_pb2.SKIP_REASON_OVERLAP, 1, "overlap"),
    (SkipReason.BUFFER_FULL, run_pb2.SKIP_REASON_BUFFER_FULL, 2, "buffer_full"),
    (SkipReason.MISFIRE, run_pb2.SKIP_REASON_MISFIRE, 3, "misfire"),
    (OutcomeStatus.SUCCEEDED, ledger_pb2.OUTCOME_STATUS_SUCCEEDED, 1, "succeeded"),
    (
        OutcomeStatus.FAILED_RETRYABLE,
        ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE,
        2,
        "failed_retryable",
    ),
    (OutcomeStatus.FAILED_FINAL, ledger_pb2.OUTCOME_STATUS_FAILED_FINAL, 3, "failed_final"),
    (OutcomeStatus.CANCELLED, ledger_pb2.OUTCOME_STATUS_CANCELLED, 4, "cancelled"),
    (OutcomeStatus.TIMED_OUT, ledger_pb2.OUTCOME_STATUS_TIMED_OUT, 5, "timed_out"),
    (RejectReason.FINISHED, ledger_pb2.REJECT_REASON_FINISHED, 1, "finished"),
    (
        RejectReason.LEASED_ELSEWHERE,
        ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE,
        2,
        "leased_elsewhere",
    ),
    (
        RejectReason.TENANT_AT_CAPACITY,
        ledger_pb2.REJECT_REASON_TENANT_AT_CAPACITY,
        3,
        "tenant_at_capacity",
    ),
    (RejectReason.NOT_FOUND, ledger_pb2.REJECT_REASON_NOT_FOUND, 4, "not_found"),
    (RejectReason.CANCELLED, ledger_pb2.REJECT_REASON_CANCELLED, 5, "cancelled"),
    (RejectReason.NOT_DUE, ledger_pb2.REJECT_REASON_NOT_DUE, 6, "not_due"),
    (RejectReason.ANSWER_FULL, ledger_pb2.REJECT_REASON_ANSWER_FULL, 7, "answer_full"),
    (RejectReason.KEY_AT_CAPACITY, ledger_pb2.REJECT_REASON_KEY_AT_CAPACITY, 8, "key_at_capacity"),
    (FenceReason.STALE_ATTEMPT, ledger_pb2.FENCE_REASON_STALE_ATTEMPT, 1, "stale_attempt"),
    (FenceReason.NOT_RUNNING, ledger_pb2.FENCE_REASON_NOT_RUNNING, 2, "not_running"),
    (FenceReason.NOT_FOUND, ledger_pb2.FENCE_REASON_NOT_FOUND, 3, "not_found"),
    (FenceReason.NOT_HOLDER, ledger_pb2.FENCE_REASON_NOT_HOLDER, 4, "not_holder"),
]

# Each run enum with its proto enum and the prefix of the proto names.
ENUMS: list[tuple[type[enum.Enum], EnumTypeWrapper, str]] = [
    (RunStatus, run_pb2.RunStatus, "RUN_STATUS_"),
    (RunKind, run_pb2.RunKind, "RUN_KIND_"),
    (ErrorClass, run_pb2.ErrorClass, "ERROR_CLASS_"),
    (SkipReason, run_pb2.SkipReason, "SKIP_REASON_"),
    (OutcomeStatus, ledger_pb2.OutcomeStatus, "OUTCOME_STATUS_"),
    (RejectReason, ledger_pb2.RejectReason, "REJECT_REASON_"),
    (FenceReason, ledger_pb2.FenceReason, "FENCE_REASON_"),
]
KINDS = [kind for kind, _, _ in ENUMS]


def test_every_member_of_every_run_enum_is_pinned() -> None:
    pinned = [member for member, _, _, _ in PINS]
    assert len(pinned) == len(set(pinned))
    assert set(pinned) == {member for kind in KINDS for member in kind}


@pytest.mark.parametrize(
    ("member", "constant", "number", "text"),
    [pytest.param(*pin, id=f"{type(pin[0]).__name__}.{pin[0].name}") for pin in PINS],
)
def test_member_is_pinned_to_its_proto_number_and_stored_text(
    member: enum.Enum, constant: int, number: int, text: str
) -> None:
    assert constant == number
    assert wire.enum_out(member) == number
    assert wire.enum_in(type(member), number, "field") is member
    assert member.value == text
    _, proto, prefix = next(e for e in ENUMS if e[0] is type(member))
    assert proto.Name(number) == prefix + member.name


@pytest.mark.parametrize(
    ("kind", "proto", "prefix"), ENUMS, ids=lambda v: getattr(v, "__name__", None)
)
def test_no_proto_value_is_unmapped(
    kind: type[enum.Enum], proto: EnumTypeWrapper, prefix: str
) -> None:
    assert proto.Name(0) == f"{prefix}UNSPECIFIED"
    wire_values = {number for number in proto.values() if number != 0}
    assert {wire.enum_out(member) for member in kind} == wire_values
    for number in wire_values:
        member = wire.enum_in(kind, number, "field")
        assert member is not None
        assert wire.enum_out(member) == number


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_zero_is_unspecified_and_unknown_numbers_name_the_field(kind: type[enum.Enum]) -> None:
    assert wire.enum_out(None) == 0
    assert wire.enum_in(kind, 0, "outcomes[3].status") is None
    beyond = max(wire.enum_out(member) for member in kind) + 1
    for number in (beyond, -1):
        with pytest.raises(InvalidArgument) as caught:
            wire.enum_in(kind, number, "outcomes[3].status")
        assert caught.value.field == "outcomes[3].status"
        assert str(number) in caught.value.problem
        assert str(caught.value).startswith("outcomes[3].status: ")


def test_status_groups() -> None:
    assert {
        RunStatus.PENDING,
        RunStatus.QUEUED,
        RunStatus.RUNNING,
        RunStatus.RETRYING,
    } == ACTIVE_STATUSES
    assert {RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.SKIPPED} == FINISHED_STATUSES
    assert FINISHED_STATUSES | {RunStatus.CANCELLED} == ENDED_STATUSES
    assert set(RunStatus) == ACTIVE_STATUSES | ENDED_STATUSES
    assert not ACTIVE_STATUSES & ENDED_STATUSES
    assert [s for s in RunStatus if s.active] == sorted(ACTIVE_STATUSES, key=list(RunStatus).index)
    assert {s for s in RunStatus if s.ended} == ENDED_STATUSES
    assert {o for o in OutcomeStatus if o.retryable} == {
        OutcomeStatus.FAILED_RETRYABLE,
        OutcomeStatus.TIMED_OUT,
    }


def _check_list(sql: str, column: str) -> set[str]:
    match = re.search(rf"\b{column}\s+text NOT NULL[^,]*?CHECK \({column} IN \(([^)]*)\)\)", sql)
    assert match, f"no CHECK on job_runs.{column}"
    return set(re.findall(r"'([a-z_]+)'", match.group(1)))


def test_job_runs_constraints_spell_the_stored_text() -> None:
    sql = (
        importlib.resources.files("sundial.core.db")
        .joinpath("migrations", "0001_initial.sql")
        .read_text()
    )
    table = sql[sql.index("CREATE TABLE job_runs") :]
    assert _check_list(table, "status") == {s.value for s in RunStatus}
    assert _check_list(table, "kind") == {k.value for k in RunKind}


# --- the run's key --------------------------------------------------------------------

JOB = uuid.UUID("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9")


@pytest.mark.parametrize(
    ("scheduled_at", "key"),
    [
        (datetime(2026, 3, 1, 12, 0, tzinfo=UTC), f"{JOB}@2026-03-01T12:00:00Z"),
        (datetime(2026, 3, 1, 12, 0, 5, 250_000, tzinfo=UTC), f"{JOB}@2026-03-01T12:00:05.250Z"),
        (datetime(2026, 3, 1, 12, 0, 5, 1, tzinfo=UTC), f"{JOB}@2026-03-01T12:00:05.000001Z"),
        (datetime(2026, 3, 1, 12, 0, 5, 123_450, tzinfo=UTC), f"{JOB}@2026-03-01T12:00:05.123450Z"),
        # Four year digits before year 1000, as ToJsonString() writes them.
        (datetime(999, 1, 1, tzinfo=UTC), f"{JOB}@0999-01-01T00:00:00Z"),
        # Another offset is written in UTC: the key names the instant.
        (
            datetime(2026, 3, 1, 13, 30, tzinfo=timezone(timedelta(hours=1, minutes=30))),
            f"{JOB}@2026-03-01T12:00:00Z",
        ),
    ],
)
def test_run_key_format_and_round_trip(scheduled_at: datetime, key: str) -> None:
    ref = RunRef(JOB, scheduled_at)
    assert ref.key == key
    # The protobuf JSON mapping of the same instant (what run.proto's run_key promises).
    ts_json = wire.timestamp(scheduled_at).ToJsonString()
    assert key == f"{JOB}@{ts_json}"
    parsed = RunRef.parse(key)
    assert parsed == ref
    assert parsed.scheduled_at.utcoffset() == timedelta(0)
    assert parse_run_key(key) == (JOB, scheduled_at)


def test_run_key_lower_cases_the_job_id_and_refuses_naive_times() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert run_key(str(JOB).upper(), at) == f"{JOB}@2026-01-01T00:00:00Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        format_timestamp(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    "key",
    [
        "",
        str(JOB),
        f"{JOB}@",
        f"{JOB}@2026-01-01T00:00:00",
        f"{JOB}@2026-01-01T00:00:00+00:00",
        "not-a-uuid@2026-01-01T00:00:00Z",
        f"{JOB}@yesterdayZ",
        f"{JOB}@2026-01-01T00:00:00.1234567Z",  # finer than a microsecond: not truncated
        f"{JOB}@2026-01-01T00:00:00.Z",
        # Other spellings of an instant that fromisoformat takes: not RFC 3339.
        f"{JOB}@2026-01-01 00:00:00Z",
        f"{JOB}@20260101T000000Z",
        f"{JOB}@2026-W01-4T00:00:00Z",
        f"{JOB}@2026-01-01T00Z",
        f"{JOB}@2026-01-01T00:00:00,5Z",
        f"{JOB}@2026-01-01T00:00:00\x00Z",
        f"{JOB}@\u0662026-01-01T00:00:00Z",
    ],
)
def test_parse_refuses_what_is_not_a_run_key(key: str) -> None:
    with pytest.raises(ValueError):
        RunRef.parse(key)


def test_refs_order_by_job_then_occurrence() -> None:
    first, second = uuid.UUID(int=1), uuid.UUID(int=2)
    early = datetime(2026, 1, 1, tzinfo=UTC)
    late = early + timedelta(microseconds=1)
    refs = [RunRef(second, early), RunRef(first, late), RunRef(second, late), RunRef(first, early)]
    assert sorted(refs) == [
        RunRef(first, early),
        RunRef(first, late),
        RunRef(second, early),
        RunRef(second, late),
    ]
    assert RunRef(first, late) < RunRef(second, early)
    assert RunRef(first, early) == RunRef(first, early.astimezone(timezone(timedelta(hours=-5))))
    assert hash(RunRef(first, early)) == hash(RunRef(first, early))


@settings(max_examples=200, deadline=None, database=None)
@given(
    job_id=st.uuids(),
    scheduled_at=st.datetimes(
        min_value=datetime(1, 1, 1),
        max_value=datetime(9999, 12, 31, 23, 59, 59, 999_999),
        timezones=st.just(UTC),
    ),
)
def test_any_ref_round_trips_through_its_key_and_the_wire(
    job_id: uuid.UUID, scheduled_at: datetime
) -> None:
    ref = RunRef(job_id, scheduled_at)
    assert RunRef.parse(ref.key) == ref
    assert ref.key == f"{job_id}@{wire.timestamp(scheduled_at).ToJsonString()}"
    if scheduled_at >= wire.MIN_TIME:
        assert wire.run_ref_in(wire.run_ref(ref), "run") == ref
    else:
        # Inbound instants start at the epoch (arithmetic on them cannot overflow).
        with pytest.raises(InvalidArgument, match=r"^run\.scheduled_at: must be from 1970"):
            wire.run_ref_in(wire.run_ref(ref), "run")


@pytest.mark.parametrize(
    "text",
    [
        str(JOB),
        str(JOB).upper(),
        JOB.hex,
        f"{{{JOB}}}",  # braces and urn: taken by uuid.UUID, not by the fast parse
        f"urn:uuid:{JOB}",
    ],
)
def test_a_job_id_is_read_in_every_spelling_uuid_takes(text: str) -> None:
    parsed = wire.job_id_in(text)
    assert isinstance(parsed, uuid.UUID)
    assert parsed == JOB
    assert hash(parsed) == hash(JOB)
    assert str(parsed) == str(JOB)
    assert RunRef(parsed, datetime(2026, 1, 1, tzinfo=UTC)) == RunRef(
        JOB, datetime(2026, 1, 1, tzinfo=UTC)
    )


@pytest.mark.parametrize(
    "text", ["x", f"{JOB}0", f" {JOB}", str(JOB).replace("-", "_"), f"{str(JOB)[:-1]}g"]
)
def test_a_malformed_job_id_is_refused_naming_its_field(text: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^runs\[0\]\.job_id: .* is not a job id"):
        wire.job_id_in(text, "runs[0].job_id")
