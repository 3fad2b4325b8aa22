"""Run operations of JobService: trigger, backfill, list, get, replay, cancel.

The API only creates and edits ``job_runs`` rows; the scheduler publishes the QUEUED
ones it finds through ``check_at`` and the executors run them. Every run is looked up
through its job and the caller's tenant, so a run of another tenant's (or a deleted)
job is NOT_FOUND.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

from opentelemetry import trace

from sundial.api import validation
from sundial.api.kit import Pager, RequestKey, Requests
from sundial.api.kit.paging import INSTANT, UUID
from sundial.api.model import BackfillResult, JobFilter, Page, Run, RunFilter
from sundial.api.offload import Offload
from sundial.api.store import RequestClaim, RequestRecord, Store
from sundial.api.store._runs import stored_schedule
from sundial.core import tracing
from sundial.core.clock import Clock
from sundial.core.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from sundial.run import RunKind, RunRef, RunStatus
from sundial.schedule import CompiledSchedule, compile_schedule

TRIGGER_JOB = "TriggerJob"
MAX_BACKFILL = 1000

_US = timedelta(microseconds=1)
_RUNS = Pager("runs", (INSTANT,))
_TENANT_RUNS = Pager("tenant_runs", (INSTANT, UUID))

SCAN_BUDGET = 10_000
"""Runs one page of a tenant-wide ListRuns looks at when a filter the run index does not
serve is given (kinds, start times, a selector, late only): a page may then hold fewer
runs than asked before the last one, and each call stays bounded however rare its
matches are."""
# last_error of a run cancelled without a reason: the word its status is stored as.
_NO_REASON = RunStatus.CANCELLED.value


def with_due(run: Run, compiled: CompiledSchedule) -> Run:
    """``run`` with due_at filled: scheduled_at plus the job's jitter (none for MANUAL)."""
    if run.kind is RunKind.MANUAL:
        return dataclasses.replace(run, due_at=run.scheduled_at)
    return dataclasses.replace(run, due_at=compiled.dispatch_at(run.scheduled_at))


def _occurrences(compiled: CompiledSchedule, start: datetime, end: datetime) -> list[datetime]:
    """The fire times in [start, end), at most one more than :data:`MAX_BACKFILL`.

    A fixed-delay job has no fire times of its own in the past (they followed its runs'
    ends): its backfill is one run every delay from ``start``, as if each took no time.
    """
    instants: list[datetime] = []
    if compiled.fixed_delay is not None:
        at = start
        while at < end and len(instants) <= MAX_BACKFILL:
            instants.append(at)
            at += compiled.fixed_delay
        return instants
    cursor = start - _US
    while len(instants) <= MAX_BACKFILL:
        fire = compiled.next_fire(cursor)
        if fire is None or fire.at >= end:
            break
        instants.append(fire.at)
        cursor = fire.at
    return instants


class RunManager:
    """Run RPCs for one tenant at a time.

    Args:
        store: Database access.
        clock: The source of "now".
        request_retention: How long TriggerJob request ids are remembered.
        max_waiting: Runs made by TriggerJob and BackfillJob a tenant may have waiting to
            start at once (None: no limit); past it those calls are RESOURCE_EXHAUSTED.
        offload: Where long schedule computations run (a backfill's occurrences).
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        request_retention: timedelta = timedelta(hours=24),
        max_waiting: int | None = None,
        offload: Offload | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._requests = Requests(store, clock, request_retention)
        self._max_waiting = max_waiting
        self._offload = offload or Offload()

    async def _compiled(self, tenant_id: str, job_id: uuid.UUID) -> CompiledSchedule:
        found = await self._store.job_schedule(tenant_id, job_id)
        if found is None:
            raise NotFound(f"job {job_id} not found")
        schedule, calendars = found
        return compile_schedule(schedule, job_id=str(job_id), calendars=calendars)

    async def _run_of(self, tenant_id: str, record: RequestRecord) -> Run:
        assert record.job_id is not None and record.scheduled_at is not None
        return await self.get_run(tenant_id, RunRef(record.job_id, record.scheduled_at))

    async def trigger(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        *,
        request_id: str = "",
        request_hash: bytes = b"",
    ) -> Run:
        """A MANUAL run keyed by the trigger instant (moved by 1 µs on a collision)."""

        async def work(claim: RequestClaim | None) -> Run:
            now = self._clock.now()
            at = off_schedule(await self._compiled(tenant_id, job_id), now)
            # The run continues the caller's trace: its context is this call's span (the
            # gRPC instrumentation's, a child of any traceparent the caller sent).
            traceparent = tracing.traceparent_of(trace.get_current_span())
            run = await self._store.trigger(
                tenant_id,
                job_id,
                at,
                now,
                claim=claim,
                traceparent=traceparent,
                waiting_limit=self._max_waiting,
            )
            if run is None:
                raise NotFound(f"job {job_id} not found")
            return dataclasses.replace(run, due_at=run.scheduled_at)

        async def replay(record: RequestRecord) -> Run:
            return await self._run_of(tenant_id, record)

        key = RequestKey(TRIGGER_JOB, request_id, request_hash)
        return await self._requests.once(tenant_id, key, work, replay)

    async def backfill(
        self, tenant_id: str, job_id: uuid.UUID, start: datetime | None, end: datetime | None
    ) -> BackfillResult:
        """BACKFILL runs for the schedule's occurrences in [start, end), at most 1,000."""
        if start is None:
            raise InvalidArgument("start_time", "is required")
        if end is None:
            raise InvalidArgument("end_time", "is required")
        if end <= start:
            raise InvalidArgument("end_time", f"must be after start_time ({start.isoformat()})")
        now = self._clock.now()
        if end > now:
            raise InvalidArgument(
                "end_time", "must not be after now (future occurrences belong to the schedule)"
            )
        found = await self._store.job_schedule(tenant_id, job_id)
        if found is None:
            raise NotFound(f"job {job_id} not found")
        schedule, calendars = found
        # max_runs limits scheduled runs only; backfill ignores it. Calendars apply.
        compiled = compile_schedule(
            dataclasses.replace(schedule, max_runs=0), job_id=str(job_id), calendars=calendars
        )
        # Up to 1,001 fire-time searches: off the event loop, within the tenant's share.
        instants = await self._offload.run(tenant_id, _occurrences, compiled, start, end)
        truncated = len(instants) > MAX_BACKFILL
        next_start = instants[MAX_BACKFILL] if truncated else None
        instants = instants[:MAX_BACKFILL]
        created: list[Run] = []
        if instants:
            with _backfill_traces(job_id, instants) as traceparents:
                runs = await self._store.insert_runs(
                    tenant_id,
                    job_id,
                    instants,
                    RunKind.BACKFILL,
                    now,
                    traceparents=traceparents,
                    waiting_limit=self._max_waiting,
                )
            if runs is None:
                raise NotFound(f"job {job_id} not found")
            created = [with_due(run, compiled) for run in runs]
        return BackfillResult(
            runs=created,
            existing_count=len(instants) - len(created),
            truncated=truncated,
            next_start_time=next_start,
        )

    async def list_runs(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        run_filter: RunFilter,
        *,
        page_size: int,
        page_token: str,
    ) -> Page[Run]:
        """A page of the job's runs, newest scheduled_at first."""
        cursor = _RUNS.open(
            page_size,
            page_token,
            {
                "job": str(job_id),
                "statuses": sorted(s.value for s in run_filter.statuses),
                "kinds": sorted(k.value for k in run_filter.kinds),
                "after": run_filter.scheduled_after,
                "before": run_filter.scheduled_before,
            },
        )
        before = None if cursor.after is None else cursor.after[0]
        compiled = await self._compiled(tenant_id, job_id)
        runs = await self._store.list_runs(
            tenant_id, job_id, run_filter, before=before, limit=cursor.limit
        )
        # A run's size: its fixed fields and its (bounded) error text.
        page = cursor.page(
            runs, lambda run: [run.scheduled_at], size_of=lambda run: 512 + 4 * len(run.last_error)
        )
        return Page([with_due(run, compiled) for run in page.items], page.next_page_token)

    async def list_tenant_runs(
        self,
        tenant_id: str,
        run_filter: RunFilter,
        job_filter: JobFilter,
        *,
        page_size: int,
        page_token: str,
    ) -> Page[Run]:
        """A page of every run of the tenant's jobs, newest scheduled_at first, then by
        job uid descending (docs/design.md section 13)."""
        cursor = _TENANT_RUNS.open(
            page_size,
            page_token,
            {
                "statuses": sorted(s.value for s in run_filter.statuses),
                "kinds": sorted(k.value for k in run_filter.kinds),
                "after": run_filter.scheduled_after,
                "before": run_filter.scheduled_before,
                "started_after": run_filter.started_after,
                "started_before": run_filter.started_before,
                "late": run_filter.late_only,
                "jobs": job_filter.fingerprint(),
            },
        )
        post_filtered = bool(
            run_filter.kinds
            or run_filter.started_after
            or run_filter.started_before
            or run_filter.late_only
            or job_filter.selector
        )
        # Each status's range reads its share of the budget (without a post-filter, a
        # page: every run it reads is on the page unless its job was deleted).
        statuses = len(run_filter.statuses) or len(RunStatus)
        share = max(cursor.limit, -(-SCAN_BUDGET // statuses)) if post_filtered else cursor.limit
        scan = await self._store.list_tenant_runs(
            tenant_id,
            run_filter,
            after=cursor.after,
            job_filter=job_filter,
            now=self._clock.now(),
            share=share,
            limit=cursor.limit,
        )
        compiled: dict[uuid.UUID, CompiledSchedule] = {}
        runs = []
        for run, doc in scan.runs:
            if doc.get("jitter", "0s") == "0s" or run.kind is RunKind.MANUAL:
                # Due at its nominal time (as with_due would say), with no schedule
                # compiled: a page may hold runs of 50 different jobs.
                runs.append(dataclasses.replace(run, due_at=run.scheduled_at))
                continue
            if run.job_id not in compiled:
                schedule, calendars = stored_schedule(doc)
                compiled[run.job_id] = compile_schedule(
                    schedule, job_id=str(run.job_id), calendars=calendars
                )
            runs.append(with_due(run, compiled[run.job_id]))
        page = cursor.page(
            runs,
            lambda run: [run.scheduled_at, run.job_id],
            size_of=lambda run: 512 + 4 * len(run.last_error),
        )
        if page.next_page_token or len(runs) > cursor.size or scan.boundary is None:
            return page
        # A status's share of the scan ran out before its history did: go on after what
        # every status was read down to.
        return Page(page.items, cursor.token(list(scan.boundary)))

    async def get_run(self, tenant_id: str, ref: RunRef) -> Run:
        """One run of the tenant's job."""
        found = await self._store.get_run(tenant_id, ref.job_id, ref.scheduled_at)
        if found is None:
            raise NotFound(f"run {ref.key} not found")
        run, schedule, calendars = found
        return with_due(
            run, compile_schedule(schedule, job_id=str(ref.job_id), calendars=calendars)
        )

    async def replay(self, tenant_id: str, ref: RunRef) -> Run:
        """A DEAD or CANCELLED run back to QUEUED under the same run key."""
        run = await self._store.replay_run(
            tenant_id, ref.job_id, ref.scheduled_at, self._clock.now()
        )
        if run is None:
            current = await self.get_run(tenant_id, ref)
            if current.status is RunStatus.DEAD:
                # Its DeadLetter is still in the outbox: a replay now would orphan it.
                raise Unavailable(
                    f"run {current.run_key} is DEAD but its dead letter is not published "
                    "yet; retry the replay shortly"
                )
            raise FailedPrecondition(
                f"run {current.run_key} is {current.status.name}; only DEAD or CANCELLED "
                "runs can be replayed"
            )
        return with_due(run, await self._compiled(tenant_id, ref.job_id))

    async def cancel(self, tenant_id: str, ref: RunRef, reason: str) -> Run:
        """Cancel an unfinished run; a RUNNING one is asked to stop."""
        validation.check_note(reason, "reason")
        run = await self._store.cancel_run(
            tenant_id, ref.job_id, ref.scheduled_at, reason or _NO_REASON, self._clock.now()
        )
        if run is None:
            current = await self.get_run(tenant_id, ref)
            if current.status is RunStatus.CANCELLED:
                return current
            raise FailedPrecondition(
                f"run {current.run_key} is {current.status.name} and cannot be cancelled"
            )
        return with_due(run, await self._compiled(tenant_id, ref.job_id))


def off_schedule(compiled: CompiledSchedule, at: datetime) -> datetime:
    """``at``, moved by 1 µs steps until it is not one of the schedule's fire times.

    A manual run keyed at a nominal fire time would take that occurrence's run key and
    the scheduled run would never be created (dispatch inserts ON CONFLICT DO NOTHING).
    """
    step = timedelta(microseconds=1)
    while (fire := compiled.next_fire(at - step)) is not None and fire.at == at:
        at += step
    return at


@contextlib.contextmanager
def _backfill_traces(job_id: uuid.UUID, instants: Sequence[datetime]) -> Iterator[list[str] | None]:
    """One trace per backfilled run (up to 1,000 share one call: one trace each, not one
    for all), each started by a ``sundial.backfill`` span linked to this call's span;
    None while tracing is off."""
    if not tracing.enabled():
        yield None
        return
    call = trace.get_current_span().get_span_context()
    spans = [
        tracing.start_span(
            "sundial.backfill",
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "sundial.run_key": RunRef(job_id, at).key,
                "sundial.job_id": str(job_id),
                "sundial.run.kind": "backfill",
            },
            links=[call],
        )
        for at in instants
    ]
    try:
        yield [tracing.traceparent_of(span) for span in spans]
    finally:
        for span in spans:
            span.end()
