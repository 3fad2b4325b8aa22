"""The scheduler's own wire messages: the bus codec (RunDispatch, DeadLetter) and grants.

Scalars, run references, targets and enums go through :mod:`sundial.core.wire`.
"""

from __future__ import annotations

from datetime import datetime

from google.protobuf import timestamp_pb2

from sundial.core import wire
from sundial.internal.v1 import events_pb2
from sundial.run import RunStatus
from sundial.scheduler.model import DeadLetterRun, PublishBatch
from sundial.v1 import run_pb2

__all__ = ["encode_dead_letter", "encode_run_dispatch", "message_id"]


def message_id(batch: PublishBatch) -> str:
    """The JetStream Nats-Msg-Id of a dispatch: ``<run key of runs[0]>#<dispatch_seq>``."""
    return f"{batch.runs[0].key}#{batch.dispatch_seq}"


def encode_run_dispatch(batch: PublishBatch, node_id: str, now: datetime) -> bytes:
    """The RunDispatch message body of ``batch``."""
    message = events_pb2.RunDispatch(
        partition=batch.partition,
        dispatch_seq=batch.dispatch_seq,
        dispatched_at=wire.timestamp(now),
        node_id=node_id,
    )
    # A herd's runs share a few instants: convert each once (wire.run_ref per run).
    stamps: dict[datetime, timestamp_pb2.Timestamp] = {}
    for ref in batch.runs:
        stamp = stamps.get(ref.scheduled_at)
        if stamp is None:
            stamp = stamps[ref.scheduled_at] = wire.timestamp(ref.scheduled_at)
        message.runs.add(job_id=str(ref.job_id), scheduled_at=stamp)
    if batch.tenants:
        index: dict[str, int] = {}
        for tenant in batch.tenants:
            at = index.get(tenant)
            if at is None:
                at = index[tenant] = len(index)
            message.run_tenants.append(at)
        message.tenants.extend(index)
        message.tenant_weights.extend(batch.weights.get(tenant, 0) for tenant in index)
    return message.SerializeToString()


DEAD_LETTER_MAX_BYTES = 768 * 1024
"""Largest DeadLetter body published; a larger one is sent without its payload and target
headers (``truncated``), below NATS's default ``max_payload`` of 1 MiB."""


def encode_dead_letter(letter: DeadLetterRun, now: datetime) -> bytes:
    """The DeadLetter body of a run that died (``now``: when it died)."""
    run = run_pb2.Run(
        job_id=str(letter.ref.job_id),
        scheduled_at=wire.timestamp(letter.ref.scheduled_at),
        run_key=letter.ref.key,
        kind=wire.enum_out(letter.kind),
        status=wire.enum_out(RunStatus.DEAD),
        attempt=letter.attempt,
        executor_id=letter.executor_id,
        finished_at=wire.timestamp(now),
        last_error=letter.last_error,
        error_class=wire.enum_out(letter.error_class),
    )
    if letter.started_at:
        run.started_at.CopyFrom(wire.timestamp(letter.started_at))
    message = events_pb2.DeadLetter(
        run=run,
        tenant_id=letter.tenant_id,
        target=wire.target(letter.target),
        payload=letter.payload,
        last_error=letter.last_error,
        error_class=run.error_class,
        died_at=wire.timestamp(now),
        job_name=letter.job_name,
        labels=dict(letter.labels),
    )
    body = message.SerializeToString()
    if len(body) <= DEAD_LETTER_MAX_BYTES:
        return body
    # Too large for the bus: a letter that can never be published would stay in the
    # outbox for good. The run's identity, error and labels always fit.
    message.payload = b""
    kind = message.target.WhichOneof("kind")
    if kind == "http":
        message.target.http.ClearField("headers")
    elif kind == "grpc":
        message.target.grpc.ClearField("metadata")
    message.truncated = True
    return message.SerializeToString()
