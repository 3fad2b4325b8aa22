"""Every field of ``sundial.v1.Job`` survives wire -> domain -> stored row -> domain -> wire.

The job is built from the descriptor, not by hand: every field, recursively, is set to a
non-default legal value, so a field added to ``job.proto`` is in the test at once, and
one forgotten at any site (the API's conversion in or out, :class:`sundial.job.JobSpec`,
the stored document codec, the store's row mapping) makes the answer differ from the
request. A oneof cannot have all its members at once: each variant of the job takes
another member (and a repeated message gets one element per member of its oneofs), and
the test checks that the variants together set every field path of the descriptor.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.api import field_behavior_pb2
from google.protobuf import descriptor
from google.protobuf.message import Message

from sundial.api import convert
from sundial.api.model import NewJob
from sundial.api.servicer import client_id_in
from sundial.api.store._base import job_from_row, queries
from sundial.api.store._params import NAMED_PARAMS, InsertJobs, UpdateJob
from sundial.core.db import json_text
from sundial.job import spec_from_columns, spec_to_columns
from sundial.v1 import job_pb2

FD = descriptor.FieldDescriptor

OUTPUT_ONLY = frozenset(
    {
        # Written by the API and the scheduler on the jobs and job_stats rows, never taken
        # from a request (job.proto marks each OUTPUT_ONLY); job_from_row maps them.
        "tenant_id",
        "uid",
        "next_run_at",
        "version",
        "create_time",
        "update_time",
        "stats",
        "pause_until",
    }
)
"""Top-level fields of ``Job`` this test leaves out: output-only, not a job's definition."""

ALTERNATIVES = {
    # A schedule has one spec (the `spec` oneof) or a list of them (`specs`), never both
    # (job.proto; convert.schedule_in refuses the two together): the list is one more
    # member of the oneof here.
    ("sundial.v1.Schedule", "spec"): ("specs",),
}

STRINGS = {
    # Strings the conversions read for their meaning need a legal value; any other
    # string field gets its own path as its value.
    "job_id": "nightly-report",  # a client-chosen id (job_service.proto)
    "schedule.time_zone": "Europe/Berlin",
    "cron": "*/5 * * * *",  # schedule.cron and schedule.specs[i].cron
    "method": "PUT",  # stored upper-case: a lower-case method would come back changed
}

WHEN = datetime(2027, 3, 4, 5, 6, 7, 890_123, tzinfo=UTC)


def _oneof_groups(message: descriptor.Descriptor) -> list[tuple[str, ...]]:
    """The field names of each oneof of ``message``, alternatives included."""
    groups = []
    for oneof in message.oneofs:
        extra = ALTERNATIVES.get((message.full_name, oneof.name), ())
        groups.append((*(f.name for f in oneof.fields), *extra))
    return groups


def _variants(message: descriptor.Descriptor) -> int:
    """How many variants it takes to set every oneof member of ``message``, and of the
    messages it holds (repeated ones are filled with all their members at once)."""
    count = max((len(group) for group in _oneof_groups(message)), default=1)
    for field in message.fields:
        if field.type == FD.TYPE_MESSAGE and not _is_leaf(field) and not _is_repeated(field):
            count = max(count, _variants(field.message_type))
    return count


def _is_repeated(field: descriptor.FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _is_map(field: descriptor.FieldDescriptor) -> bool:
    return (
        field.type == FD.TYPE_MESSAGE
        and _is_repeated(field)
        and field.message_type.GetOptions().map_entry
    )


def _is_leaf(field: descriptor.FieldDescriptor) -> bool:
    """Timestamps and durations are values, not messages to walk."""
    return field.type == FD.TYPE_MESSAGE and field.message_type.full_name in (
        "google.protobuf.Timestamp",
        "google.protobuf.Duration",
    )


def _unique(path: str, modulo: int) -> int:
    """A number of its own for each field path (two fields swapped at a site differ)."""
    return zlib.crc32(path.encode()) % modulo


def _scalar(field: descriptor.FieldDescriptor, path: str, variant: int) -> Any:
    """A non-default legal value of a scalar field (enums: another member per variant)."""
    if field.type == FD.TYPE_STRING:
        return STRINGS.get(path, STRINGS.get(field.name, path.replace(".", "-")))
    if field.type == FD.TYPE_BYTES:
        return b"\x00\x01" + path.encode()
    if field.type == FD.TYPE_BOOL:
        return True
    if field.type == FD.TYPE_ENUM:
        members = sorted(value.number for value in field.enum_type.values if value.number)
        return members[variant % len(members)]
    if field.cpp_type in (FD.CPPTYPE_INT32, FD.CPPTYPE_INT64, FD.CPPTYPE_UINT32, FD.CPPTYPE_UINT64):
        return 2 + _unique(path, 50)
    raise AssertionError(f"{path}: no value for field type {field.type}")


def _set_leaf(message: Message, field: descriptor.FieldDescriptor, path: str) -> None:
    target = getattr(message, field.name)
    if field.message_type.full_name == "google.protobuf.Timestamp":
        target.FromDatetime(WHEN + timedelta(minutes=_unique(path, 10_000)))
    else:
        target.FromSeconds(60 + _unique(path, 1000))
        target.nanos = 250_000_000  # a fraction, microsecond-exact


def fill(message: Message, variant: int, path: str, seen: set[str]) -> None:
    """Set every field of ``message`` (one member per oneof: the ``variant``-th),
    recording each field path set in ``seen``."""
    chosen: set[str] = set()
    skipped: set[str] = set()
    for group in _oneof_groups(message.DESCRIPTOR):
        pick = group[variant % len(group)]
        chosen.add(pick)
        skipped.update(name for name in group if name != pick)
    for field in message.DESCRIPTOR.fields:
        if field.name in skipped:
            continue
        here = f"{path}.{field.name}" if path else field.name
        if not path and field.name in OUTPUT_ONLY:
            continue
        seen.add(here)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            getattr(message, field.name)["k-" + field.name] = _scalar(value_field, here, variant)
        elif _is_leaf(field):
            _set_leaf(message, field, here)
        elif field.type == FD.TYPE_MESSAGE and _is_repeated(field):
            for element in range(_variants(field.message_type)):
                fill(getattr(message, field.name).add(), element, here, seen)
        elif field.type == FD.TYPE_MESSAGE:
            fill(getattr(message, field.name), variant, here, seen)
        elif _is_repeated(field):
            getattr(message, field.name).append(_scalar(field, here, variant))
        else:
            setattr(message, field.name, _scalar(field, here, variant))


def every_path(message: descriptor.Descriptor, path: str = "") -> Iterator[str]:
    """Every field path of ``message``, recursively (leaves and maps not walked)."""
    for field in message.fields:
        if not path and field.name in OUTPUT_ONLY:
            continue
        here = f"{path}.{field.name}" if path else field.name
        yield here
        if field.type == FD.TYPE_MESSAGE and not _is_leaf(field) and not _is_map(field):
            yield from every_path(field.message_type, here)


VARIANTS = range(_variants(job_pb2.Job.DESCRIPTOR))


def wanted_job(variant: int, seen: set[str] | None = None) -> job_pb2.Job:
    job = job_pb2.Job()
    fill(job, variant, "", seen if seen is not None else set())
    return job


def stored(columns: dict[str, Any]) -> dict[str, Any]:
    """The columns as PostgreSQL gives them back: the jsonb ones through JSON text."""
    row = dict(columns)
    for name in ("schedule", "target", "policies", "labels"):
        row[name] = json.loads(json.dumps(row[name]))
    return row


def round_trip(wanted: job_pb2.Job) -> job_pb2.Job:
    # wire -> domain, as CreateJob reads a job
    spec = convert.job_spec_in(wanted)
    client_id = client_id_in(wanted.job_id, "job.job_id")
    # domain -> the stored definition -> domain, as the store writes and reads it
    row = stored(spec_to_columns(spec))
    assert spec_from_columns(row) == spec
    row.update(
        # The jobs and job_stats columns no definition field lives in.
        job_id=uuid.uuid4(),
        tenant_id="t",
        partition_id=3,
        next_run_at=None,
        version=1,
        created_at=WHEN,
        updated_at=WHEN,
        fired_count=0,
        last_fire_at=None,
        last_success_at=None,
        last_failure_at=None,
        succeeded_count=0,
        dead_count=0,
        missed_count=0,
        skipped_count=0,
        cancelled_count=0,
        last_lateness_ms=None,
        client_job_id=client_id,
        calendars=None,
        pause_until=None,
    )
    job = job_from_row(row)
    assert job.spec == spec
    # domain -> wire, as every read answers
    answer = convert.job_out(job)
    for name in OUTPUT_ONLY:
        answer.ClearField(name)
    return answer


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_field_of_a_job_survives_the_round_trip(variant: int) -> None:
    wanted = wanted_job(variant)
    assert round_trip(wanted) == wanted


def test_the_variants_set_every_field_of_the_descriptor() -> None:
    seen: set[str] = set()
    for variant in VARIANTS:
        wanted_job(variant, seen)
    assert set(every_path(job_pb2.Job.DESCRIPTOR)) - seen == set()


def test_a_field_the_domain_drops_fails_the_round_trip() -> None:
    """The check itself: a field lost at one site is seen (here: the stored labels)."""
    wanted = wanted_job(0)
    spec = convert.job_spec_in(wanted)
    row = stored(spec_to_columns(spec))
    row["labels"] = {}
    assert spec_from_columns(row) != spec


def test_the_output_only_list_names_only_output_only_fields() -> None:
    """An input field cannot hide in the exclusions: each is OUTPUT_ONLY in job.proto."""
    fields = job_pb2.Job.DESCRIPTOR.fields_by_name
    for name in OUTPUT_ONLY:
        assert name in fields
        assert _behaviours(fields[name]) == ["OUTPUT_ONLY"], name


def _behaviours(field: descriptor.FieldDescriptor) -> list[str]:
    options = field.GetOptions()
    values = options.Extensions[field_behavior_pb2.field_behavior]
    return [field_behavior_pb2.FieldBehavior.Name(value) for value in values]


def _unstored(text: str) -> Any:
    return json.loads(text)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_field_reaches_the_write_parameters_under_its_own_name(variant: int) -> None:
    """insert_jobs' and update_job's parameters (bound to the SQL by name) each carry
    the field they are named for: one filled from another field, or left out, makes
    the definition read back from them differ (update_job writes no pause state:
    PauseJob and ResumeJob do)."""
    spec = convert.job_spec_in(wanted_job(variant))
    new = NewJob(job_id=uuid.uuid4(), spec=spec, partition_id=3, next_run_at=WHEN)
    insert = InsertJobs.of("t", [new], WHEN, "")
    inserted = {
        "name": insert.names[0],
        "schedule": _unstored(insert.schedules[0]),
        "target": _unstored(insert.targets[0]),
        "description": insert.descriptions[0],
        "payload": insert.payloads[0],
        "policies": _unstored(insert.policies[0]),
        "labels": _unstored(insert.labels[0]),
        "paused": insert.paused[0],
        "pause_note": insert.pause_notes[0],
    }
    assert spec_from_columns(inserted) == spec
    assert insert.labels[0] == json_text(spec.labels)  # written directly, as the codec would
    assert (insert.job_ids, insert.partition_ids, insert.next_run_ats) == (
        [new.job_id],
        [3],
        [WHEN],
    )
    update = UpdateJob.of(
        "t",
        new.job_id,
        spec,
        read_version=1,
        reschedule=True,
        next_run_at=WHEN,
        now=WHEN,
        calendars=(),
    )
    updated = stored(
        {
            "name": update.name,
            "schedule": update.schedule,
            "target": update.target,
            "description": update.description,
            "payload": update.payload,
            "policies": update.policies,
            "labels": update.labels,
            "paused": spec.paused,
            "pause_note": spec.pause_note,
        }
    )
    assert spec_from_columns(updated) == spec


NAMED_QUERIES = sorted({name for name in queries if queries.query(name).params})


def test_the_named_queries_are_those_with_a_parameters_class() -> None:
    assert {"insert_jobs", "update_job"} <= set(NAMED_QUERIES)
    assert set(NAMED_PARAMS) == set(NAMED_QUERIES)


@pytest.mark.parametrize("name", NAMED_QUERIES)
def test_every_named_query_has_a_parameters_class_with_exactly_its_names(name: str) -> None:
    """A parameter the SQL reads and the class lacks, or a field the SQL never reads,
    fails here without a database (and at the first call)."""
    assert name in NAMED_PARAMS, f"named query {name!r} has no class in store._params"
    queries.check_params(name, NAMED_PARAMS[name])
