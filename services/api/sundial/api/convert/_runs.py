"""Runs: the run a request names, a run out, ListRuns' filters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sundial.api.convert._jobs import job_ref_in
from sundial.api.model import (
    JobRef,
    Run,
    RunFilter,
)
from sundial.core import wire
from sundial.core.errors import InvalidArgument
from sundial.run import RunKind, RunRef, RunStatus, truncate_error
from sundial.v1 import job_service_pb2, run_pb2


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
        started_after=wire.optional_timestamp(request, "started_after", "started_after"),
        started_before=wire.optional_timestamp(request, "started_before", "started_before"),
        late_only=request.late_only,
    )
