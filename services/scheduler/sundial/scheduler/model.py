"""Plain values the scheduler's parts exchange (no protobuf, no SQL).

The run's own vocabulary and states are :mod:`sundial.run`'s; these are what only the
scheduler needs: claimed jobs and their plans, publish batches, and the locked rows the
ledger and the sweeper decide about.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sundial.core.egress import EgressPolicy
from sundial.job import DEFAULT_PRIORITY
from sundial.run import ErrorClass, RunKind, RunRef, RunState, RunStatus, SkipReason, Target

__all__ = [
    "BatchPlan",
    "ClaimedJob",
    "DeadLetterRun",
    "DispatchOutcome",
    "JobAdvance",
    "LeaseCandidate",
    "LeaseLock",
    "PlannedRun",
    "PublishBatch",
    "RunRef",
    "SweepOutcome",
]


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A due job locked by a dispatch transaction, with what planning needs."""

    job_id: uuid.UUID
    tenant_id: str
    partition_id: int
    next_run_at: datetime
    fired_count: int
    version: int
    schedule: str
    """``job_definitions.schedule`` as JSON text."""
    policies: str
    """``job_definitions.policies`` as JSON text."""
    unfinished: int
    """Runs of the job still pending, queued, running or retrying (overlap policies)."""
    pending: int
    """Runs of the job waiting behind another (BUFFER_ONE/ALL)."""
    create_traceparent: str = ""
    """The creating call's trace context until the job's first dispatch (its runs link
    to it), else empty."""
    last_fire_at: datetime | None = None
    """The job's last scheduled occurrence (a fixed-delay job waits for its run)."""
    last_run_live: bool = False
    """Fixed delay: the run at ``last_fire_at`` is unfinished."""
    last_run_ended: datetime | None = None
    """Fixed delay: when the run at ``last_fire_at`` ended (None: it has not, or there
    is no such run)."""


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """A run row the dispatch transaction inserts."""

    job_id: uuid.UUID
    scheduled_at: datetime
    tenant_id: str
    partition_id: int
    status: RunStatus
    """QUEUED, PENDING or SKIPPED."""
    due_at: datetime
    """scheduled_at plus the job's deterministic jitter."""
    lateness_ms: int | None
    skip_reason: SkipReason | None = None
    priority: int = DEFAULT_PRIORITY
    """The job's flow priority (1 first): orders the tenant's runs at admission."""
    rate_key: str = ""
    """The job's rate-limit key; empty until admission resolves the default (the
    target's origin), which it does only for tenants with rate limits."""


@dataclass(frozen=True, slots=True)
class JobAdvance:
    """How a claimed job moves on: its next fire time and the counters of this batch."""

    job_id: uuid.UUID
    next_run_at: datetime | None
    fired: int
    last_fire_at: datetime | None
    lateness_ms: int | None
    missed: int
    skipped: int
    missed_first: datetime | None = None
    """Nominal time of the first misfired occurrence skipped (with ``missed``)."""
    missed_last: datetime | None = None
    """Nominal time of the last one."""
    missed_exact: bool = True
    """False when ``missed`` is a lower bound (a long outage's walk jumped)."""


@dataclass(slots=True)
class BatchPlan:
    """Everything one dispatch transaction writes."""

    runs: list[PlannedRun] = field(default_factory=list)
    advances: list[JobAdvance] = field(default_factory=list)
    cancel_other: list[uuid.UUID] = field(default_factory=list)
    """Jobs whose unfinished runs OVERLAP_POLICY_CANCEL_OTHER cancels."""
    quarantined: list[uuid.UUID] = field(default_factory=list)
    """Jobs that could not be planned: not claimed again for a while, not advanced."""


@dataclass(frozen=True, slots=True)
class PublishBatch:
    """One RunDispatch message: runs of any partitions under one dispatch sequence,
    named by its first run's partition."""

    partition: int
    dispatch_seq: int
    runs: tuple[RunRef, ...]
    tenants: tuple[str, ...] = ()
    """Each run's tenant, parallel to ``runs`` ("" for a run whose tenant is not known)."""
    weights: Mapping[str, int] = field(default_factory=dict)
    """The fair-sharing weights of ``tenants`` that admission read (others: 1)."""


@dataclass(slots=True)
class DispatchOutcome:
    """What a dispatch transaction did."""

    claimed: int = 0
    oldest_due_age_s: float = 0.0
    """How long the oldest claimed job had been due (0: none claimed)."""
    inserted: int = 0
    batches: list[PublishBatch] = field(default_factory=list)
    lateness_ms: list[int] = field(default_factory=list)
    """Lateness of each run published right away (for the lateness histogram)."""
    waiting: int = 0
    """Runs inserted to wait for admission (flow control) instead of published."""
    waiting_tenants: frozenset[str] = frozenset()
    """The tenants of those runs."""


@dataclass(frozen=True, slots=True)
class LeaseCandidate:
    """A run locked by LeaseRuns: its state and what a grant of it carries."""

    state: RunState
    kind: RunKind
    job_name: str
    target: Target | None
    payload: bytes
    run_timeout: timedelta
    signing_secrets: tuple[bytes, ...]
    """Every secret of the tenant still valid, newest first (two while a rotation
    overlaps)."""
    egress: EgressPolicy | None = None
    """The tenant's own egress policy at grant time; None: the operator's default."""
    traceparent: str = ""
    """The run's trace context (empty: created while tracing was off)."""
    lateness_threshold: timedelta = timedelta(seconds=60)
    """The job's Policies.lateness_threshold (the SLO's on-time count at the first grant)."""
    throttled: bool = False
    """The run waited at admission for its rate-limit key (flow control): a late start is
    counted ``throttled``, not ``late``."""
    jitter: timedelta = timedelta(0)
    """The job's Schedule.jitter bound (its due time is scheduled_at plus its jitter)."""


@dataclass(frozen=True, slots=True)
class TenantTerms:
    """What LeaseRuns needs of one tenant, read once per call under its lock."""

    running: int
    """Its runs RUNNING before the call (the cap counts them)."""
    max_concurrent_runs: int | None
    signing_secrets: tuple[bytes, ...]
    """Every secret still valid, newest first."""
    egress: EgressPolicy | None = None
    """The tenant's own egress policy; None: the operator's default."""


@dataclass(frozen=True, slots=True)
class LeaseLock:
    """What LeaseRuns decides on: the locked runs that exist and the tenants' counts."""

    candidates: Mapping[RunRef, LeaseCandidate]
    running: Mapping[str, int]
    """RUNNING runs per tenant of the requested runs, counted under the tenant locks."""
    key_running: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """RUNNING runs per (tenant, concurrency key) with a limit, among the requested
    runs' keys, counted under the tenant locks."""


@dataclass(frozen=True, slots=True)
class WrittenLease:
    """A lease LeaseRuns wrote: the attempt (fencing token) and the lease id its holder
    must present to heartbeat or complete it."""

    attempt: int
    lease_id: str


@dataclass(frozen=True, slots=True)
class DeadLetterRun:
    """A dead run whose DeadLetter is due, with what the letter carries."""

    ref: RunRef
    tenant_id: str
    kind: RunKind
    attempt: int
    executor_id: str
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str
    error_class: ErrorClass | None
    job_name: str
    target: Target | None
    payload: bytes
    labels: Mapping[str, str]
    traceparent: str = ""
    """The run's trace context (empty: created while tracing was off)."""


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What one sweep pass did."""

    batches: list[PublishBatch]
    cancelled: int
    released: int
    dead_letters: list[DeadLetterRun] = field(default_factory=list)
    """Dead runs whose DeadLetter is due (the outbox): the caller publishes each, then
    clears it (:meth:`SchedulerStore.clear_dead_letters`)."""
    checked: int = 0
    """Runs whose check came due in this pass (republished, deferred or ended)."""
    admitted: int = 0
    """Waiting runs admitted by this pass (flow control), published by it."""
    waiting: bool = False
    """Runs still wait for admission."""
