"""Jobs: a request's job reference, the spec in, the stored job out (views, revisions,
apply outcomes, list filters), the egress policy in force."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sundial.api.convert._schedule import policies_in, policies_out, schedule_in, schedule_out
from sundial.api.convert._secrets import target_out
from sundial.api.model import (
    ApplyOutcome,
    Job,
    JobFilter,
    JobRef,
    JobRevision,
    JobStats,
    TenantEgress,
    as_revised,
)
from sundial.api.selector import parse_selector
from sundial.api.validation import is_client_job_id
from sundial.core import wire
from sundial.core.errors import InvalidArgument
from sundial.job import JobSpec
from sundial.v1 import egress_pb2, job_pb2, job_service_pb2


def job_ref_in(text: str, field: str = "job_id") -> JobRef:
    """A request's job reference: a uid (any form ``uuid.UUID`` reads), or a client id.

    Raises:
        InvalidArgument: Empty, or text that can be neither (job_service.proto).
    """
    if not text:
        raise InvalidArgument(field, "is required")
    try:
        return uuid.UUID(text)
    except ValueError:
        pass
    if is_client_job_id(text):
        return text
    shown = text if len(text) <= 80 else text[:80] + "..."
    raise InvalidArgument(
        field,
        f"{shown!r} is neither a job id (1-63 characters of a-z, 0-9 and '-', starting with "
        "a letter) nor a uid (a UUID)",
    )


def job_spec_in(message: job_pb2.Job, memo: dict[object, Any] | None = None) -> JobSpec:
    """The input fields of a wire job (output-only fields are ignored).

    Args:
        memo: Shared by the jobs of one request (BatchCreateJobs): each distinct schedule,
            target and policy set (by its encoding) is converted once, and the jobs that
            share it share the value, so the checks keyed by it find it at once.
    """
    if not message.HasField("schedule"):
        raise InvalidArgument("schedule", "is required")
    schedule, target, policies = _shared_parts(memo, message)
    return JobSpec(
        name=message.name,
        schedule=schedule,
        target=target,
        description=message.description,
        payload=message.payload,
        policies=policies,
        labels={key: message.labels[key] for key in message.labels},
        paused=message.paused,
        pause_note=message.pause_note,
    )


def _shared_parts(memo: dict[object, Any] | None, message: job_pb2.Job) -> tuple[Any, Any, Any]:
    """The job's schedule, target and policies converted, in that order; with ``memo``,
    a combination met before is found with one look-up (a batch holds a few), each part
    still shared by its own encoding with the jobs that combine it differently."""
    if memo is None:
        return (
            schedule_in(message.schedule),
            wire.target_in(message.target),
            policies_in(message.policies),
        )
    key = (
        _shared_parts,
        message.schedule.SerializeToString(deterministic=True),
        message.target.SerializeToString(deterministic=True),
        message.policies.SerializeToString(deterministic=True),
    )
    found = memo.get(key)
    if found is None:
        found = memo[key] = (
            _converted(memo, schedule_in, message.schedule),
            _converted(memo, wire.target_in, message.target),
            _converted(memo, policies_in, message.policies),
        )
    parts: tuple[Any, Any, Any] = found
    return parts


def _converted(memo: dict[object, Any] | None, convert: Callable[[Any], Any], message: Any) -> Any:
    if memo is None:
        return convert(message)
    key = (convert, message.SerializeToString(deterministic=True))
    found = memo.get(key)
    if found is None:  # a conversion that fails raises for the first job that has it
        found = memo[key] = convert(message)
    return found


def _stats_out(stats: JobStats) -> job_pb2.JobStats:
    message = job_pb2.JobStats(
        total_runs=stats.total_runs,
        succeeded=stats.succeeded,
        failed=stats.failed,
        skipped_misfires=stats.skipped_misfires,
        skipped_overlaps=stats.skipped_overlaps,
        cancelled=stats.cancelled,
        scheduled_occurrences=stats.scheduled_occurrences,
    )
    for name in ("last_fire_time", "last_success_time", "last_failure_time"):
        value = getattr(stats, name)
        if value is not None:
            getattr(message, name).CopyFrom(wire.timestamp(value))
    if stats.last_lateness is not None:
        message.last_lateness.CopyFrom(wire.duration(stats.last_lateness))
    return message


def revision_out(
    job: Job, revision: JobRevision, *, full: bool = True
) -> job_service_pb2.JobRevision:
    """One revision of ``job`` (the job as it is now, for its ids); without ``full``, as
    JOB_VIEW_BASIC shows it."""
    revised = job_out(as_revised(job, revision))
    message = job_service_pb2.JobRevision(
        version=revision.version,
        job=revised if full else basic_view(revised),
        changed_fields=revision.changed_fields,
        changed_by=revision.changed_by or "",
        request_id=revision.request_id or "",
    )
    message.create_time.CopyFrom(wire.timestamp(revision.create_time))
    return message


def job_out(
    job: Job,
    memo: dict[object, Any] | None = None,
    *,
    shown: bool = True,
    into: Any = None,
) -> job_pb2.Job:
    """A stored job as its wire form, defaults filled in.

    Args:
        memo: Shared by the jobs of one answer (:func:`jobs_out`): the parts jobs share
            (schedule, target and policy objects, tenant, times, stats) are built once
            as a template message each job is copied from; each distinct instant is
            converted once.
        shown: As reads show it (an inline credential redacted). False only for the
            server's own use of the form (UpdateJob's merge), never for an answer.
        into: An answer's repeated field of jobs to add it to (so it is not copied
            again into the answer); None: a message of its own.
    """
    message = job_pb2.Job() if into is None else into.add()
    _fill(message, job, _Once(memo if memo is not None else {}), shown)
    return message


def _fill(message: job_pb2.Job, job: Job, once: _Once, shown: bool) -> None:
    """:func:`job_out` into an empty ``message``."""
    spec = job.spec
    # The shared fields from the template (one C copy), then the job's own, each set
    # only when not its default (setting one is a call; updating a map is dearer still).
    message.CopyFrom(_template(job, once, shown))
    uid = str(job.job_id)
    message.job_id = job.client_id or uid
    message.uid = uid
    message.name = spec.name
    if spec.description:
        message.description = spec.description
    if spec.payload:
        message.payload = spec.payload
    if spec.labels:
        labels = message.labels
        for key, value in spec.labels.items():
            labels[key] = value
    if spec.paused:
        message.paused = True
    if spec.pause_note:
        message.pause_note = spec.pause_note
    message.version = job.version
    if job.next_run_at is not None:
        message.next_run_at.CopyFrom(once(wire.timestamp, job.next_run_at))
    if job.pause_until is not None:
        message.pause_until.CopyFrom(wire.timestamp(job.pause_until))


def _template(job: Job, once: _Once, shown: bool) -> job_pb2.Job:
    """The fields of ``job`` the jobs of one answer share, as one message: a batch's
    jobs share their schedule, target, policy and stats objects, tenant and times."""
    spec = job.spec
    key = (
        _template,
        id(spec.schedule),
        id(spec.target),
        id(spec.policies),
        job.tenant_id,
        job.create_time,
        job.update_time,
        id(job.stats),
        shown,
    )
    found = once.memo.get(key)
    if found is None:
        template = job_pb2.Job(
            tenant_id=job.tenant_id,
            schedule=once(schedule_out, spec.schedule),
            target=once(target_out if shown else wire.target, spec.target),
            policies=once(policies_out, spec.policies),
            create_time=once(wire.timestamp, job.create_time),
            update_time=once(wire.timestamp, job.update_time),
            stats=once(_stats_out, job.stats),
        )
        # The objects are kept with their template: their ids are not reused meanwhile.
        found = once.memo[key] = (spec.schedule, spec.target, spec.policies, job.stats, template)
    result: job_pb2.Job = found[-1]
    return result


def jobs_out(jobs: Sequence[Job], *, full: bool = True, into: Any = None) -> list[job_pb2.Job]:
    """Many jobs as their wire forms (a batch shares most of its values); without
    ``full``, as JOB_VIEW_BASIC shows them.

    Args:
        into: An answer's repeated ``jobs`` field to add them to (none copied again);
            None: new messages.
    """
    once = _Once({})
    add = job_pb2.Job if into is None else into.add
    out = []
    for job in jobs:  # job_out's steps, the per-call setup once for all
        message = add()
        _fill(message, job, once, True)
        out.append(message if full else basic_view(message))
    return out


def basic_view(job: job_pb2.Job) -> job_pb2.Job:
    """``job`` as JOB_VIEW_BASIC shows it: no payload, header and metadata values empty
    (their names kept)."""
    job.ClearField("payload")
    kind = job.target.WhichOneof("kind")
    headers = job.target.http.headers if kind == "http" else None
    if kind == "grpc":
        headers = job.target.grpc.metadata
    if headers is not None:
        for name in list(headers):
            headers[name] = ""
    return job


def view_in(view: int, default: int) -> bool:
    """Whether a request's ``view`` asks for the full job (``default`` when unset).

    Raises:
        InvalidArgument: Not a JobView.
    """
    if view not in job_service_pb2.JobView.values():
        raise InvalidArgument("view", f"unknown view {view}")
    return (view or default) == job_service_pb2.JOB_VIEW_FULL


class _Once:
    """``convert(value)`` once per distinct (converter, value); the messages built are
    copied into each job (protobuf copies a sub-message it is given)."""

    def __init__(self, memo: dict[object, Any]) -> None:
        self.memo = memo

    def __call__(self, convert: Callable[[Any], Any], value: Any) -> Any:
        try:
            key = (convert, value)
            found = self.memo.get(key)
        except TypeError:  # unhashable: converted on its own
            return convert(value)
        if found is None:
            found = self.memo[key] = convert(value)
        return found


_OUTCOME = {
    ApplyOutcome.CREATED: job_service_pb2.APPLY_OUTCOME_CREATED,
    ApplyOutcome.UPDATED: job_service_pb2.APPLY_OUTCOME_UPDATED,
    ApplyOutcome.UNCHANGED: job_service_pb2.APPLY_OUTCOME_UNCHANGED,
}


def outcome_out(outcome: ApplyOutcome) -> job_service_pb2.ApplyOutcome:
    """ApplyJob's outcome as its wire enum."""
    return _OUTCOME[outcome]


def job_filter_in(request: Any) -> JobFilter:
    """The job filters of ListJobs, CountJobs or a bulk action (each has the fields it
    has: selector, search, name_prefix, and ListJobs' labels, paused, target_forbidden);
    the selector parsed (INVALID_ARGUMENT naming ``selector``)."""
    fields = request.DESCRIPTOR.fields_by_name
    return JobFilter(
        labels=dict(request.labels) if "labels" in fields else {},
        name_prefix=request.name_prefix,
        paused=request.paused if "paused" in fields and request.HasField("paused") else None,
        target_forbidden=request.target_forbidden if "target_forbidden" in fields else False,
        selector=parse_selector(request.selector),
        search=request.search,
    )


def egress_out(view: TenantEgress) -> egress_pb2.EffectiveEgressPolicy:
    """The egress policy in force for a tenant."""
    message = egress_pb2.EffectiveEgressPolicy(
        policy=wire.egress_policy(view.policy),
        tenant_specific=view.tenant_specific,
        loopback_allowed=view.loopback_allowed,
    )
    if view.update_time is not None:
        message.update_time.CopyFrom(wire.timestamp(view.update_time))
    return message
