"""Translation between RunLedger/bus wire messages and the executor's domain types.

The only executor module (with the gRPC target client) that imports ``sundial.v1``
types, so the rest of the executor never depends on protobuf.
"""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from sundial.executor.model import GrpcTarget, HttpTarget, Lease, Report, RunId, Target
from sundial.v1 import events_pb2, job_pb2, ledger_pb2, run_pb2

__all__ = [
    "decode_dispatch",
    "lease_from_grant",
    "run_from_ref",
    "run_to_ref",
    "seconds",
    "to_duration",
    "to_outcome",
    "to_timestamp",
]

# The effective default of Policies.run_timeout, used if a grant ever comes without one.
DEFAULT_RUN_TIMEOUT_S = 30 * 60.0


def to_timestamp(at: datetime) -> Timestamp:
    """A protobuf Timestamp for a timezone-aware datetime."""
    stamp = Timestamp()
    stamp.FromDatetime(at.astimezone(UTC))
    return stamp


def to_duration(seconds_: float) -> Duration:
    """A protobuf Duration of ``seconds_`` (microsecond precision)."""
    duration = Duration()
    duration.FromMicroseconds(round(seconds_ * 1_000_000))
    return duration


def seconds(duration: Duration) -> float:
    """A Duration in seconds."""
    return duration.seconds + duration.nanos / 1e9


def run_from_ref(ref: run_pb2.RunRef) -> RunId:
    """The domain id of a RunRef."""
    return RunId(ref.job_id, ref.scheduled_at.ToDatetime(tzinfo=UTC))


def run_to_ref(run: RunId) -> run_pb2.RunRef:
    """The RunRef of a domain id."""
    return run_pb2.RunRef(job_id=run.job_id, scheduled_at=to_timestamp(run.scheduled_at))


def decode_dispatch(data: bytes) -> list[run_pb2.RunRef]:
    """The runs of a RunDispatch message body.

    Raises:
        ValueError: The body is not a RunDispatch, or carries no usable run.
    """
    dispatch = events_pb2.RunDispatch()
    try:
        dispatch.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError; be robust to variants
        raise ValueError(f"not a RunDispatch: {exc}") from None
    if not dispatch.runs:
        raise ValueError("RunDispatch without runs")
    for ref in dispatch.runs:
        if not ref.job_id or not ref.HasField("scheduled_at"):
            raise ValueError("RunDispatch with an incomplete RunRef")
    return list(dispatch.runs)


def _target(target: job_pb2.Target) -> Target:
    kind = target.WhichOneof("kind")
    if kind == "http":
        return HttpTarget(
            url=target.http.url,
            method=(target.http.method or "POST").upper(),
            headers=tuple(sorted(target.http.headers.items())),
        )
    if kind == "grpc":
        return GrpcTarget(
            address=target.grpc.address,
            plaintext=target.grpc.plaintext,
            metadata=tuple(sorted(target.grpc.metadata.items())),
        )
    raise ValueError("grant without a target")


def lease_from_grant(ref: run_pb2.RunRef, grant: ledger_pb2.Grant) -> Lease:
    """The domain lease of a Grant.

    Raises:
        ValueError: The grant has no target.
    """
    run = run_from_ref(ref)
    timeout = seconds(grant.run_timeout) if grant.HasField("run_timeout") else 0.0
    return Lease(
        run=run,
        attempt=grant.attempt,
        lease_until=grant.lease_until.ToDatetime(tzinfo=UTC),
        target=_target(grant.target),
        payload=grant.payload,
        run_timeout_s=timeout if timeout > 0 else DEFAULT_RUN_TIMEOUT_S,
        tenant_id=grant.tenant_id,
        run_key=grant.run_key or run.key,
        signature=grant.signature,
        job_name=grant.job_name,
        kind=run_pb2.RunKind.Name(grant.kind),
    )


def to_outcome(report: Report) -> ledger_pb2.Outcome:
    """The wire Outcome of a report."""
    outcome = report.outcome
    message = ledger_pb2.Outcome(
        run=run_to_ref(report.run),
        attempt=report.attempt,
        status=int(outcome.status),
        error=outcome.error.encode()[:4096].decode(errors="ignore"),
        error_class=int(outcome.error_class),
        started_at=to_timestamp(outcome.started_at),
        finished_at=to_timestamp(outcome.finished_at),
        http_status=outcome.http_status,
    )
    if outcome.retry_after_s is not None:
        message.retry_after.CopyFrom(to_duration(min(outcome.retry_after_s, 86_400.0)))
    if outcome.grpc_code is not None:
        message.grpc_code = outcome.grpc_code
    return message
