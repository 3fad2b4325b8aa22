"""The run vocabulary: every status, kind, error class and outcome a run can have.

Each enum's value is the text stored in ``job_runs`` (or, for the values never stored,
the lower-case name); :mod:`sundial.core.wire` maps each member to the proto enum value
of the same name (``RunStatus.DEAD`` <-> ``RUN_STATUS_DEAD``), and
``tests/unit/run/test_vocabulary.py`` pins every member to its proto number.
"""

from __future__ import annotations

import enum

__all__ = [
    "ACTIVE_STATUSES",
    "CANCELLED_AT_ONCE",
    "CHECKED_STATUSES",
    "ENDED_STATUSES",
    "FINISHED_STATUSES",
    "REPLAYABLE_STATUSES",
    "STATUS_SETS",
    "WAITING_STATUSES",
    "ErrorClass",
    "FenceReason",
    "OutcomeStatus",
    "RejectReason",
    "RunKind",
    "RunStatus",
    "SkipReason",
]


class RunStatus(enum.Enum):
    """``job_runs.status`` (run.proto ``RunStatus``)."""

    PENDING = "pending"
    """Buffered behind an unfinished run of the same job (overlap BUFFER_ONE/ALL)."""
    QUEUED = "queued"
    """Waiting to be (re)published and leased."""
    RUNNING = "running"
    """Leased to an executor: ``attempt`` is the fencing token."""
    RETRYING = "retrying"
    """Failed retryably; leased again at ``next_attempt_at``."""
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    """Failed finally or on its last attempt; a DeadLetter was (or will be) published."""
    SKIPPED = "skipped"
    """Never ran: overlap or misfire policy (``skip_reason``)."""
    CANCELLED = "cancelled"

    @property
    def active(self) -> bool:
        """Unfinished: pending, queued, running or retrying."""
        return self in ACTIVE_STATUSES

    @property
    def ended(self) -> bool:
        """Will never change again on its own (only ReplayRun revives a dead run)."""
        return self in ENDED_STATUSES


ACTIVE_STATUSES = frozenset(
    {RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING}
)
"""Unfinished runs: what overlap policies and DescribeJob's active_runs count."""

FINISHED_STATUSES = frozenset({RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.SKIPPED})
"""Runs a lease is refused with REJECT_REASON_FINISHED."""

ENDED_STATUSES = FINISHED_STATUSES | {RunStatus.CANCELLED}
"""Every terminal status."""

CANCELLED_AT_ONCE = frozenset({RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RETRYING})
"""Unfinished runs no executor holds: a cancel ends them at once (:func:`cancel`); a
RUNNING one is asked to stop instead."""

CHECKED_STATUSES = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING})
"""Live runs the sweeper looks at again when their ``check_at`` passes
(``job_runs_check_idx``, docs/design.md section 5)."""

WAITING_STATUSES = frozenset({RunStatus.PENDING, RunStatus.QUEUED})
"""Runs waiting for their first (or next) grant, never failed since (SLO counts)."""

REPLAYABLE_STATUSES = frozenset({RunStatus.DEAD, RunStatus.CANCELLED})
"""What ReplayRun takes back to QUEUED."""

STATUS_SETS = {
    "ACTIVE_STATUSES": ACTIVE_STATUSES,
    "FINISHED_STATUSES": FINISHED_STATUSES,
    "ENDED_STATUSES": ENDED_STATUSES,
    "CANCELLED_AT_ONCE": CANCELLED_AT_ONCE,
    "CHECKED_STATUSES": CHECKED_STATUSES,
    "WAITING_STATUSES": WAITING_STATUSES,
    "REPLAYABLE_STATUSES": REPLAYABLE_STATUSES,
}
"""Every named set of statuses: a status list in SQL (``status IN (...)``) is one of
these (``tests/unit/run/test_sql_statuses.py``)."""


class RunKind(enum.Enum):
    """``job_runs.kind`` (run.proto ``RunKind``)."""

    SCHEDULED = "scheduled"
    MANUAL = "manual"
    BACKFILL = "backfill"


class ErrorClass(enum.Enum):
    """``job_runs.error_class`` (run.proto ``ErrorClass``); NULL when there is none."""

    RETRYABLE = "retryable"
    FINAL = "final"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    REFUSED = "refused"
    CANCELLED = "cancelled"
    LEASE_EXPIRED = "lease_expired"
    TARGET_FORBIDDEN = "target_forbidden"


class SkipReason(enum.Enum):
    """``job_runs.skip_reason`` of a SKIPPED run (run.proto ``SkipReason``)."""

    OVERLAP = "overlap"
    BUFFER_FULL = "buffer_full"
    MISFIRE = "misfire"


class OutcomeStatus(enum.Enum):
    """How an executor says one attempt ended (ledger.proto ``OutcomeStatus``)."""

    SUCCEEDED = "succeeded"
    FAILED_RETRYABLE = "failed_retryable"
    FAILED_FINAL = "failed_final"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"

    @property
    def retryable(self) -> bool:
        """A failure the retry policy may retry."""
        return self in (OutcomeStatus.FAILED_RETRYABLE, OutcomeStatus.TIMED_OUT)


class RejectReason(enum.Enum):
    """Why LeaseRuns refused a run (ledger.proto ``RejectReason``)."""

    FINISHED = "finished"
    LEASED_ELSEWHERE = "leased_elsewhere"
    TENANT_AT_CAPACITY = "tenant_at_capacity"
    NOT_FOUND = "not_found"
    CANCELLED = "cancelled"
    NOT_DUE = "not_due"
    ANSWER_FULL = "answer_full"
    """Not granted: the LeaseRuns answer reached its byte budget; lease again at once."""
    KEY_AT_CAPACITY = "key_at_capacity"
    """The run's concurrency key has its FlowLimit.max_running runs RUNNING: later."""


class FenceReason(enum.Enum):
    """Why CompleteRuns refused an outcome (ledger.proto ``FenceReason``)."""

    STALE_ATTEMPT = "stale_attempt"
    NOT_RUNNING = "not_running"
    NOT_FOUND = "not_found"
    NOT_HOLDER = "not_holder"
    """RUNNING at that attempt under a lease the caller does not hold."""
