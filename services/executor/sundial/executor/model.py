"""The executor's domain types: runs it holds, what to call, how an attempt ended.

These mirror the RunLedger wire messages (``sundial.v1.ledger_pb2``) without depending on
protobuf; :mod:`sundial.executor.convert` translates. Enum values equal the proto's, so
the translation is a cast.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from sundial.run import run_key


class OutcomeStatus(enum.IntEnum):
    """How an attempt ended (``sundial.v1.OutcomeStatus``)."""

    SUCCEEDED = 1
    FAILED_RETRYABLE = 2
    FAILED_FINAL = 3
    CANCELLED = 4
    TIMED_OUT = 5


class ErrorClass(enum.IntEnum):
    """Classification of a failed attempt (``sundial.v1.ErrorClass``)."""

    UNSPECIFIED = 0
    RETRYABLE = 1
    FINAL = 2
    TIMEOUT = 3
    CONNECTION = 4
    REFUSED = 5
    CANCELLED = 6
    LEASE_EXPIRED = 7


@dataclass(frozen=True, order=True)
class RunId:
    """A run's primary key: ``(job_id, scheduled_at)``."""

    job_id: str
    scheduled_at: datetime

    @property
    def key(self) -> str:
        """The run key string, ``<job_id>@<scheduled_at>``."""
        return run_key(self.job_id, self.scheduled_at)


@dataclass(frozen=True)
class HttpTarget:
    """An HTTP(S) endpoint (``sundial.v1.HttpTarget``)."""

    url: str
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class GrpcTarget:
    """A server implementing ``sundial.v1.TargetService`` (``sundial.v1.GrpcTarget``)."""

    address: str
    plaintext: bool = False
    metadata: tuple[tuple[str, str], ...] = ()


Target = HttpTarget | GrpcTarget


@dataclass(frozen=True)
class Lease:
    """A granted attempt of a run: everything needed to call its target."""

    run: RunId
    attempt: int
    lease_until: datetime
    target: Target
    payload: bytes
    run_timeout_s: float
    tenant_id: str
    run_key: str
    signature: str
    job_name: str = ""
    kind: str = ""


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended, as the executor reports it in CompleteRuns."""

    status: OutcomeStatus
    started_at: datetime
    finished_at: datetime
    error: str = ""
    error_class: ErrorClass = ErrorClass.UNSPECIFIED
    retry_after_s: float | None = None
    http_status: int = 0
    grpc_code: int | None = None

    @property
    def failed(self) -> bool:
        """True unless the attempt succeeded or was cancelled."""
        return self.status not in (OutcomeStatus.SUCCEEDED, OutcomeStatus.CANCELLED)


@dataclass(frozen=True)
class Report:
    """An outcome addressed to the ledger: the run, the attempt (fencing token), the outcome."""

    run: RunId
    attempt: int
    outcome: Outcome
