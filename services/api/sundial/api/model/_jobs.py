"""Jobs, runs, calendars, flow limits, previews and pages (see the package docstring)."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, TypeVar
from uuid import UUID

from sundial.job import JobSpec
from sundial.run import ErrorClass, RunKind, RunRef, RunStatus, SkipReason
from sundial.schedule import Calendar, CalendarKind, FireTime

T = TypeVar("T")


# --- jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobRevision:
    """A job's definition as one change left it (job_revisions, migration 0012)."""

    version: int
    spec: JobSpec
    changed_fields: tuple[str, ...]
    """What changed from the previous revision (``created`` for the first)."""
    changed_by: str | None
    """The writer's token id (``admin``: the bootstrap admin token; None: unknown)."""
    request_id: str | None
    create_time: datetime


@dataclass(frozen=True, slots=True)
class JobStats:
    """Counters and recent times of a job's runs (job.proto ``JobStats``)."""

    last_fire_time: datetime | None = None
    last_success_time: datetime | None = None
    last_failure_time: datetime | None = None
    succeeded: int = 0
    failed: int = 0
    skipped_misfires: int = 0
    skipped_overlaps: int = 0
    cancelled: int = 0
    last_lateness: timedelta | None = None
    scheduled_occurrences: int = 0

    @property
    def total_runs(self) -> int:
        """Runs that reached a terminal status."""
        return self.succeeded + self.failed + self.skipped_overlaps + self.cancelled


@dataclass(frozen=True, slots=True)
class Job:
    """A stored job."""

    job_id: UUID
    """The job's identity (``Job.uid`` on the wire): runs, partitions and NATS use it."""
    tenant_id: str
    spec: JobSpec
    partition_id: int
    next_run_at: datetime | None
    version: int
    create_time: datetime
    update_time: datetime
    stats: JobStats = field(default_factory=JobStats)
    client_id: str | None = None
    """The client-chosen id (``Job.job_id`` on the wire), None for a server-id job."""
    calendars: Mapping[str, Calendar] = field(default_factory=dict)
    """The calendars its schedule names, as its definition row holds them (kept current
    by UpdateCalendar, migration 0015)."""
    pause_until: datetime | None = None
    """While paused with a time limit: when it resumes by itself (migration 0024)."""

    @property
    def fired_count(self) -> int:
        """Scheduled occurrences consumed so far (what ``max_runs`` is compared with)."""
        return self.stats.scheduled_occurrences


@dataclass(frozen=True, slots=True)
class NewJob:
    """A validated job about to be inserted: its id, spec and first fire time."""

    job_id: UUID
    spec: JobSpec
    partition_id: int
    next_run_at: datetime | None
    client_id: str | None = None
    calendars: Sequence[Calendar] = ()
    """The calendars its schedule names, in reference order, as validated."""


JobRef = UUID | str
"""How a request names a job: its UUID, or its client-chosen id (resolved per tenant)."""


class ApplyOutcome(enum.Enum):
    """What ApplyJob did (job_service.proto ``ApplyOutcome``)."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Applied:
    """ApplyJob's answer: the job after the call and what the call did."""

    job: Job
    outcome: ApplyOutcome


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement: ``op`` is ``in``, ``notin``, ``exists`` or ``!exists``
    (``=`` is a one-value ``in``, ``!=`` a one-value ``notin``)."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def path(self) -> str:
        """The requirement as an SQL/JSON path predicate on a job's labels."""
        key = f"$.{json.dumps(self.key)}"
        if self.op in ("exists", "!exists"):
            test = f"exists({key})"
        else:
            alternatives = " || ".join(f"@ == {json.dumps(v)}" for v in self.values)
            test = f"exists({key} ? ({alternatives}))"
        return f"!({test})" if self.op in ("notin", "!exists") else test


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed selector: every requirement must hold (none: every job)."""

    requirements: tuple[Requirement, ...] = ()

    def split(self, fixed: Mapping[str, str] | None = None) -> tuple[dict[str, str], str | None]:
        """The labels a matching job carries with one value (index-served; ``fixed``
        first, then the selector's first equality per key), and the other requirements
        as one path predicate (None when there are none)."""
        document = dict(fixed or {})
        rest: list[str] = []
        for r in self.requirements:
            if r.op == "in" and len(r.values) == 1 and r.key not in document:
                document[r.key] = r.values[0]
            else:
                rest.append(r.path())
        return document, " && ".join(rest) if rest else None

    def __bool__(self) -> bool:
        return bool(self.requirements)


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which of a tenant's jobs a list, a count or a bulk action covers (combined with
    AND; docs/design.md section 13)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels every job has with exactly these values (ListJobs' map)."""
    name_prefix: str = ""
    paused: bool | None = None
    target_forbidden: bool = False
    """Only jobs whose target the tenant's current egress policy forbids."""
    selector: LabelSelector = LabelSelector()
    """A label selector (sundial.api.selector parses one)."""
    search: str = ""
    """A substring of the name or description, case-insensitive."""

    def narrows(self) -> bool:
        """Whether any filter but ``paused`` is given (a bulk action needs one)."""
        return bool(self.selector or self.labels or self.search or self.name_prefix)

    def label_filters(self) -> tuple[dict[str, str] | None, str | None]:
        """The labels every job must carry (a document for ``@>``; None: none) and the
        rest of the selector (a path predicate for ``@@``; None: none)."""
        document, path = self.selector.split(self.labels)
        return document or None, path

    def fingerprint(self) -> dict[str, object]:
        """The filters as a page token's fingerprint takes them (the selector and the
        search only when given, so tokens issued before they existed stay valid)."""
        filters: dict[str, object] = {
            "labels": dict(self.labels),
            "prefix": self.name_prefix,
            "paused": self.paused,
            "forbidden": self.target_forbidden,
        }
        if self.selector:
            filters["selector"] = [
                [r.key, r.op, list(r.values)] for r in self.selector.requirements
            ]
        if self.search:
            filters["search"] = self.search
        return filters


# --- runs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One run (one run key) as stored in ``job_runs``."""

    job_id: UUID
    scheduled_at: datetime
    kind: RunKind
    status: RunStatus
    attempt: int = 0
    due_at: datetime | None = None
    lease_until: datetime | None = None
    executor_id: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lateness: timedelta | None = None
    last_error: str = ""
    error_class: ErrorClass | None = None
    skip_reason: SkipReason | None = None
    next_attempt_at: datetime | None = None
    create_time: datetime | None = None
    cancel_requested: bool = False
    replay_count: int = 0
    last_http_status: int = 0
    last_grpc_code: int | None = None

    @property
    def ref(self) -> RunRef:
        """The run's primary key."""
        return RunRef(self.job_id, self.scheduled_at)

    @property
    def run_key(self) -> str:
        """``<job_id>@<scheduled_at>`` (run.proto)."""
        return self.ref.key


@dataclass(frozen=True, slots=True)
class RunFilter:
    """ListRuns' filters (combined with AND; empty collections mean "any")."""

    statuses: frozenset[RunStatus] = frozenset()
    kinds: frozenset[RunKind] = frozenset()
    scheduled_after: datetime | None = None
    scheduled_before: datetime | None = None
    started_after: datetime | None = None
    started_before: datetime | None = None
    late_only: bool = False
    """Only SCHEDULED runs surely late (ListRunsRequest.late_only)."""


@dataclass(frozen=True, slots=True)
class BackfillResult:
    """What one BackfillJob call did."""

    runs: Sequence[Run]
    existing_count: int
    truncated: bool
    next_start_time: datetime | None


# --- calendars ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CalendarSpec:
    """A calendar as a request defines it (calendar.proto), before validation."""

    name: str
    description: str = ""
    kind: CalendarKind | None = None
    dates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredCalendar:
    """A tenant's calendar: its meaning (``calendar``, with its version) and the rest."""

    calendar: Calendar
    description: str
    create_time: datetime
    update_time: datetime


# --- flow control -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FlowLimitSpec:
    """A key's limits as SetFlowLimit takes them (flow.proto ``FlowLimit``); validated,
    ``burst`` is the effective bucket size (0 only without a rate limit)."""

    key: str
    rate_per_second: float = 0.0
    burst: int = 0
    max_running: int = 0


@dataclass(frozen=True, slots=True)
class StoredFlowLimit:
    """A key's limits as stored, with how the key stands at ``observed_at``."""

    spec: FlowLimitSpec
    waiting_runs: int
    """Runs of the key in ``run_waits``, and the queued runs published but not leased
    of the jobs whose concurrency key it is."""
    running_runs: int
    """RUNNING runs of the jobs whose concurrency key or explicit rate-limit key it is."""
    available_tokens: float
    blocked_until: datetime | None
    """Only while in the future."""
    create_time: datetime
    update_time: datetime


# --- previews -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PreviewEntry:
    """One fire time (or one DST-dropped time) with when its run would become due."""

    fire: FireTime
    due_at: datetime | None


@dataclass(frozen=True, slots=True)
class Preview:
    """Upcoming fire times of a schedule."""

    entries: Sequence[PreviewEntry]
    exhausted: bool


@dataclass(frozen=True, slots=True)
class Slo:
    """A job's SLO over one window (job_service.proto ``JobSlo``; docs/design.md 11)."""

    window: timedelta
    window_start: datetime
    as_of: datetime
    lateness_threshold: timedelta
    due: int = 0
    on_time: int = 0
    late: int = 0
    missed: int = 0
    skipped: int = 0
    failed: int = 0
    throttled: int = 0
    """Late after waiting for the tenant's own rate-limit key (not in ``late``)."""


@dataclass(frozen=True, slots=True)
class SloRunCounts:
    """One window's counts of scheduled runs the SQL could decide without the jitter."""

    runs: int
    on_time: int
    late: int
    skipped: int
    failed: int
    throttled: int = 0


@dataclass(frozen=True, slots=True)
class SloUnsure:
    """A scheduled run whose on-time answer depends on its own jitter: it started, or
    still waits, between ``threshold`` and ``threshold + jitter`` after its nominal
    time."""

    scheduled_at: datetime
    started_at: datetime | None
    throttled: bool = False


@dataclass(frozen=True, slots=True)
class MisfireRecord:
    """One dispatch's skipped misfires (``job_misfires``): consecutive occurrences."""

    first_at: datetime
    last_at: datetime
    skipped: int


@dataclass(frozen=True, slots=True)
class JobDescription:
    """DescribeJob's answer."""

    job: Job
    recent_runs: Sequence[Run]
    upcoming: Preview
    active_runs: int
    slo: Sequence[Slo] = ()


# --- pages --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list and the token of the next (empty on the last page)."""

    items: Sequence[T]
    next_page_token: str = ""


def as_revised(job: Job, revision: JobRevision) -> Job:
    """``job`` as ``revision`` left it: that definition and version, the ids as now, no
    next_run_at or stats (they are not history)."""
    return dataclasses.replace(
        job,
        spec=revision.spec,
        version=revision.version,
        update_time=revision.create_time,
        next_run_at=None,
        stats=JobStats(),
    )
