"""What a dispatch transaction writes for the jobs it claimed: a pure function.

For each claimed job: the schedule's occurrences due now under the misfire policy
(:func:`sundial.schedule.plan_misfire`), each turned into a run row whose status follows
the overlap policy, and the job's next fire time. ``max_runs`` and ``end_time`` end the
schedule (``next_run_at`` NULL).

A fixed-delay job (``IntervalSchedule.from_end``, docs/design.md section 4) has one
occurrence at a time, at ``max(next_run_at, end of its last scheduled run + delay)``, and
none while that run is unfinished: :func:`plan_fixed_delay`.

Jitter: a job is claimed when its nominal time is due, and planned as of the moment the
first occurrence's jittered due time arrives, so the claimed occurrence always gets its
row now; a row whose due time is still ahead is inserted ``queued`` with ``check_at`` at
its due time, and the sweeper publishes it then.

Overlap is decided against the job's unfinished runs (counted in the dispatch transaction,
only for jobs whose policy looks at them) plus the runs planned before it in the same
batch, so a CATCH_UP burst follows the overlap policy too.

A job that cannot be planned is quarantined (``jobs.dispatch_not_before``) without
touching its nominal ``next_run_at``; the rest of the batch goes on.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import uuid
from collections import OrderedDict
from datetime import datetime, timedelta

from sundial.job import (
    BUFFER_ALL_LIMIT,
    RESOLVED_CALENDARS_KEY,
    JobPolicies,
    OverlapPolicy,
    calendars_from_json,
    policies_from_json,
    schedule_from_json,
)
from sundial.run import ACTIVE_STATUSES, RunStatus, SkipReason
from sundial.schedule import (
    Calendar,
    CompiledSchedule,
    IntervalSpec,
    MisfirePlan,
    Schedule,
    compile_schedule,
    depends_on_job_id,
    plan_misfire,
)
from sundial.scheduler.model import BatchPlan, ClaimedJob, JobAdvance, PlannedRun

log = logging.getLogger(__name__)

QUARANTINE = timedelta(minutes=5)
"""How long a job that cannot be planned waits before the next try (``dispatch_not_before``)."""


class DefinitionCache:
    """Compiled schedules by (job_id, digest of the schedule document).

    Keyed by the document, not the job's version: an entry can never pair a job
    with a schedule it no longer has, whatever order a claim read the jobs row and the
    definition in. Policies are decoded per distinct document (shared by a herd); the
    schedule library's own caches make a herd sharing one expression cost one
    computation of the next fire time.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self._entries: OrderedDict[tuple[uuid.UUID, bytes], CompiledSchedule] = OrderedDict()
        self._max = max_entries

    def get(self, job: ClaimedJob) -> tuple[CompiledSchedule, JobPolicies]:
        """The compiled schedule and policies of ``job``.

        Raises:
            ValueError, SundialError: The stored definition is invalid.
        """
        shared = _shared_compiled(job.schedule)
        if shared is not None:
            return shared, _policies(job.policies)
        # A digest, not the text: a copy of the document per cached job would weigh more
        # than the compiled schedule.
        key = (job.job_id, hashlib.blake2b(job.schedule.encode(), digest_size=16).digest())
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found, _policies(job.policies)
        schedule, calendars = _schedule(job.schedule)
        compiled = compile_schedule(schedule, job_id=str(job.job_id), calendars=calendars)
        policies = _policies(job.policies)
        self._entries[key] = compiled
        if len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return compiled, policies


@functools.lru_cache(maxsize=4096)
def _schedule(text: str) -> tuple[Schedule, dict[str, Calendar]]:
    """The schedule and the contents of the calendars it names (the dispatch document of
    migration 0015). Jobs of a herd share a handful of distinct documents: decode each
    once."""
    doc = json.loads(text)
    return schedule_from_json(doc), calendars_from_json(doc.get(RESOLVED_CALENDARS_KEY))


@functools.lru_cache(maxsize=4096)
def _shared_compiled(text: str) -> CompiledSchedule | None:
    """One compiled schedule for every job with this document, when nothing in it depends
    on the job id (no jitter, no ``H``); None otherwise. A herd then costs one compile."""
    schedule, calendars = _schedule(text)
    if depends_on_job_id(schedule):
        return None
    return compile_schedule(schedule, job_id="", calendars=calendars)


@functools.lru_cache(maxsize=4096)
def _policies(text: str) -> JobPolicies:
    return policies_from_json(json.loads(text))


def _ms(delta: timedelta) -> int:
    return int(delta / timedelta(milliseconds=1))


def plan_occurrences(
    compiled: CompiledSchedule,
    policies: JobPolicies,
    due: datetime,
    now: datetime,
    fired_count: int,
) -> MisfirePlan:
    """The occurrences of one claimed job to run now, and its next nominal time.

    :func:`plan_misfire` as of ``max(now, due + jitter)`` (see the module doc), with a
    shortcut for the common case that gives the same answer: no jitter, the one due
    occurrence on time and the next one still ahead. A herd of on-time jobs then costs
    one cached next-fire lookup each.

    A ``due`` its calendars now refuse is not an occurrence (a job write that raced an
    UpdateCalendar stored it): planning starts from the next allowed fire time instead.
    """
    if not compiled.allows(due):
        fire = compiled.next_fire(due, fired_count)
        if fire is None or fire.at > now:
            return MisfirePlan(next_due=None if fire is None else fire.at)
        due = fire.at
    if not compiled.jitter and timedelta(0) <= now - due <= policies.misfire_threshold:
        remaining = compiled.remaining_runs(fired_count)
        in_bounds = compiled.end_time is None or due <= compiled.end_time
        if remaining != 0 and in_bounds:
            fire = compiled.next_fire(due)
            following = fire.at if fire is not None else None
            if following is None or following > now:
                return MisfirePlan(run_now=[due], next_due=None if remaining == 1 else following)
    return plan_misfire(
        compiled,
        due,
        max(now, compiled.dispatch_at(due)),
        policies.misfire,
        threshold=policies.misfire_threshold,
        catchup_window=policies.catchup_window,
        max_catchup=policies.max_catchup,
        fired_count=fired_count,
    )


def plan_fixed_delay(compiled: CompiledSchedule, job: ClaimedJob, now: datetime) -> MisfirePlan:
    """The occurrence of a claimed fixed-delay job to run now, and its next due time.

    While the run of its last occurrence is unfinished: none, and a re-check one delay
    later. Otherwise the occurrence is at ``max(next_run_at, end + delay)`` (the claimed
    time carries a resume's or a new schedule's delay; the end, a run the ledger's re-arm
    missed); still ahead, that becomes the due time. A due one fires at once however
    late (there is never more than one), unless ``end_time`` or ``max_runs`` ended the
    schedule. After it, ``next_run_at`` is a re-check one delay from now: the end of this
    run moves it (the ledger, the sweeper), or the re-check finds the run's end itself.
    """
    delay = compiled.fixed_delay
    assert delay is not None
    recheck: datetime | None = now + delay
    if compiled.end_time is not None and recheck is not None and recheck > compiled.end_time:
        recheck = None  # every later occurrence would be after end_time
    if job.last_run_live:
        return MisfirePlan(next_due=recheck)
    due = job.next_run_at
    if job.last_run_ended is not None:
        due = max(due, job.last_run_ended + delay)
    if due > now:
        return MisfirePlan(next_due=due)
    remaining = compiled.remaining_runs(job.fired_count)
    if remaining == 0 or (compiled.end_time is not None and due > compiled.end_time):
        return MisfirePlan()
    return MisfirePlan(run_now=[due], next_due=None if remaining == 1 else recheck)


def waits_for_last_run(job: ClaimedJob) -> bool:
    """Whether planning ``job`` needs its last scheduled run's status and end: a
    fixed-delay job that fired before."""
    # The text test first: the document names from_end only when it is true, and a
    # herd of other jobs must not pay a decode each when the cache holds too few.
    if job.last_fire_at is None or '"from_end"' not in job.schedule:
        return False
    try:
        spec = _schedule(job.schedule)[0].spec
    except Exception:
        return False  # planning quarantines the job
    return isinstance(spec, IntervalSpec) and spec.from_end


def with_last_run(job: ClaimedJob, last: tuple[RunStatus, datetime | None] | None) -> ClaimedJob:
    """``job`` with its last scheduled run's state (None: no such row, nothing to wait
    for)."""
    if last is None:
        return job
    status, finished_at = last
    if status in ACTIVE_STATUSES:
        return dataclasses.replace(job, last_run_live=True)
    return dataclasses.replace(job, last_run_ended=finished_at)


def needs_live_counts(job: ClaimedJob) -> bool:
    """Whether ``job``'s unfinished runs must be counted before planning it: every
    overlap policy but ALLOW_ALL looks at them."""
    try:
        return _policies(job.policies).overlap is not OverlapPolicy.ALLOW_ALL
    except Exception:
        return False  # planning quarantines the job; no count needed


def with_live_counts(job: ClaimedJob, counts: tuple[int, int] | None) -> ClaimedJob:
    """``job`` with its (unfinished, pending) run counts (None: it has none)."""
    unfinished, pending = counts or (0, 0)
    return dataclasses.replace(job, unfinished=unfinished, pending=pending)


def published_lateness(runs: list[PlannedRun], now: datetime) -> list[int]:
    """Lateness (ms) of each planned run published at once (QUEUED and due), for the
    dispatch-lateness histogram."""
    return [
        run.lateness_ms
        for run in runs
        if run.status is RunStatus.QUEUED and run.due_at <= now and run.lateness_ms is not None
    ]


def plan_batch(claimed: list[ClaimedJob], now: datetime, cache: DefinitionCache) -> BatchPlan:
    """Decide the runs and the next fire time of every claimed job (see module doc).

    A job that cannot be planned (an unreadable definition, or any error while planning
    it) is quarantined: it gets no runs, keeps its nominal ``next_run_at`` and is not
    claimed again for a while, and the rest of the batch is dispatched as usual.
    """
    batch = BatchPlan()
    for job in claimed:
        try:
            runs, advance, cancel_other = _plan_job(job, now, cache)
        except Exception:
            # Broad on purpose: one job's bad data or a bug its definition triggers must
            # not roll back the batch (and every batch after it) for all owned partitions.
            log.exception(
                "job cannot be planned; quarantined",
                extra={"action": "dispatch", "job_id": str(job.job_id)},
            )
            batch.quarantined.append(job.job_id)
            continue
        batch.runs.extend(runs)
        batch.advances.append(advance)
        if cancel_other:
            batch.cancel_other.append(job.job_id)
    return batch


def _plan_job(
    job: ClaimedJob, now: datetime, cache: DefinitionCache
) -> tuple[list[PlannedRun], JobAdvance, bool]:
    """One job's runs, its advance, and whether CANCEL_OTHER cancels its older runs."""
    compiled, policies = cache.get(job)
    if compiled.fixed_delay is not None:
        plan = plan_fixed_delay(compiled, job, now)
    else:
        plan = plan_occurrences(compiled, policies, job.next_run_at, now, job.fired_count)
    unfinished, pending, overlap_skipped = job.unfinished, job.pending, 0
    lateness: int | None = None
    runs: list[PlannedRun] = []
    # Only runs that existed before this batch are cancelled; a catch-up burst of this
    # batch runs whole.
    cancel_other = (
        policies.overlap is OverlapPolicy.CANCEL_OTHER and job.unfinished > 0 and bool(plan.run_now)
    )
    for at in plan.run_now:
        due_at = compiled.dispatch_at(at)
        status, reason = RunStatus.QUEUED, None
        policy = policies.overlap
        if unfinished and policy is OverlapPolicy.SKIP:
            status, reason = RunStatus.SKIPPED, SkipReason.OVERLAP
        elif unfinished and policy in (OverlapPolicy.BUFFER_ONE, OverlapPolicy.BUFFER_ALL):
            limit = 1 if policy is OverlapPolicy.BUFFER_ONE else BUFFER_ALL_LIMIT
            if pending < limit:
                status = RunStatus.PENDING
            else:
                status, reason = RunStatus.SKIPPED, SkipReason.BUFFER_FULL
        if status is RunStatus.SKIPPED:
            overlap_skipped += 1
        else:
            unfinished += 1
            pending += status is RunStatus.PENDING
        run_lateness = _ms(now - due_at) if due_at <= now else None
        if status is RunStatus.QUEUED and run_lateness is not None:
            lateness = run_lateness
        runs.append(
            PlannedRun(
                job_id=job.job_id,
                scheduled_at=at,
                tenant_id=job.tenant_id,
                partition_id=job.partition_id,
                status=status,
                due_at=due_at,
                lateness_ms=run_lateness,
                skip_reason=reason,
                priority=policies.priority,
                rate_key=policies.rate_limit_key,
            )
        )
    advance = JobAdvance(
        job_id=job.job_id,
        next_run_at=plan.next_due,
        fired=len(plan.run_now),
        last_fire_at=plan.run_now[-1] if plan.run_now else None,
        lateness_ms=lateness,
        missed=plan.skipped,
        skipped=overlap_skipped,
        missed_first=plan.first_skipped,
        missed_last=plan.last_skipped,
        missed_exact=plan.skipped_exact,
    )
    return runs, advance, cancel_other
