"""Plain values the scheduler's parts exchange (no protobuf, no SQL)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class RunRef:
    """A run's primary key: the job and the nominal occurrence."""

    job_id: uuid.UUID
    scheduled_at: datetime


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


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """A run row the dispatch transaction inserts."""

    job_id: uuid.UUID
    scheduled_at: datetime
    tenant_id: str
    partition_id: int
    status: str
    """``queued``, ``pending`` or ``skipped``."""
    due_at: datetime
    """scheduled_at plus the job's deterministic jitter."""
    lateness_ms: int | None
    skip_reason: str | None = None


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
    """One RunDispatch message: runs of one partition under one dispatch sequence."""

    partition: int
    dispatch_seq: int
    runs: tuple[RunRef, ...]


@dataclass(slots=True)
class DispatchOutcome:
    """What a dispatch transaction did."""

    claimed: int = 0
    inserted: int = 0
    batches: list[PublishBatch] = field(default_factory=list)
    lateness_ms: list[int] = field(default_factory=list)
    """Lateness of each run published right away (for the lateness histogram)."""
