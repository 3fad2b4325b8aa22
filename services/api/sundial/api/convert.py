"""Wire messages (``sundial.v1``) to domain values and back, for JobService.

Inbound, unset fields become their documented defaults (an UNSPECIFIED enum, a 0 count,
an unset Duration) and values a domain type cannot hold (an unknown enum number, a
timestamp out of range) are refused here, naming the field; every other limit is checked
by :mod:`sundial.api.validation` on the domain value. Outbound, every default is filled
in, so a read shows what Sundial actually does.

Only what is JobService's own is here: schedules, policies, jobs, runs as JobService
shows them, filters and previews. Timestamps, durations, ids, run references, targets
and the run vocabulary's enums are converted by :mod:`sundial.core.wire`, as in every
service.
"""

from __future__ import annotations

import enum
import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from sundial.api.model import (
    ApplyOutcome,
    CalendarSpec,
    Job,
    JobFilter,
    JobRef,
    JobRevision,
    JobStats,
    PreviewEntry,
    Run,
    RunFilter,
    Slo,
    StoredCalendar,
    TenantEgress,
    as_revised,
)
from sundial.api.notifications import Channel, ChannelSpec
from sundial.api.validation import is_client_job_id
from sundial.core import wire
from sundial.core.errors import InvalidArgument
from sundial.job import JobPolicies, JobSpec, OverlapPolicy
from sundial.notify import EventKind
from sundial.run import RunKind, RunRef, RunStatus, truncate_error
from sundial.schedule import (
    MAX_SPECS,
    CalendarKind,
    CronSpec,
    DstAnnotation,
    FoldPolicy,
    GapPolicy,
    IntervalSpec,
    MisfirePolicy,
    OnceSpec,
    Schedule,
    Spec,
)
from sundial.v1 import calendar_pb2, egress_pb2, job_pb2, job_service_pb2, run_pb2

E = TypeVar("E", bound=enum.Enum)


def _by_name(kind: type[E], wrapper: EnumTypeWrapper, prefix: str) -> dict[int, E]:
    """Proto number -> member, matched by name (``GapPolicy.SKIP`` <-> ``GAP_POLICY_SKIP``)."""
    return {wrapper.Value(prefix + member.name): member for member in kind}


# The schedule and policy enums are the API's alone (the stored document spells them by
# name, sundial.run); the run vocabulary's are sundial.core.wire's.
_GAP = _by_name(GapPolicy, job_pb2.GapPolicy, "GAP_POLICY_")
_FOLD = _by_name(FoldPolicy, job_pb2.FoldPolicy, "FOLD_POLICY_")
_MISFIRE = _by_name(MisfirePolicy, job_pb2.MisfirePolicy, "MISFIRE_POLICY_")
_OVERLAP = _by_name(OverlapPolicy, job_pb2.OverlapPolicy, "OVERLAP_POLICY_")
_ANNOTATION = {
    None: job_service_pb2.DST_ANNOTATION_NONE,
    DstAnnotation.SHIFTED_GAP: job_service_pb2.DST_ANNOTATION_GAP_SHIFTED,
    # Two gap times shifted onto one instant: the merged one is a shifted time that does
    # not run on its own (it is dropped).
    DstAnnotation.MERGED_GAP: job_service_pb2.DST_ANNOTATION_GAP_SHIFTED,
    DstAnnotation.SKIPPED_GAP: job_service_pb2.DST_ANNOTATION_GAP_SKIPPED,
    DstAnnotation.FOLD_FIRST: job_service_pb2.DST_ANNOTATION_FOLD_FIRST,
    DstAnnotation.FOLD_SECOND: job_service_pb2.DST_ANNOTATION_FOLD_SECOND,
    DstAnnotation.SKIPPED_FOLD_SECOND: job_service_pb2.DST_ANNOTATION_FOLD_SKIPPED,
}


def _enum(value: int, table: Mapping[int, Any], default: Any, field: str) -> Any:
    if value == 0:
        return default
    try:
        return table[value]
    except KeyError:
        raise InvalidArgument(field, f"unknown value {value}") from None


def _number(value: Any, table: Mapping[int, Any]) -> Any:
    # Any, as wire.enum_out: an int at run time, which protobuf takes for any enum field,
    # while the generated stubs type each field with its own enum's ValueType.
    return next(number for number, member in table.items() if member is value)


# --- requests naming a job or a run ------------------------------------------------------


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


def run_ref_in(request: Any) -> tuple[JobRef, datetime]:
    """The run named by a request's ``oneof run {RunRef ref; string run_key}``: its job
    (a run key holds a uid; a ref may name the job by its client id) and scheduled_at."""
    which = request.WhichOneof("run")
    if which == "ref":
        # Checked before the job id: a request with neither is told about scheduled_at,
        # as it always was.
        if not request.ref.HasField("scheduled_at"):
            raise InvalidArgument("ref.scheduled_at", "is required")
        job = job_ref_in(request.ref.job_id, "ref.job_id")
        return job, wire.timestamp_in(request.ref.scheduled_at, "ref.scheduled_at", exact=True)
    if which == "run_key":
        try:
            ref = RunRef.parse(request.run_key)
        except ValueError:
            raise InvalidArgument(
                "run_key", "must be '<job uid>@<RFC 3339 UTC time ending in Z>'"
            ) from None
        return ref.job_id, ref.scheduled_at
    raise InvalidArgument("run", "one of ref or run_key is required")


# --- schedules and policies ---------------------------------------------------------------


def _spec_in(message: Any, which: str | None, field: str) -> Spec:
    """One spec of a Schedule (its ``spec`` oneof) or of a ScheduleSpec (``kind``)."""
    if which == "cron":
        return CronSpec(message.cron)
    if which == "interval":
        return IntervalSpec(
            every=wire.timedelta_in(message.interval.every, f"{field}.interval.every"),
            offset=wire.timedelta_in(message.interval.offset, f"{field}.interval.offset"),
        )
    if which == "once":
        return OnceSpec(wire.timestamp_in(message.once, f"{field}.once"))
    raise InvalidArgument(field, "one of cron, interval or once is required")


def _spec_out(spec: Spec, message: Any) -> None:
    if isinstance(spec, CronSpec):
        message.cron = spec.expression
    elif isinstance(spec, IntervalSpec):
        message.interval.every.CopyFrom(wire.duration(spec.every))
        message.interval.offset.CopyFrom(wire.duration(spec.offset))
    else:
        message.once.CopyFrom(wire.timestamp(spec.at))


def schedule_in(message: job_pb2.Schedule, field: str = "schedule") -> Schedule:
    """A wire schedule as a domain schedule (limits are checked later)."""
    which = message.WhichOneof("spec")
    if message.specs:
        if which is not None:
            raise InvalidArgument(
                f"{field}.specs", f"must not be set together with {field}.{which}"
            )
        if len(message.specs) > MAX_SPECS:
            raise InvalidArgument(
                f"{field}.specs", f"at most {MAX_SPECS} specs, got {len(message.specs)}"
            )
        specs = [
            _spec_in(s, s.WhichOneof("kind"), f"{field}.specs[{i}]")
            for i, s in enumerate(message.specs)
        ]
    else:
        specs = [_spec_in(message, which, field)]
    return Schedule(
        spec=specs[0],
        more_specs=tuple(specs[1:]),
        spec_list=bool(message.specs),
        calendars=tuple(message.calendars),
        time_zone=message.time_zone or "UTC",
        start_time=wire.optional_timestamp(message, "start_time", f"{field}.start_time"),
        end_time=wire.optional_timestamp(message, "end_time", f"{field}.end_time"),
        jitter=wire.timedelta_in(message.jitter, f"{field}.jitter"),
        dst_gap=_enum(message.dst.gap, _GAP, GapPolicy.AUTO, f"{field}.dst.gap"),
        dst_fold=_enum(message.dst.fold, _FOLD, FoldPolicy.AUTO, f"{field}.dst.fold"),
        max_runs=message.max_runs,
    )


@functools.lru_cache(maxsize=4096)
def schedule_out(schedule: Schedule) -> job_pb2.Schedule:
    """A domain schedule as its wire form, every default filled in.

    Cached like :func:`policies_out` (imports share a few schedules); never mutate it.
    """
    message = job_pb2.Schedule(
        time_zone=schedule.time_zone or "UTC",
        max_runs=schedule.max_runs,
        dst=job_pb2.DstPolicy(
            gap=_number(schedule.dst_gap, _GAP), fold=_number(schedule.dst_fold, _FOLD)
        ),
    )
    if schedule.spec_list:
        for spec in schedule.specs:
            _spec_out(spec, message.specs.add())
    else:
        _spec_out(schedule.spec, message)
    message.calendars.extend(schedule.calendars)
    if schedule.start_time is not None:
        message.start_time.CopyFrom(wire.timestamp(schedule.start_time))
    if schedule.end_time is not None:
        message.end_time.CopyFrom(wire.timestamp(schedule.end_time))
    message.jitter.CopyFrom(wire.duration(schedule.jitter))
    return message


def _duration_or(message: Any, name: str, default: timedelta, field: str) -> timedelta:
    return wire.timedelta_in(getattr(message, name), field) if message.HasField(name) else default


def policies_in(message: job_pb2.Policies) -> JobPolicies:
    """Wire policies with every unset field taking its default."""
    d = JobPolicies()
    retry = message.retry
    return JobPolicies(
        misfire=_enum(message.misfire, _MISFIRE, d.misfire, "policies.misfire"),
        misfire_threshold=_duration_or(
            message, "misfire_threshold", d.misfire_threshold, "policies.misfire_threshold"
        ),
        catchup_window=_duration_or(
            message, "catchup_window", d.catchup_window, "policies.catchup_window"
        ),
        max_catchup=message.max_catchup or d.max_catchup,
        overlap=_enum(message.overlap, _OVERLAP, d.overlap, "policies.overlap"),
        retry_max_attempts=retry.max_attempts or d.retry_max_attempts,
        retry_base_delay=_duration_or(
            retry, "base_delay", d.retry_base_delay, "policies.retry.base_delay"
        ),
        retry_max_delay=_duration_or(
            retry, "max_delay", d.retry_max_delay, "policies.retry.max_delay"
        ),
        run_timeout=_duration_or(message, "run_timeout", d.run_timeout, "policies.run_timeout"),
        lateness_threshold=_duration_or(
            message, "lateness_threshold", d.lateness_threshold, "policies.lateness_threshold"
        ),
        pause_after_consecutive_dead=message.failure.pause_after_consecutive_dead,
    )


@functools.lru_cache(maxsize=1024)
def policies_out(policies: JobPolicies) -> job_pb2.Policies:
    """Effective policies as their wire form.

    Cached: most jobs share a few policy sets. Callers copy the result into a parent
    message (the constructor and ``CopyFrom`` copy), never mutate it.
    """
    return job_pb2.Policies(
        misfire=_number(policies.misfire, _MISFIRE),
        misfire_threshold=wire.duration(policies.misfire_threshold),
        catchup_window=wire.duration(policies.catchup_window),
        max_catchup=policies.max_catchup,
        overlap=_number(policies.overlap, _OVERLAP),
        retry=job_pb2.RetryPolicy(
            max_attempts=policies.retry_max_attempts,
            base_delay=wire.duration(policies.retry_base_delay),
            max_delay=wire.duration(policies.retry_max_delay),
        ),
        run_timeout=wire.duration(policies.run_timeout),
        lateness_threshold=wire.duration(policies.lateness_threshold),
        failure=job_pb2.FailurePolicy(
            pause_after_consecutive_dead=policies.pause_after_consecutive_dead
        ),
    )


# --- jobs ---------------------------------------------------------------------------------


def job_spec_in(message: job_pb2.Job, memo: dict[object, Any] | None = None) -> JobSpec:
    """The input fields of a wire job (output-only fields are ignored).

    Args:
        memo: Shared by the jobs of one request (BatchCreateJobs): each distinct schedule,
            target and policy set (by its encoding) is converted once, and the jobs that
            share it share the value, so the checks keyed by it find it at once.
    """
    if not message.HasField("schedule"):
        raise InvalidArgument("schedule", "is required")
    return JobSpec(
        name=message.name,
        schedule=_converted(memo, schedule_in, message.schedule),
        target=_converted(memo, wire.target_in, message.target),
        description=message.description,
        payload=message.payload,
        policies=_converted(memo, policies_in, message.policies),
        labels=dict(message.labels),
        paused=message.paused,
        pause_note=message.pause_note,
    )


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


def job_out(job: Job, memo: dict[object, Any] | None = None) -> job_pb2.Job:
    """A stored job as its wire form, defaults filled in.

    Args:
        memo: Shared by the jobs of one answer (:func:`jobs_out`): each distinct
            schedule, target, policy set, instant and stats value is converted once.
    """
    spec = job.spec
    once = _Once(memo if memo is not None else {})
    message = job_pb2.Job(
        job_id=job.client_id or str(job.job_id),
        uid=str(job.job_id),
        tenant_id=job.tenant_id,
        name=spec.name,
        description=spec.description,
        schedule=once(schedule_out, spec.schedule),
        target=once(wire.target, spec.target),
        payload=spec.payload,
        policies=once(policies_out, spec.policies),
        labels=dict(spec.labels),
        paused=spec.paused,
        pause_note=spec.pause_note,
        version=job.version,
        create_time=once(wire.timestamp, job.create_time),
        update_time=once(wire.timestamp, job.update_time),
        stats=once(_stats_out, job.stats),
    )
    if job.next_run_at is not None:
        message.next_run_at.CopyFrom(once(wire.timestamp, job.next_run_at))
    return message


def jobs_out(jobs: Sequence[Job], *, full: bool = True) -> list[job_pb2.Job]:
    """Many jobs as their wire forms (a batch shares most of its values); without
    ``full``, as JOB_VIEW_BASIC shows them."""
    memo: dict[object, Any] = {}
    if full:
        return [job_out(job, memo) for job in jobs]
    return [basic_view(job_out(job, memo)) for job in jobs]


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
        self._memo = memo

    def __call__(self, convert: Callable[[Any], Any], value: Any) -> Any:
        try:
            key = (convert, value)
            found = self._memo.get(key)
        except TypeError:  # unhashable: converted on its own
            return convert(value)
        if found is None:
            found = self._memo[key] = convert(value)
        return found


_OUTCOME = {
    ApplyOutcome.CREATED: job_service_pb2.APPLY_OUTCOME_CREATED,
    ApplyOutcome.UPDATED: job_service_pb2.APPLY_OUTCOME_UPDATED,
    ApplyOutcome.UNCHANGED: job_service_pb2.APPLY_OUTCOME_UNCHANGED,
}


def outcome_out(outcome: ApplyOutcome) -> job_service_pb2.ApplyOutcome:
    """ApplyJob's outcome as its wire enum."""
    return _OUTCOME[outcome]


def job_filter_in(request: job_service_pb2.ListJobsRequest) -> JobFilter:
    """ListJobs' filters."""
    return JobFilter(
        labels=dict(request.labels),
        name_prefix=request.name_prefix,
        paused=request.paused if request.HasField("paused") else None,
        target_forbidden=request.target_forbidden,
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


# --- runs ---------------------------------------------------------------------------------


def run_out(run: Run) -> run_pb2.Run:
    """A run as its wire form."""
    message = run_pb2.Run(
        job_id=str(run.job_id),
        scheduled_at=wire.timestamp(run.scheduled_at),
        run_key=run.run_key,
        kind=wire.enum_out(run.kind),
        status=wire.enum_out(run.status),
        attempt=run.attempt,
        executor_id=run.executor_id,
        last_error=truncate_error(run.last_error),
        error_class=wire.enum_out(run.error_class),
        skip_reason=wire.enum_out(run.skip_reason),
        cancel_requested=run.cancel_requested,
        replay_count=run.replay_count,
        last_http_status=run.last_http_status,
    )
    for name in (
        "lease_until",
        "started_at",
        "finished_at",
        "next_attempt_at",
        "due_at",
    ):
        value = getattr(run, name)
        if value is not None:
            getattr(message, name).CopyFrom(wire.timestamp(value))
    if run.create_time is not None:
        message.create_time.CopyFrom(wire.timestamp(run.create_time))
    if run.lateness is not None and run.kind is not RunKind.MANUAL:
        message.lateness.CopyFrom(wire.duration(run.lateness))
    if run.last_grpc_code is not None:
        message.last_grpc_code = run.last_grpc_code
    return message


def run_filter_in(request: job_service_pb2.ListRunsRequest) -> RunFilter:
    """ListRuns' filters."""
    statuses = [
        wire.enum_in(RunStatus, value, f"statuses[{i}]") for i, value in enumerate(request.statuses)
    ]
    kinds = [wire.enum_in(RunKind, value, f"kinds[{i}]") for i, value in enumerate(request.kinds)]
    if None in statuses:
        raise InvalidArgument("statuses", "RUN_STATUS_UNSPECIFIED is not a status")
    if None in kinds:
        raise InvalidArgument("kinds", "RUN_KIND_UNSPECIFIED is not a kind")
    return RunFilter(
        statuses=frozenset(status for status in statuses if status is not None),
        kinds=frozenset(kind for kind in kinds if kind is not None),
        scheduled_after=wire.optional_timestamp(request, "scheduled_after", "scheduled_after"),
        scheduled_before=wire.optional_timestamp(request, "scheduled_before", "scheduled_before"),
    )


# --- previews -----------------------------------------------------------------------------


def fire_time_out(entry: PreviewEntry) -> job_service_pb2.FireTime:
    """One preview entry; a skipped gap time has no instant and a naive local time."""
    fire = entry.fire
    annotation = _ANNOTATION[fire.annotation]
    message = job_service_pb2.FireTime(
        annotation=annotation,
        note=fire.note or "",
        dropped=fire.dropped,
        spec_index=fire.spec_index,
        calendar=fire.calendar,
    )
    if annotation == job_service_pb2.DST_ANNOTATION_GAP_SKIPPED:
        message.local_time = fire.wall.replace(tzinfo=None).isoformat()
        return message
    message.local_time = fire.local.isoformat()
    message.at.CopyFrom(wire.timestamp(fire.at))
    if entry.due_at is not None:
        message.due_at.CopyFrom(wire.timestamp(entry.due_at))
    return message


def slo_out(slo: Slo) -> job_service_pb2.JobSlo:
    """One window of a job's SLO."""
    return job_service_pb2.JobSlo(
        window=wire.duration(slo.window),
        window_start=wire.timestamp(slo.window_start),
        as_of=wire.timestamp(slo.as_of),
        lateness_threshold=wire.duration(slo.lateness_threshold),
        due=slo.due,
        on_time=slo.on_time,
        late=slo.late,
        missed=slo.missed,
        skipped=slo.skipped,
        failed=slo.failed,
    )


# --- calendars ----------------------------------------------------------------------------

_CALENDAR_KIND = _by_name(CalendarKind, calendar_pb2.CalendarKind, "CALENDAR_KIND_")


def calendar_in(message: calendar_pb2.Calendar, field: str = "calendar") -> CalendarSpec:
    """A wire calendar as what a tenant defines (limits checked by validation)."""
    if message.kind == calendar_pb2.CALENDAR_KIND_UNSPECIFIED:
        kind = None
    else:
        kind = _enum(message.kind, _CALENDAR_KIND, None, f"{field}.kind")
    return CalendarSpec(
        name=message.name,
        description=message.description,
        kind=kind,
        dates=tuple(message.dates),
    )


def calendar_out(calendar: StoredCalendar) -> calendar_pb2.Calendar:
    """A stored calendar, dates normalised."""
    message = calendar_pb2.Calendar(
        name=calendar.calendar.name,
        description=calendar.description,
        kind=_number(calendar.calendar.kind, _CALENDAR_KIND),
        dates=calendar.calendar.entries(),
        version=calendar.calendar.version,
    )
    message.create_time.CopyFrom(wire.timestamp(calendar.create_time))
    message.update_time.CopyFrom(wire.timestamp(calendar.update_time))
    return message


# --- notification channels ----------------------------------------------------------------

_KIND_PREFIX = "NOTIFICATION_EVENT_KIND_"


def event_kind_in(number: int, field: str) -> EventKind:
    """A wire event kind (UNSPECIFIED and unknown numbers refused)."""
    try:
        name = job_service_pb2.NotificationEventKind.Name(number)
    except ValueError:
        raise InvalidArgument(field, f"unknown event kind {number}") from None
    member = EventKind.__members__.get(name.removeprefix(_KIND_PREFIX))
    if member is None:
        raise InvalidArgument(field, "an event kind is required (not UNSPECIFIED)")
    return member


def event_kind_out(kind: EventKind) -> job_service_pb2.NotificationEventKind:
    """An event kind's wire number."""
    return getattr(job_service_pb2, _KIND_PREFIX + kind.name)


def channel_spec_in(message: job_service_pb2.NotificationChannel) -> ChannelSpec:
    """The input fields of a wire channel."""
    return ChannelSpec(
        display_name=message.display_name,
        target=wire.target_in(message.target) if message.HasField("target") else None,
        event_kinds=tuple(
            event_kind_in(kind, f"channel.event_kinds[{i}]")
            for i, kind in enumerate(message.event_kinds)
        ),
        digest_window=(
            wire.timedelta_in(message.digest_window, "channel.digest_window")
            if message.HasField("digest_window")
            else timedelta(0)
        ),
    )


def channel_out(channel: Channel) -> job_service_pb2.NotificationChannel:
    """A stored channel on the wire."""
    spec = channel.spec
    return job_service_pb2.NotificationChannel(
        channel_id=str(channel.channel_id),
        display_name=spec.display_name,
        target=wire.target(spec.target),
        event_kinds=[event_kind_out(kind) for kind in spec.event_kinds],
        digest_window=wire.duration(spec.digest_window),
        version=channel.version,
        create_time=wire.timestamp(channel.created_at),
        update_time=wire.timestamp(channel.updated_at),
    )
