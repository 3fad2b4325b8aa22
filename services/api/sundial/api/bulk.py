"""Operating many jobs at once (docs/design.md section 13): CountJobs, PauseJobs,
ResumeJobs, DeleteJobs, TriggerJobs, and the timed pause's resumer.

A bulk action names its jobs by filters (:class:`~sundial.api.model.JobFilter`: a label
selector, a search, a name prefix) and acts on at most ``limit`` of them per call, the
first by name among those still in need of it, in one transaction; a repeated call goes
on where the last stopped, since the jobs it changed no longer need the action.
``dry_run`` answers the same counts and writes nothing. Every job changed gets its own
revision (the trigger of migration 0012, as PauseJob's does) and its own audit event
(the bulk method and the job's id), written in the action's transaction, beside the
audit interceptor's row for the call itself. Every query is scoped to the caller's
tenant in SQL, and the label index is keyed by tenant, so one tenant's selector reads
none of another tenant's jobs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from sundial.api import validation
from sundial.api.jobs import first_fire
from sundial.api.jobs._base import OPTIMISTIC_ATTEMPTS
from sundial.api.jobs._read import prefix_upper_bound
from sundial.api.model import JobFilter
from sundial.api.offload import Offload
from sundial.api.runs import off_schedule
from sundial.api.selector import check_search
from sundial.api.store import CalendarChanged, Selected, Store
from sundial.core.clock import Clock
from sundial.core.errors import Aborted, FailedPrecondition, InvalidArgument
from sundial.core.loop import PassLoop
from sundial.run import RunRef
from sundial.schedule import Calendar, SearchExceeded, compile_schedule

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000

_SERVICE = "sundial.v1.JobService/"
PAUSE_UNTIL_WRITER = "pause-until"
"""Who a timed pause's resume is written by (its revision's changed_by)."""


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk action did (with dry_run: would do).

    Attributes:
        matched: The jobs the filters match.
        affected: The jobs acted on (at most the limit).
        remaining: Matched jobs still in need of the action after the call.
        shown: The affected jobs' ids (client id or uid), by name.
    """

    matched: int
    affected: int
    remaining: int
    shown: Sequence[str]


@dataclass(frozen=True, slots=True)
class TriggerResult:
    """What TriggerJobs did: the jobs matched and the runs made (with dry_run: none)."""

    matched: int
    affected: int
    runs: Sequence[RunRef]


def bulk_limit(limit: int) -> int:
    """A bulk call's limit: 0 -> 1,000; 1-10,000; anything else INVALID_ARGUMENT."""
    if limit == 0:
        return DEFAULT_LIMIT
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument("limit", f"must be 1 to {MAX_LIMIT:,} (0: {DEFAULT_LIMIT:,})")
    return limit


def check_filter(job_filter: JobFilter, *, bulk: bool) -> str | None:
    """Check the filters' own bounds; the name prefix's upper bound (None: none).

    Raises:
        InvalidArgument: A bound passed, or (``bulk``) no filter that narrows the jobs.
    """
    check_search(job_filter.search)
    validation.check_text(job_filter.name_prefix, "name_prefix", validation.MAX_NAME_PREFIX_CHARS)
    if bulk and not job_filter.narrows():
        raise InvalidArgument(
            "selector",
            "is required (or search or name_prefix): without one the call would act on"
            " every job of the tenant",
        )
    return prefix_upper_bound(job_filter.name_prefix) if job_filter.name_prefix else None


def resume_times(
    jobs: Sequence[Selected], calendars: dict[str, Calendar], now: datetime
) -> list[tuple[Selected, datetime | None]]:
    """Each job's next fire time from ``now``, as ResumeJob computes it (pure: run off
    the event loop). A job whose calendars leave it no fire time within the search's
    budget (ResumeJob's INVALID_ARGUMENT) is left out: it stays paused."""
    resumes: list[tuple[Selected, datetime | None]] = []
    for job in jobs:
        try:
            at = first_fire(
                compile_schedule(job.schedule, job_id=str(job.job_id), calendars=calendars),
                job.schedule,
                now,
                fired_count=job.fired_count,
                last_fire=job.last_fire_at,
                include_recent_once=False,
            )
        except SearchExceeded:
            continue
        resumes.append((job, at))
    return resumes


def trigger_times(jobs: Sequence[Selected], now: datetime) -> list[tuple[Selected, datetime]]:
    """Each job's manual run instant: now, off its schedule's fire times (pure)."""
    return [
        (
            job,
            off_schedule(
                compile_schedule(job.schedule, job_id=str(job.job_id), calendars=job.calendars),
                now,
            ),
        )
        for job in jobs
    ]


class BulkActions:
    """CountJobs and the bulk actions, for one tenant at a time.

    Args:
        store: Database access.
        clock: The source of "now".
        offload: Where the schedule computations of a resume or a trigger run.
        max_waiting: The operator's bound on requested runs waiting per tenant
            (TriggerJobs counts against it as TriggerJob does).
    """

    def __init__(
        self, store: Store, clock: Clock, *, offload: Offload, max_waiting: int | None = None
    ) -> None:
        self._store = store
        self._clock = clock
        self._offload = offload
        self._max_waiting = max_waiting

    async def count(self, tenant_id: str, job_filter: JobFilter) -> int:
        """How many of the tenant's jobs match."""
        upper = check_filter(job_filter, bulk=False)
        return await self._store.count_jobs(tenant_id, job_filter, upper)

    async def _counts(
        self, tenant_id: str, job_filter: JobFilter, needing: JobFilter, upper: str | None
    ) -> tuple[int, int]:
        matched = await self._store.count_jobs(tenant_id, job_filter, upper)
        if needing == job_filter:
            return matched, matched
        return matched, await self._store.count_jobs(tenant_id, needing, upper)

    async def pause(
        self,
        tenant_id: str,
        job_filter: JobFilter,
        *,
        note: str,
        until: datetime | None,
        dry_run: bool,
        limit: int,
    ) -> BulkResult:
        """Pause the matched jobs not paused yet, up to ``limit``."""
        upper = check_filter(job_filter, bulk=True)
        validation.check_note(note, "note")
        limit = bulk_limit(limit)
        now = self._clock.now()
        validation.check_pause_until(until, now)
        needing = dataclasses.replace(job_filter, paused=False)
        matched, need = await self._counts(tenant_id, job_filter, needing, upper)
        selected = await self._store.select_jobs(tenant_id, needing, upper, limit)
        if dry_run:
            return BulkResult(matched, len(selected), need, [s.shown for s in selected])
        shown = await self._store.pause_jobs(
            tenant_id,
            [s.job_id for s in selected],
            note=note,
            until=until,
            now=now,
            method=_SERVICE + "PauseJobs",
        )
        remaining = await self._store.count_jobs(tenant_id, needing, upper)
        return BulkResult(matched, len(shown), remaining, shown)

    async def resume(
        self, tenant_id: str, job_filter: JobFilter, *, note: str, dry_run: bool, limit: int
    ) -> BulkResult:
        """Resume the matched paused jobs, up to ``limit``, each from now."""
        upper = check_filter(job_filter, bulk=True)
        validation.check_note(note, "note")
        limit = bulk_limit(limit)
        needing = dataclasses.replace(job_filter, paused=True)
        matched, need = await self._counts(tenant_id, job_filter, needing, upper)
        selected = await self._store.select_jobs(tenant_id, needing, upper, limit)
        if dry_run:
            return BulkResult(matched, len(selected), need, [s.shown for s in selected])
        shown = await self.resume_selected(
            tenant_id, selected, note=note, method=_SERVICE + "ResumeJobs"
        )
        remaining = await self._store.count_jobs(tenant_id, needing, upper)
        return BulkResult(matched, len(shown), remaining, shown)

    async def resume_selected(
        self,
        tenant_id: str,
        selected: Sequence[Selected],
        *,
        note: str | None,
        method: str | None,
        changed_by: str | None = None,
    ) -> list[str]:
        """Resume ``selected`` (those still paused at the version read), each from now
        with the tenant's calendars as they are (checked current in the write, computed
        again when one changed meanwhile, as ResumeJob does)."""
        names = sorted({name for s in selected for name in s.schedule.calendars})
        for _ in range(OPTIMISTIC_ATTEMPTS):
            calendars = await self._store.calendars_named(tenant_id, names) if names else {}
            now = self._clock.now()
            resumes = await self._offload.run(tenant_id, resume_times, selected, calendars, now)
            try:
                return await self._store.resume_jobs(
                    tenant_id,
                    resumes,
                    note=note,
                    now=now,
                    calendars=list(calendars.values()),
                    method=method,
                    changed_by=changed_by,
                )
            except CalendarChanged:
                continue
        raise Aborted("the jobs' calendars kept changing while they were resumed; retry")

    async def delete(
        self, tenant_id: str, job_filter: JobFilter, *, dry_run: bool, limit: int
    ) -> BulkResult:
        """Delete the matched jobs, up to ``limit``; their unfinished runs are cancelled."""
        upper = check_filter(job_filter, bulk=True)
        limit = bulk_limit(limit)
        matched = await self._store.count_jobs(tenant_id, job_filter, upper)
        selected = await self._store.select_jobs(tenant_id, job_filter, upper, limit)
        if dry_run:
            return BulkResult(matched, len(selected), matched, [s.shown for s in selected])
        shown = await self._store.delete_jobs(
            tenant_id,
            [s.job_id for s in selected],
            now=self._clock.now(),
            method=_SERVICE + "DeleteJobs",
        )
        remaining = await self._store.count_jobs(tenant_id, job_filter, upper)
        return BulkResult(matched, len(shown), remaining, shown)

    async def trigger(
        self, tenant_id: str, job_filter: JobFilter, *, dry_run: bool, limit: int
    ) -> TriggerResult:
        """One MANUAL run for every matched job; refused when more than ``limit`` match."""
        upper = check_filter(job_filter, bulk=True)
        limit = bulk_limit(limit)
        matched = await self._store.count_jobs(tenant_id, job_filter, upper)
        if matched > limit:
            raise FailedPrecondition(
                f"the filters match {matched:,} jobs, more than the limit of {limit:,}:"
                " narrow them or raise limit (nothing was triggered)"
            )
        if dry_run:
            return TriggerResult(matched, matched, [])
        selected = await self._store.select_jobs(tenant_id, job_filter, upper, limit)
        now = self._clock.now()
        instants = await self._offload.run(tenant_id, trigger_times, selected, now)
        made = await self._store.trigger_jobs(
            tenant_id,
            instants,
            now=now,
            method=_SERVICE + "TriggerJobs",
            waiting_limit=self._max_waiting,
        )
        order = {s.job_id: i for i, s in enumerate(selected)}
        runs = [RunRef(job_id, at) for job_id, at in sorted(made, key=lambda m: order[m[0]])]
        return TriggerResult(matched, len(runs), runs)


class TimedPauses(PassLoop):
    """Resumes the jobs whose ``pause_until`` passed (a lifecycle component, one per
    API replica): every ``interval_s`` one probe of the partial index
    ``jobs_pause_until_idx`` (nearly always empty), then for each tenant with due jobs
    the resume ResumeJob makes, written by ``pause-until`` (the revisions' changed_by).
    Replicas may pick the same job: the write is conditional on the version read, so
    it is resumed once.

    Args:
        actions: The bulk actions (their resume).
        store: Database access.
        clock: The source of "now".
        interval_s: Seconds between passes (a job resumes up to this late).
        batch: Jobs resumed per pass at most (a pass with a full batch runs again at once).
    """

    name = "timed-pauses"
    transient: ClassVar[tuple[type[BaseException], ...]] = (Exception,)

    def __init__(
        self,
        actions: BulkActions,
        store: Store,
        clock: Clock,
        *,
        interval_s: float,
        batch: int = 1000,
    ) -> None:
        super().__init__()
        self._actions = actions
        self._store = store
        self._clock = clock
        self._interval_s = interval_s
        self._batch = batch

    @property
    def error_wait_s(self) -> float:
        return self._interval_s

    async def pass_once(self) -> float:
        resumed = await self.resume_due()
        return 0.0 if resumed >= self._batch else self._interval_s

    async def resume_due(self) -> int:
        """One pass now: the jobs due, resumed; how many were."""
        due = await self._store.due_timed_pauses(self._clock.now(), self._batch)
        by_tenant: dict[str, list[Selected]] = {}
        for job in due:
            by_tenant.setdefault(job.tenant_id, []).append(job)
        resumed = 0
        for tenant_id, jobs in by_tenant.items():
            shown = await self._actions.resume_selected(
                tenant_id, jobs, note="", method=None, changed_by=PAUSE_UNTIL_WRITER
            )
            resumed += len(shown)
            log.info(
                "resumed %d jobs whose pause ended",
                len(shown),
                extra={"action": "timed_resume", "tenant_id": tenant_id},
            )
        return resumed


__all__ = [
    "PAUSE_UNTIL_WRITER",
    "BulkActions",
    "BulkResult",
    "TimedPauses",
    "TriggerResult",
]
