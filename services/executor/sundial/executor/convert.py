"""Translation between the RunLedgerService and bus wire messages and the executor's types.

Timestamps, durations, run references, targets and the run vocabulary's enums are
converted by :mod:`sundial.core.wire`; what is here is only the executor's own: the
RunDispatch body, grants and rejections, the outcome message, the ledger's answers and
the heartbeat messages, and the ExecuteRequest of a gRPC target's call. With
:mod:`sundial.executor.ledger` (which sends what this builds), the only executor module
that imports ``sundial.v1``.

Inbound messages come from the scheduler, so they are trusted to be well-formed, but
never to be as old as this executor: an enum number it does not know becomes None
instead of an error, and a malformed run reference is an error of that one entry.
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeVar

from google.protobuf import duration_pb2, timestamp_pb2
from opentelemetry.trace import SpanContext

from sundial.core import wire
from sundial.core.egress import EgressPolicy
from sundial.core.errors import InvalidArgument
from sundial.executor.model import (
    Answer,
    CancelOrder,
    HeartbeatAnswer,
    HeldLease,
    Lease,
    LeaseResult,
    Rejected,
    UnusableGrant,
)
from sundial.internal.v1 import events_pb2, ledger_pb2
from sundial.run import (
    MAX_RETRY_AFTER,
    Completion,
    FenceReason,
    HttpTarget,
    RejectReason,
    RunKind,
    RunRef,
    RunStatus,
    Target,
    truncate_error,
)
from sundial.v1 import egress_pb2, job_pb2, run_pb2, target_pb2

__all__ = [
    "DEFAULT_RUN_TIMEOUT_S",
    "answers",
    "complete_request",
    "decode_dispatch",
    "execute_request",
    "heartbeat_answer",
    "heartbeat_request",
    "lease_from_grant",
    "lease_request",
    "lease_results",
    "outcome_message",
]

log = logging.getLogger(__name__)

E = TypeVar("E", bound=enum.Enum)

DEFAULT_RUN_TIMEOUT_S = 30 * 60.0
"""The effective default of Policies.run_timeout, used if a grant ever comes without one."""


def _known(kind: type[E], number: int) -> E | None:
    """The member of ``kind`` numbered ``number``; None for 0 and for a newer value."""
    try:
        return wire.enum_in(kind, number, kind.__name__)
    except InvalidArgument:
        return None


# --- the bus ---------------------------------------------------------------------------


def decode_dispatch(data: bytes) -> list[tuple[RunRef, str, int]]:
    """The runs of a RunDispatch message body, each with its tenant ("" when the
    message does not say: a scheduler older than this executor) and
    that tenant's fair-sharing weight (1 when not said).

    Raises:
        ValueError: The body is not a RunDispatch, or carries no run, or a run whose
            reference is malformed (a job id that is not a UUID, no scheduled_at).
    """
    dispatch = events_pb2.RunDispatch()
    try:
        dispatch.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError; be robust to variants
        raise ValueError(f"not a RunDispatch: {exc}") from None
    if not dispatch.runs:
        raise ValueError("RunDispatch without runs")
    try:
        refs = [wire.run_ref_in(ref, f"runs[{i}]") for i, ref in enumerate(dispatch.runs)]
    except InvalidArgument as exc:
        raise ValueError(f"RunDispatch with a malformed RunRef: {exc}") from None
    tenants, indexes = dispatch.tenants, dispatch.run_tenants
    if len(indexes) != len(refs) or any(i >= len(tenants) for i in indexes):
        # Not named, or named wrong: the runs are still work, in the unknown tenant's place.
        return [(ref, "", 1) for ref in refs]
    weights = list(dispatch.tenant_weights)
    weights = [max(w, 1) for w in weights] + [1] * (len(tenants) - len(weights))
    return [(ref, tenants[i], weights[i]) for ref, i in zip(refs, indexes, strict=True)]


# --- LeaseRuns -------------------------------------------------------------------------


def lease_request(
    executor_id: str, refs: Sequence[RunRef], lease_ttl_s: float
) -> ledger_pb2.LeaseRunsRequest:
    """A LeaseRuns request for ``refs``."""
    return ledger_pb2.LeaseRunsRequest(
        executor_id=executor_id,
        runs=[wire.run_ref(ref) for ref in refs],
        lease_ttl=wire.duration(timedelta(seconds=lease_ttl_s)),
    )


def lease_results(
    refs: Sequence[RunRef],
    response: ledger_pb2.LeaseRunsResponse,
    *,
    lease_span: SpanContext | None = None,
) -> list[LeaseResult]:
    """What LeaseRuns decided about each of ``refs`` (answered in request order);
    ``lease_span`` is the span of the call, which each lease keeps.

    Raises:
        ValueError: The ledger answered a different number of results.
    """
    if len(response.results) != len(refs):
        raise ValueError(f"{len(response.results)} results for {len(refs)} runs")
    parts = _GrantParts()
    return [
        _lease_result(ref, result, parts, lease_span)
        for ref, result in zip(refs, response.results, strict=True)
    ]


class _GrantParts:
    """The parts the grants of one LeaseRuns answer share, each converted once: a call's
    grants carry one lease end and, for a herd, one target and run timeout (converting
    them per grant was most of the executor's cost of reading an answer)."""

    def __init__(self) -> None:
        self._targets: dict[bytes, Target] = {}
        self._instants: dict[tuple[int, int], datetime] = {}
        self._timeouts: dict[tuple[int, int], float] = {}

    def target(self, message: job_pb2.Target) -> Target:
        key = message.SerializeToString(deterministic=True)
        found = self._targets.get(key)
        if found is None:
            found = self._targets[key] = _grant_target(message)
        return found

    def lease_until(self, ts: timestamp_pb2.Timestamp) -> datetime:
        key = (ts.seconds, ts.nanos)
        found = self._instants.get(key)
        if found is None:
            found = self._instants[key] = wire.timestamp_in(ts, "grant.lease_until")
        return found

    def timeout_s(self, d: duration_pb2.Duration) -> float:
        key = (d.seconds, d.nanos)
        found = self._timeouts.get(key)
        if found is None:
            seconds = wire.timedelta_in(d, "grant.run_timeout").total_seconds()
            found = self._timeouts[key] = seconds if seconds > 0 else DEFAULT_RUN_TIMEOUT_S
        return found


def _grant_target(message: job_pb2.Target) -> Target:
    target = wire.target_in(message)
    if target is None:
        raise ValueError("grant without a target")
    if isinstance(target, HttpTarget):
        target = replace(target, method=(target.method or "POST").upper())
    return target


def _lease_result(
    ref: RunRef,
    result: ledger_pb2.LeaseResult,
    parts: _GrantParts | None = None,
    lease_span: SpanContext | None = None,
) -> LeaseResult:
    if result.WhichOneof("result") == "grant":
        try:
            return lease_from_grant(ref, result.grant, parts, lease_span=lease_span)
        except ValueError as exc:
            return UnusableGrant(ref, result.grant.attempt, str(exc), result.grant.lease_id)
    rejection = result.rejection
    retry_after = None
    if rejection.HasField("retry_after"):
        try:
            retry_after = wire.timedelta_in(rejection.retry_after, "rejection.retry_after")
        except InvalidArgument:
            retry_after = None  # the consumer's own capacity delay applies
    return Rejected(
        run=ref,
        reason=_known(RejectReason, rejection.reason),
        detail=rejection.detail,
        retry_after=retry_after,
    )


def lease_from_grant(
    ref: RunRef,
    grant: ledger_pb2.Grant,
    parts: _GrantParts | None = None,
    *,
    lease_span: SpanContext | None = None,
) -> Lease:
    """The lease a Grant of run ``ref`` gives.

    Args:
        parts: Converts what the grants of one answer share, once each.

    Raises:
        ValueError: The grant has no target, or a malformed lease_until or run_timeout.
    """
    parts = parts or _GrantParts()
    target = parts.target(grant.target)
    try:
        lease_until = parts.lease_until(grant.lease_until)
        timeout = (
            parts.timeout_s(grant.run_timeout)
            if grant.HasField("run_timeout")
            else DEFAULT_RUN_TIMEOUT_S
        )
        egress = _egress(grant.egress.SerializeToString()) if grant.HasField("egress") else None
    except InvalidArgument as exc:
        raise ValueError(str(exc)) from None
    return Lease(
        run=ref,
        attempt=grant.attempt,
        lease_until=lease_until,
        target=target,
        payload=grant.payload,
        run_timeout_s=timeout,
        tenant_id=grant.tenant_id,
        run_key=grant.run_key or ref.key,
        signature=grant.signature,
        job_name=grant.job_name,
        kind=_known(RunKind, grant.kind),
        lease_id=grant.lease_id,
        egress=egress,
        traceparent=grant.traceparent,
        lease_span=lease_span,
        headers=dict(grant.headers) if grant.headers else {},
    )


@functools.lru_cache(maxsize=1024)
def _egress(serialized: bytes) -> EgressPolicy:
    """A grant's egress policy; cached, since every grant of a tenant carries the same."""
    return wire.egress_policy_in(egress_pb2.EgressPolicy.FromString(serialized), "grant.egress")


# --- CompleteRuns ----------------------------------------------------------------------


def execute_request(lease: Lease) -> target_pb2.ExecuteRequest:
    """What a gRPC target's ``TargetService.Execute`` receives for ``lease``'s attempt."""
    return target_pb2.ExecuteRequest(
        run_key=lease.run_key,
        idempotency_key=lease.run_key,
        job_id=str(lease.run.job_id),
        tenant_id=lease.tenant_id,
        scheduled_at=wire.timestamp(lease.run.scheduled_at),
        attempt=lease.attempt,
        payload=lease.payload,
        execution_id=lease.execution_id,
    )


def outcome_message(completion: Completion) -> ledger_pb2.Outcome:
    """The wire Outcome of a completion (error text and Retry-After capped)."""
    outcome = completion.outcome
    # One constructor (None leaves a field unset): setting the times afterwards built
    # and copied a message each, per run.
    return ledger_pb2.Outcome(
        run=wire.run_ref(completion.ref),
        attempt=completion.attempt,
        lease_id=completion.lease_id,
        status=wire.enum_out(outcome.status),
        error=truncate_error(outcome.error),
        error_class=wire.enum_out(outcome.error_class),
        http_status=outcome.http_status or 0,
        started_at=_timestamp_or_none(outcome.started_at),
        finished_at=_timestamp_or_none(outcome.finished_at),
        retry_after=(
            None
            if outcome.retry_after is None
            else wire.duration(min(outcome.retry_after, MAX_RETRY_AFTER))
        ),
        grpc_code=outcome.grpc_code,
    )


def _timestamp_or_none(at: datetime | None) -> timestamp_pb2.Timestamp | None:
    return None if at is None else wire.timestamp(at)


def complete_request(
    executor_id: str, completions: Iterable[Completion]
) -> ledger_pb2.CompleteRunsRequest:
    """A CompleteRuns request reporting ``completions``."""
    return ledger_pb2.CompleteRunsRequest(
        executor_id=executor_id, outcomes=[outcome_message(c) for c in completions]
    )


def answers(response: ledger_pb2.CompleteRunsResponse) -> list[Answer]:
    """The ledger's answer to each outcome, in request order (maybe fewer: a short
    answer leaves the rest unanswered, which the completer treats as not sent)."""
    return [
        Answer(
            accepted=result.accepted,
            next_status=_known(RunStatus, result.next_status),
            fence_reason=None if result.accepted else _known(FenceReason, result.fence_reason),
        )
        for result in response.results
    ]


# --- Heartbeat -------------------------------------------------------------------------


def heartbeat_request(
    executor_id: str, held: Iterable[HeldLease], lease_ttl_s: float, *, draining: bool
) -> ledger_pb2.HeartbeatRequest:
    """One beat: every held run with its attempt and lease id."""
    return ledger_pb2.HeartbeatRequest(
        executor_id=executor_id,
        runs=[
            ledger_pb2.HeldRun(run=wire.run_ref(run), attempt=attempt, lease_id=lease_id)
            for run, attempt, lease_id in held
        ],
        lease_ttl=wire.duration(timedelta(seconds=lease_ttl_s)),
        draining=draining,
    )


def heartbeat_answer(response: ledger_pb2.HeartbeatResponse) -> HeartbeatAnswer:
    """One ledger message of the Heartbeat stream; malformed entries are logged and
    skipped (the others still apply)."""
    interval_s = None
    if response.HasField("heartbeat_interval"):
        try:
            interval_s = wire.timedelta_in(
                response.heartbeat_interval, "heartbeat_interval"
            ).total_seconds()
        except InvalidArgument as exc:
            log.warning("ignoring %s", exc, extra={"action": "heartbeat.malformed"})
    cancel = []
    for i, order in enumerate(response.cancel):
        ref = _ref_or_none(order.run, f"cancel[{i}].run")
        if ref is not None:
            cancel.append(CancelOrder(ref, order.attempt, order.reason))
    lost = []
    for i, held in enumerate(response.lost):
        ref = _ref_or_none(held.run, f"lost[{i}].run")
        if ref is not None:
            lost.append((ref, held.attempt))
    return HeartbeatAnswer(interval_s=interval_s, cancel=cancel, lost=lost)


def _ref_or_none(ref: run_pb2.RunRef, field: str) -> RunRef | None:
    try:
        return wire.run_ref_in(ref, field)
    except InvalidArgument as exc:
        log.warning("ignoring %s", exc, extra={"action": "heartbeat.malformed"})
        return None
