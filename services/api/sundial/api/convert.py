"""Wire messages (``sundial.v1``) to domain values and back, for JobService.

Inbound, unset fields become their documented defaults (an UNSPECIFIED enum, a 0 count,
an unset Duration) and values a domain type cannot hold (an unknown enum number, a
timestamp out of range) are refused here, naming the field; every other limit is checked
by :mod:`sundial.api.validation` on the domain value. Outbound, every default is filled
in, so a read shows what Sundial actually does.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2

from sundial.api.model import (
    GrpcTarget,
    HttpTarget,
    Job,
    JobFilter,
    JobSpec,
    JobStats,
    PreviewEntry,
    Run,
    RunFilter,
    RunKind,
    RunStatus,
    Target,
)
from sundial.run import JobPolicies, OverlapPolicy
from sundial.core.errors import InvalidArgument
from sundial.run import parse_run_key, run_key
from sundial.schedule import (
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
from sundial.v1 import job_pb2, job_service_pb2, run_pb2

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MIN_SECONDS = -62_135_596_800  # 0001-01-01T00:00:00Z
_MAX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z
_MAX_ERROR_BYTES = 4096

_GAP = {1: GapPolicy.AUTO, 2: GapPolicy.SHIFT, 3: GapPolicy.SKIP}
_FOLD = {1: FoldPolicy.AUTO, 2: FoldPolicy.ONCE, 3: FoldPolicy.TWICE}
_MISFIRE = {1: MisfirePolicy.RUN_ONCE, 2: MisfirePolicy.SKIP, 3: MisfirePolicy.CATCH_UP}
_OVERLAP = {
    1: OverlapPolicy.SKIP,
    2: OverlapPolicy.BUFFER_ONE,
    3: OverlapPolicy.BUFFER_ALL,
    4: OverlapPolicy.ALLOW_ALL,
    5: OverlapPolicy.CANCEL_OTHER,
}
_STATUS = {
    RunStatus.PENDING: run_pb2.RUN_STATUS_PENDING,
    RunStatus.QUEUED: run_pb2.RUN_STATUS_QUEUED,
    RunStatus.RUNNING: run_pb2.RUN_STATUS_RUNNING,
    RunStatus.RETRYING: run_pb2.RUN_STATUS_RETRYING,
    RunStatus.SUCCEEDED: run_pb2.RUN_STATUS_SUCCEEDED,
    RunStatus.DEAD: run_pb2.RUN_STATUS_DEAD,
    RunStatus.SKIPPED: run_pb2.RUN_STATUS_SKIPPED,
    RunStatus.CANCELLED: run_pb2.RUN_STATUS_CANCELLED,
}
_STATUS_IN = {number: status for status, number in _STATUS.items()}
_KIND = {
    RunKind.SCHEDULED: run_pb2.RUN_KIND_SCHEDULED,
    RunKind.MANUAL: run_pb2.RUN_KIND_MANUAL,
    RunKind.BACKFILL: run_pb2.RUN_KIND_BACKFILL,
}
_KIND_IN = {number: kind for kind, number in _KIND.items()}
# job_runs.error_class / skip_reason hold the enum names without prefix, lower case.
_ERROR_CLASS = {
    name.removeprefix("ERROR_CLASS_").lower(): number
    for name, number in run_pb2.ErrorClass.items()
    if number
}
_SKIP_REASON = {
    name.removeprefix("SKIP_REASON_").lower(): number
    for name, number in run_pb2.SkipReason.items()
    if number
}
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


def _number(value: Any, table: Mapping[int, Any]) -> int:
    return next(number for number, member in table.items() if member is value)


# --- scalars ------------------------------------------------------------------------------


def timestamp_in(ts: timestamp_pb2.Timestamp, field: str, *, exact: bool = False) -> datetime:
    """A Timestamp as an aware UTC datetime (microseconds).

    Args:
        ts: The message.
        field: Its path, for errors.
        exact: Refuse sub-microsecond nanos (run keys) instead of truncating them.
    """
    if not _MIN_SECONDS <= ts.seconds <= _MAX_SECONDS or not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(field, "timestamp out of range (0001-01-01 to 9999-12-31)")
    if exact and ts.nanos % 1000:
        raise InvalidArgument(field, "must have microsecond precision (nanos a multiple of 1000)")
    return _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)


def optional_timestamp(message: Any, name: str, field: str) -> datetime | None:
    """The Timestamp field ``name`` of ``message`` if set."""
    return timestamp_in(getattr(message, name), field) if message.HasField(name) else None


def timestamp_out(value: datetime) -> timestamp_pb2.Timestamp:
    """An aware datetime as a Timestamp."""
    delta = value - _EPOCH
    seconds, micros = divmod(delta // timedelta(microseconds=1), 1_000_000)
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=micros * 1000)


def duration_in(d: duration_pb2.Duration, field: str) -> timedelta:
    """A Duration as a timedelta (sub-microsecond nanos truncated)."""
    if abs(d.nanos) >= 1_000_000_000 or (d.seconds > 0 > d.nanos) or (d.seconds < 0 < d.nanos):
        raise InvalidArgument(field, "malformed duration")
    if abs(d.seconds) > 315_576_000_000:
        raise InvalidArgument(field, "duration out of range")
    return timedelta(seconds=d.seconds, microseconds=int(d.nanos / 1000))


def duration_out(value: timedelta) -> duration_pb2.Duration:
    """A timedelta as a Duration."""
    micros = value // timedelta(microseconds=1)
    sign = -1 if micros < 0 else 1
    seconds, rest = divmod(abs(micros), 1_000_000)
    return duration_pb2.Duration(seconds=sign * seconds, nanos=sign * rest * 1000)


def job_id_in(text: str, field: str = "job_id") -> uuid.UUID:
    """A job id string (required)."""
    if not text:
        raise InvalidArgument(field, "is required")
    try:
        return uuid.UUID(text)
    except ValueError:
        raise InvalidArgument(field, f"{text!r} is not a job id (a UUID)") from None


def run_ref_in(request: Any) -> tuple[uuid.UUID, datetime]:
    """The run named by a request's ``oneof run {RunRef ref; string run_key}``."""
    which = request.WhichOneof("run")
    if which == "ref":
        ref = request.ref
        if not ref.HasField("scheduled_at"):
            raise InvalidArgument("ref.scheduled_at", "is required")
        return job_id_in(ref.job_id, "ref.job_id"), timestamp_in(
            ref.scheduled_at, "ref.scheduled_at", exact=True
        )
    if which == "run_key":
        try:
            job_id, at = parse_run_key(request.run_key)
        except ValueError:
            raise InvalidArgument(
                "run_key", "must be '<job_id>@<RFC 3339 UTC time ending in Z>'"
            ) from None
        return job_id, at.astimezone(UTC)
    raise InvalidArgument("run", "one of ref or run_key is required")


# --- schedules and policies ---------------------------------------------------------------


def schedule_in(message: job_pb2.Schedule, field: str = "schedule") -> Schedule:
    """A wire schedule as a domain schedule (limits are checked later)."""
    which = message.WhichOneof("spec")
    spec: Spec
    if which == "cron":
        spec = CronSpec(message.cron)
    elif which == "interval":
        spec = IntervalSpec(
            every=duration_in(message.interval.every, f"{field}.interval.every"),
            offset=duration_in(message.interval.offset, f"{field}.interval.offset"),
        )
    elif which == "once":
        spec = OnceSpec(timestamp_in(message.once, f"{field}.once"))
    else:
        raise InvalidArgument(field, "one of cron, interval or once is required")
    return Schedule(
        spec=spec,
        time_zone=message.time_zone or "UTC",
        start_time=optional_timestamp(message, "start_time", f"{field}.start_time"),
        end_time=optional_timestamp(message, "end_time", f"{field}.end_time"),
        jitter=duration_in(message.jitter, f"{field}.jitter"),
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
    spec = schedule.spec
    if isinstance(spec, CronSpec):
        message.cron = spec.expression
    elif isinstance(spec, IntervalSpec):
        message.interval.every.CopyFrom(duration_out(spec.every))
        message.interval.offset.CopyFrom(duration_out(spec.offset))
    else:
        message.once.CopyFrom(timestamp_out(spec.at))
    if schedule.start_time is not None:
        message.start_time.CopyFrom(timestamp_out(schedule.start_time))
    if schedule.end_time is not None:
        message.end_time.CopyFrom(timestamp_out(schedule.end_time))
    message.jitter.CopyFrom(duration_out(schedule.jitter))
    return message


def _duration_or(message: Any, name: str, default: timedelta, field: str) -> timedelta:
    return duration_in(getattr(message, name), field) if message.HasField(name) else default


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
    )


@functools.lru_cache(maxsize=1024)
def policies_out(policies: JobPolicies) -> job_pb2.Policies:
    """Effective policies as their wire form.

    Cached: most jobs share a few policy sets. Callers copy the result into a parent
    message (the constructor and ``CopyFrom`` copy), never mutate it.
    """
    return job_pb2.Policies(
        misfire=_number(policies.misfire, _MISFIRE),
        misfire_threshold=duration_out(policies.misfire_threshold),
        catchup_window=duration_out(policies.catchup_window),
        max_catchup=policies.max_catchup,
        overlap=_number(policies.overlap, _OVERLAP),
        retry=job_pb2.RetryPolicy(
            max_attempts=policies.retry_max_attempts,
            base_delay=duration_out(policies.retry_base_delay),
            max_delay=duration_out(policies.retry_max_delay),
        ),
        run_timeout=duration_out(policies.run_timeout),
    )


def target_in(message: job_pb2.Target) -> Target | None:
    """A wire target, or None when no kind is set."""
    which = message.WhichOneof("kind")
    if which == "http":
        http = message.http
        return HttpTarget(url=http.url, method=http.method, headers=dict(http.headers))
    if which == "grpc":
        grpc_target = message.grpc
        return GrpcTarget(
            address=grpc_target.address,
            plaintext=grpc_target.plaintext,
            metadata=dict(grpc_target.metadata),
        )
    return None


def target_out(target: Target | None) -> job_pb2.Target:
    """A domain target as its wire form."""
    if isinstance(target, HttpTarget):
        return job_pb2.Target(
            http=job_pb2.HttpTarget(
                url=target.url, method=target.method, headers=dict(target.headers)
            )
        )
    if isinstance(target, GrpcTarget):
        return job_pb2.Target(
            grpc=job_pb2.GrpcTarget(
                address=target.address,
                plaintext=target.plaintext,
                metadata=dict(target.metadata),
            )
        )
    return job_pb2.Target()


# --- jobs ---------------------------------------------------------------------------------


def job_spec_in(message: job_pb2.Job) -> JobSpec:
    """The input fields of a wire job (output-only fields are ignored)."""
    if not message.HasField("schedule"):
        raise InvalidArgument("schedule", "is required")
    return JobSpec(
        name=message.name,
        schedule=schedule_in(message.schedule),
        target=target_in(message.target),
        description=message.description,
        payload=message.payload,
        policies=policies_in(message.policies),
        labels=dict(message.labels),
        paused=message.paused,
        pause_note=message.pause_note,
    )


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
            getattr(message, name).CopyFrom(timestamp_out(value))
    if stats.last_lateness is not None:
        message.last_lateness.CopyFrom(duration_out(stats.last_lateness))
    return message


def job_out(job: Job) -> job_pb2.Job:
    """A stored job as its wire form, defaults filled in."""
    spec = job.spec
    message = job_pb2.Job(
        job_id=str(job.job_id),
        tenant_id=job.tenant_id,
        name=spec.name,
        description=spec.description,
        schedule=schedule_out(spec.schedule),
        target=target_out(spec.target),
        payload=spec.payload,
        policies=policies_out(spec.policies),
        labels=dict(spec.labels),
        paused=spec.paused,
        pause_note=spec.pause_note,
        version=job.version,
        create_time=timestamp_out(job.create_time),
        update_time=timestamp_out(job.update_time),
        stats=_stats_out(job.stats),
    )
    if job.next_run_at is not None:
        message.next_run_at.CopyFrom(timestamp_out(job.next_run_at))
    return message


def job_filter_in(request: job_service_pb2.ListJobsRequest) -> JobFilter:
    """ListJobs' filters."""
    return JobFilter(
        labels=dict(request.labels),
        name_prefix=request.name_prefix,
        paused=request.paused if request.HasField("paused") else None,
    )


# --- runs ---------------------------------------------------------------------------------


def run_out(run: Run) -> run_pb2.Run:
    """A run as its wire form."""
    error = run.last_error
    if len(error.encode()) > _MAX_ERROR_BYTES:
        error = error.encode()[:_MAX_ERROR_BYTES].decode(errors="ignore")
    message = run_pb2.Run(
        job_id=str(run.job_id),
        scheduled_at=timestamp_out(run.scheduled_at),
        run_key=run_key(run.job_id, run.scheduled_at),
        kind=_KIND[run.kind],
        status=_STATUS[run.status],
        attempt=run.attempt,
        executor_id=run.executor_id,
        last_error=error,
        error_class=_ERROR_CLASS.get(run.error_class, 0),
        skip_reason=_SKIP_REASON.get(run.skip_reason, 0),
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
            getattr(message, name).CopyFrom(timestamp_out(value))
    if run.create_time is not None:
        message.create_time.CopyFrom(timestamp_out(run.create_time))
    if run.lateness is not None and run.kind is not RunKind.MANUAL:
        message.lateness.CopyFrom(duration_out(run.lateness))
    if run.last_grpc_code is not None:
        message.last_grpc_code = run.last_grpc_code
    return message


def run_filter_in(request: job_service_pb2.ListRunsRequest) -> RunFilter:
    """ListRuns' filters."""
    statuses = frozenset(
        _enum(value, _STATUS_IN, None, f"statuses[{i}]") for i, value in enumerate(request.statuses)
    )
    kinds = frozenset(
        _enum(value, _KIND_IN, None, f"kinds[{i}]") for i, value in enumerate(request.kinds)
    )
    if None in statuses:
        raise InvalidArgument("statuses", "RUN_STATUS_UNSPECIFIED is not a status")
    if None in kinds:
        raise InvalidArgument("kinds", "RUN_KIND_UNSPECIFIED is not a kind")
    return RunFilter(
        statuses=statuses,
        kinds=kinds,
        scheduled_after=optional_timestamp(request, "scheduled_after", "scheduled_after"),
        scheduled_before=optional_timestamp(request, "scheduled_before", "scheduled_before"),
    )


# --- previews -----------------------------------------------------------------------------


def fire_time_out(entry: PreviewEntry) -> job_service_pb2.FireTime:
    """One preview entry; a skipped gap time has no instant and a naive local time."""
    fire = entry.fire
    annotation = _ANNOTATION[fire.annotation]
    message = job_service_pb2.FireTime(
        annotation=annotation, note=fire.note or "", dropped=fire.dropped
    )
    if annotation == job_service_pb2.DST_ANNOTATION_GAP_SKIPPED:
        message.local_time = fire.wall.replace(tzinfo=None).isoformat()
        return message
    message.local_time = fire.local.isoformat()
    message.at.CopyFrom(timestamp_out(fire.at))
    if entry.due_at is not None:
        message.due_at.CopyFrom(timestamp_out(entry.due_at))
    return message
