"""The executor's own types: a granted attempt, LeaseRuns' verdicts and the ledger's answers.

The run's identity, vocabulary, target and outcome are :mod:`sundial.run`'s (``RunRef``,
``OutcomeStatus``, ``ErrorClass``, ``HttpTarget``/``GrpcTarget``, ``Outcome``,
``Completion``); only what exists nowhere but in the executor is defined here.
:mod:`sundial.executor.convert` translates between these and the wire.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from opentelemetry.trace import SpanContext

from sundial.core.egress import EgressPolicy
from sundial.run import FenceReason, RejectReason, RunKind, RunRef, RunStatus, Target

__all__ = [
    "NOT_SENT",
    "Answer",
    "CancelOrder",
    "HeartbeatAnswer",
    "HeldLease",
    "HeldRun",
    "Lease",
    "LeaseResult",
    "Rejected",
    "UnusableGrant",
]


_EXECUTION_IDS = uuid.UUID("6f1d3c1e-5a57-4e0b-9d3c-1b2a0e7c5f41")
"""The uuid5 namespace execution ids are derived in."""
_EXECUTION_NS = _EXECUTION_IDS.bytes


@dataclass(frozen=True, slots=True)
class Lease:
    """A granted attempt of a run: everything needed to call its target."""

    run: RunRef
    attempt: int
    """The fencing token: the outcome of this attempt is reported with it."""
    lease_until: datetime
    target: Target
    payload: bytes
    run_timeout_s: float
    tenant_id: str
    run_key: str
    signature: str
    job_name: str = ""
    kind: RunKind | None = None
    """None when the ledger did not say (or said something newer than this executor)."""
    lease_id: str = ""
    """The lease's id from the grant: sent back with heartbeats and the outcome (only the
    holder's are accepted). Never sent to the target: see :attr:`execution_id`."""
    egress: EgressPolicy | None = None
    """The tenant's egress policy at grant time; None: the operator's default."""
    traceparent: str = ""
    """The run's trace context from the grant (empty: the run has none)."""
    lease_span: SpanContext | None = None
    """The span of the LeaseRuns batch that granted it (the attempt span links to it)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Further headers the ledger computed for this call (``Grant.headers``: Standard
    Webhooks, an identity token): credentials of this attempt, never logged."""

    @property
    def execution_id(self) -> str:
        """What the target is told identifies this execution (Sundial-Execution-Id): a
        UUID derived one-way from the lease id (uuid5), never the lease id itself, which
        with an executor token is what completes the run; a target, its logs or a hop in
        between learn nothing usable. Empty when the grant had no lease id.

        ``str(uuid.uuid5(namespace, lease_id))`` spelled out: the same SHA-1 and version
        bits without building a UUID object (a per-run cost of the herd benchmark)."""
        if not self.lease_id:
            return ""
        digest = bytearray(hashlib.sha1(_EXECUTION_NS + self.lease_id.encode()).digest()[:16])
        digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
        digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
        h = digest.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True, slots=True)
class Rejected:
    """LeaseRuns refused a run."""

    run: RunRef
    reason: RejectReason | None
    """None for a reason newer than this executor: treated as "ask again later"."""
    detail: str = ""
    retry_after: timedelta | None = None


@dataclass(frozen=True, slots=True)
class UnusableGrant:
    """A grant the executor cannot act on (no target): reported as a final failure."""

    run: RunRef
    attempt: int
    error: str
    lease_id: str = ""


LeaseResult = Lease | Rejected | UnusableGrant
"""What LeaseRuns decided about one run, in the order the runs were asked for."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The ledger's answer to one reported outcome (CompleteRuns)."""

    accepted: bool
    next_status: RunStatus | None = None
    fence_reason: FenceReason | None = None
    """Why a refused outcome was fenced out (None if accepted, not sent or unknown)."""
    sent: bool = True
    """False when the outcome never reached the ledger (given up, or a bug): the run's
    lease then expires and the ledger retries it."""


NOT_SENT = Answer(accepted=False, sent=False)
"""The answer of an outcome the completer gave up on."""


HeldRun = tuple[RunRef, int]
"""A held run and its attempt."""

HeldLease = tuple[RunRef, int, str]
"""A held run, its attempt and lease id, as a heartbeat lists it."""


@dataclass(frozen=True, slots=True)
class CancelOrder:
    """The ledger asks to stop an attempt and report it CANCELLED."""

    run: RunRef
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    """One message of the ledger on the Heartbeat stream."""

    interval_s: float | None = None
    """The ledger's heartbeat interval, when it announced one."""
    cancel: Sequence[CancelOrder] = ()
    lost: Sequence[HeldRun] = ()
    """Attempts whose lease is gone: stop them, report nothing."""
