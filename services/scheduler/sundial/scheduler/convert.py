"""Wire conversion: domain values <-> sundial.v1 protobuf messages (and the bus codec)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from sundial.core.errors import InvalidArgument
from sundial.run import run_key
from sundial.scheduler.model import PublishBatch, RunRef
from sundial.v1 import events_pb2, job_pb2, run_pb2

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp(at: datetime) -> Timestamp:
    """A protobuf Timestamp of an aware datetime (microsecond precision)."""
    ts = Timestamp()
    ts.FromDatetime(at.astimezone(UTC))
    return ts


def duration(delta: timedelta) -> Duration:
    """A protobuf Duration of a timedelta."""
    d = Duration()
    d.FromTimedelta(delta)
    return d


def to_datetime(ts: Timestamp) -> datetime:
    """An aware UTC datetime of a Timestamp (nanoseconds below a microsecond dropped)."""
    return _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)


def run_ref_to_pb(ref: RunRef) -> run_pb2.RunRef:
    """The wire form of a run reference."""
    return run_pb2.RunRef(job_id=str(ref.job_id), scheduled_at=timestamp(ref.scheduled_at))


def run_ref_from_pb(ref: run_pb2.RunRef, field: str) -> RunRef:
    """Parse a wire run reference.

    Raises:
        InvalidArgument: The job id is not a UUID or scheduled_at is missing or not a
            whole number of microseconds.
    """
    try:
        job_id = uuid.UUID(ref.job_id)
    except ValueError:
        raise InvalidArgument(f"{field}.job_id", f"not a job id: {ref.job_id!r}") from None
    if not ref.HasField("scheduled_at"):
        raise InvalidArgument(f"{field}.scheduled_at", "is required")
    if ref.scheduled_at.nanos % 1000:
        raise InvalidArgument(f"{field}.scheduled_at", "must have microsecond precision")
    return RunRef(job_id, to_datetime(ref.scheduled_at))


def message_id(batch: PublishBatch) -> str:
    """The JetStream Nats-Msg-Id of a dispatch: ``<run key of runs[0]>#<dispatch_seq>``."""
    first = batch.runs[0]
    return f"{run_key(first.job_id, first.scheduled_at)}#{batch.dispatch_seq}"


def encode_run_dispatch(batch: PublishBatch, node_id: str, now: datetime) -> bytes:
    """The RunDispatch message body of ``batch``."""
    return events_pb2.RunDispatch(
        partition=batch.partition,
        dispatch_seq=batch.dispatch_seq,
        dispatched_at=timestamp(now),
        runs=[run_ref_to_pb(ref) for ref in batch.runs],
        node_id=node_id,
    ).SerializeToString()


def target_to_pb(doc: dict[str, Any] | None) -> job_pb2.Target:
    """A job's stored target document (proto JSON mapping) as a Target message."""
    return json_format.ParseDict(doc or {}, job_pb2.Target(), ignore_unknown_fields=True)


RUN_STATUS = {
    "pending": run_pb2.RUN_STATUS_PENDING,
    "queued": run_pb2.RUN_STATUS_QUEUED,
    "running": run_pb2.RUN_STATUS_RUNNING,
    "retrying": run_pb2.RUN_STATUS_RETRYING,
    "succeeded": run_pb2.RUN_STATUS_SUCCEEDED,
    "dead": run_pb2.RUN_STATUS_DEAD,
    "skipped": run_pb2.RUN_STATUS_SKIPPED,
    "cancelled": run_pb2.RUN_STATUS_CANCELLED,
}

RUN_KIND = {
    "scheduled": run_pb2.RUN_KIND_SCHEDULED,
    "manual": run_pb2.RUN_KIND_MANUAL,
    "backfill": run_pb2.RUN_KIND_BACKFILL,
}

ERROR_CLASS_NAMES = {
    run_pb2.ERROR_CLASS_RETRYABLE: "retryable",
    run_pb2.ERROR_CLASS_FINAL: "final",
    run_pb2.ERROR_CLASS_TIMEOUT: "timeout",
    run_pb2.ERROR_CLASS_CONNECTION: "connection",
    run_pb2.ERROR_CLASS_REFUSED: "refused",
    run_pb2.ERROR_CLASS_CANCELLED: "cancelled",
    run_pb2.ERROR_CLASS_LEASE_EXPIRED: "lease_expired",
}
ERROR_CLASS = {name: value for value, name in ERROR_CLASS_NAMES.items()}


def encode_dead_letter(
    row: Any, *, attempt: int, last_error: str, error_class: str, now: datetime
) -> bytes:
    """The DeadLetter body of a run that died; ``row`` is a dead run row with its
    letter content (``claim_dead_letters`` or ``dead_letters_of``)."""
    key = run_key(row["job_id"], row["scheduled_at"])
    run = run_pb2.Run(
        job_id=str(row["job_id"]),
        scheduled_at=timestamp(row["scheduled_at"]),
        run_key=key,
        kind=RUN_KIND.get(row["kind"], run_pb2.RUN_KIND_UNSPECIFIED),
        status=run_pb2.RUN_STATUS_DEAD,
        attempt=attempt,
        executor_id=row["executor_id"] or "",
        finished_at=timestamp(now),
        last_error=last_error,
        error_class=ERROR_CLASS.get(error_class, run_pb2.ERROR_CLASS_UNSPECIFIED),
    )
    if row["started_at"]:
        run.started_at.CopyFrom(timestamp(row["started_at"]))
    return events_pb2.DeadLetter(
        run=run,
        tenant_id=row["tenant_id"],
        target=target_to_pb(row["target"]),
        payload=bytes(row["payload"] or b""),
        last_error=last_error,
        error_class=run.error_class,
        died_at=timestamp(now),
        job_name=row["job_name"] or "",
        labels={str(k): str(v) for k, v in (row["labels"] or {}).items()},
    ).SerializeToString()
