"""The dispatcher: claims due jobs of owned partitions and publishes their runs.

Each pass is one transaction per batch (docs/design.md section 6): claim up to ``batch_size``
due jobs with ``FOR UPDATE SKIP LOCKED``, insert their run rows (``ON CONFLICT DO
NOTHING``), advance ``next_run_at``; commit. Then one RunDispatch per partition batch is
published and the acknowledged runs' ``check_at`` moves forward. Publishing overlaps the
next batch's transaction (a bounded number in flight) so the database never waits on NATS.

Between passes it sleeps until the next due instant of its partitions (``next_due_at``,
one index probe per partition), at most ``poll_interval_s``: an idle scheduler starts a
run within milliseconds of its due time instead of up to a poll interval late. While
nothing is due within an interval, one worker looks again every interval and the others
wait for the next due instant (:meth:`Dispatcher._idle_wait`). Behind a
backlog whose runs all wait for admission, a worker rests as long as its pass took
before the next (:meth:`Dispatcher._backlog_pace`).

Ownership is asked before every batch: when the etcd lease is lost the owned set is
empty and dispatch stops at once. A stale owner cannot duplicate a run anyway: the row
lock, the advanced ``next_run_at`` and the run key primary key stop it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from opentelemetry import metrics, trace

from sundial.core import tracing
from sundial.core.clock import Clock, SystemClock
from sundial.core.loop import PassLoop
from sundial.core.telemetry import (
    DISPATCH_LAG,
    DISPATCH_LATENESS,
    OCCURRENCES_SKIPPED,
    RUNS_HELD,
    lateness_histogram,
)
from sundial.run import RunRef, RunStatus
from sundial.scheduler.admission import admit_at_dispatch
from sundial.scheduler.config import SchedulerConfig
from sundial.scheduler.model import ClaimedJob, DispatchOutcome, PlannedRun, PublishBatch
from sundial.scheduler.planning import (
    QUARANTINE,
    DefinitionCache,
    needs_live_counts,
    plan_batch,
    published_lateness,
    waits_for_last_run,
    with_last_run,
    with_live_counts,
)
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import TRANSIENT_ERRORS, DocumentCache, SchedulerStore, Transaction

log = logging.getLogger(__name__)

MAX_PUBLISHES_IN_FLIGHT = 4

MIN_WAIT_S = 0.002
"""Shortest wait between passes that found less than a batch."""

IDLE_POLLS = 10
"""How many poll intervals a worker other than the poller may wait when nothing is due
within one (:meth:`Dispatcher._idle_wait`)."""

WAKE_STAGGER_S = 0.02
"""How much later than the first the other workers wake for the same due instant
(about a small dispatch pass: the first has claimed what fell due by then)."""

BACKLOG_SHARE = 5
"""Behind a backlog, jobs due since it began are claimed first, in a pass of their own
while they are fewer than a batch; at least one pass in five takes the backlog, and at
least a fifth of each batch is the backlog's: newly due jobs cannot starve it."""

AHEAD_RUNS = 5_000
"""Runs of a backlog's tenants waiting for admission beyond which the worker feeding the
waiting list rests longer (:data:`AHEAD_REST`): the list is then seconds ahead of what
the executors lease of one tenant (a herd alone drains 1,500-2,500 a second on the
reference machine), and writing more of it sooner only takes cores from other tenants'
runs."""

AHEAD_REST = 4.0
"""How many times its pass the feeder rests while :data:`AHEAD_RUNS` wait (at most
``poll_interval_s``): a quarter of one worker's time instead of half."""


def backlog_tenants(claimed: list[ClaimedJob], batch: int) -> frozenset[str]:
    """The tenants that make a backlog whose first batch is ``claimed``: those holding
    at least a ``BACKLOG_SHARE``-th of it. The other tenants' jobs due with the backlog
    are claimed before its rest (:meth:`Dispatcher._claim`)."""
    counts = Counter(job.tenant_id for job in claimed)
    return frozenset(t for t, n in counts.items() if n >= max(1, batch // BACKLOG_SHARE))


class Dispatcher(PassLoop):
    """Lifecycle component running the dispatch loop.

    Args:
        store: The scheduler store.
        publisher: Sends batches to JetStream.
        owned: Returns the partitions this scheduler may dispatch right now.
        config: ``batch_size``, ``poll_interval_s``, ``publish_confirm_s``,
            ``unleased_republish_s``.
        clock: The source of "now".
        meter: Where the dispatch instruments go (default: global): the lateness
            histogram, the lag gauge and the skipped-occurrences counter.
        runs_waiting: Called after a pass that put runs on the waiting list (flow
            control): the sweeper's :meth:`~sundial.scheduler.sweeper.Sweeper.runs_waiting`.
    """

    name = "dispatcher"
    transient = TRANSIENT_ERRORS

    def __init__(
        self,
        store: SchedulerStore,
        publisher: RunPublisher,
        owned: Callable[[], Collection[int]],
        config: SchedulerConfig,
        clock: Clock | None = None,
        *,
        meter: metrics.Meter | None = None,
        runs_waiting: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self._store = store
        self._publisher = publisher
        self._owned = owned
        self._config = config
        self._clock = clock or SystemClock()
        self._runs_waiting = runs_waiting
        self._cache = DefinitionCache()
        self._documents = DocumentCache()
        meter = meter or metrics.get_meter("sundial.scheduler")
        self._lateness = lateness_histogram(
            meter, DISPATCH_LATENESS, "Due time to the dispatch that created the run, per run"
        )
        self._skipped = meter.create_counter(
            OCCURRENCES_SKIPPED,
            unit="{occurrence}",
            description="Occurrences that got no run started, by reason (misfire, overlap)",
        )
        self._held = meter.create_counter(
            RUNS_HELD,
            unit="{run}",
            description="Due runs that wait for admission (flow control) instead of being "
            "published at dispatch",
        )
        self._lag_s = 0.0
        meter.create_observable_gauge(
            DISPATCH_LAG,
            callbacks=[lambda _options: [metrics.Observation(self._lag_s)]],
            unit="s",
            description="Age of the oldest due job not claimed yet, as of the last pass",
        )
        self._start = 0
        self._backlog_since: datetime | None = None
        """Due jobs exceeded a batch at this instant and not all of those due by then are
        claimed yet (:meth:`_claim`)."""
        self._newer_alone = 0
        """Passes in a row that claimed only jobs due since the backlog began."""
        self._backlog_tenants: frozenset[str] = frozenset()
        """The tenants that made the backlog, while the other tenants' part of it is not
        claimed yet (empty: it is, or no backlog)."""
        self._feeder: asyncio.Task[object] | None = None
        """The worker that alone claims a backlog that only fills the waiting list
        (:meth:`_backlog_pace`); None: any worker may."""
        self._wake_at: datetime | None = None
        self._waker: asyncio.Task[object] | None = None
        """The worker waiting to wake first at ``_wake_at`` (:meth:`_wait_until`)."""
        self._poller: asyncio.Task[object] | None = None
        """The worker that looks for new work every ``poll_interval_s`` while nothing is
        due within one (:meth:`_idle_wait`)."""
        self._in_flight: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_PUBLISHES_IN_FLIGHT)
        self.dispatched = 0
        """Runs published by this dispatcher (for tests and benchmarks)."""

    async def run(self, started: Callable[[], None]) -> None:
        """Dispatch until stopped, with ``dispatch_workers`` concurrent loops."""
        started()
        try:
            async with asyncio.TaskGroup() as group:
                for index in range(self._config.dispatch_workers):
                    group.create_task(self.repeat(), name=f"dispatch-{index}")
        finally:
            await self._drain()

    @property
    def error_wait_s(self) -> float:
        """A failed pass is retried after the usual wait."""
        return self._config.poll_interval_s

    async def pass_once(self) -> float:
        """One pass; the wait before the next: 0 when the pass was full (more is due right
        now; a rest when it only filled the waiting list, :meth:`_backlog_pace`), else
        until the next job of the owned partitions comes due, at most
        ``poll_interval_s`` (a job created or resumed meanwhile is seen by then)."""
        started = time.monotonic()
        if self._waker is asyncio.current_task():
            self._waker = None  # awake: the next worker to wait for that instant wakes first
        outcome = await self.dispatch_once(wait_for_publish=False)
        if outcome.waiting and self._runs_waiting is not None:
            self._runs_waiting()
        if outcome.claimed >= self._config.batch_size:
            # More is due: the oldest job this batch claimed is about as old as the
            # oldest left (the claim takes each partition's oldest first).
            self._lag_s = outcome.oldest_due_age_s
            return await self._backlog_pace(outcome, time.monotonic() - started)
        poll_s = self._config.poll_interval_s
        since = self._backlog_since
        if since is not None and self._fed_by_another():
            # The backlog is another worker's: wait for the next job due after it began.
            due = await self._store.next_due_at(sorted(self._owned()), after=since)
            if due is None:
                return poll_s
            return self._wait_until(due, self._clock.now())
        due = await self._store.next_due_at(sorted(self._owned()))
        now = self._clock.now()
        self._lag_s = max(0.0, (now - due).total_seconds()) if due is not None else 0.0
        if due is None:
            return self._idle_wait(None)
        return self._wait_until(due, now)

    def _wait_until(self, due: datetime, now: datetime) -> float:
        """The wait for the next job, due at ``due``: at most ``poll_interval_s``; a
        little longer (:data:`WAKE_STAGGER_S`) when another worker already waits for
        that instant, so the first to wake claims what fell due alone. Woken together,
        the workers split one tenant's jobs due at once, and the claim that found the
        tenant's admission lock taken by the other put its share on the waiting list,
        dispatched by the sweeper 0.1-0.25 s later (docs/design.md section 7)."""
        poll_s = self._config.poll_interval_s
        # Due already yet not claimed: another worker holds it (SKIP LOCKED), or the
        # database clock is a hair behind ours; look again very soon, without spinning.
        wait = min(poll_s, max(MIN_WAIT_S, (due - now).total_seconds()))
        me = asyncio.current_task()
        waker = self._waker
        if due == self._wake_at and waker is not None and waker is not me and not waker.done():
            return wait + WAKE_STAGGER_S
        if wait < poll_s:
            self._wake_at, self._waker = due, me
            return wait
        return self._idle_wait((due - now).total_seconds())

    def _idle_wait(self, until_due_s: float | None) -> float:
        """The wait of a worker with nothing due within ``poll_interval_s`` (the next due
        job ``until_due_s`` away, None: none): one worker at a time, the poller, looks
        again every interval (a job created or resumed meanwhile is seen by then); the
        others wait for the next due job, at most :data:`IDLE_POLLS` intervals, and a
        backlog found by the poller wakes them (:meth:`_claim`). Four workers each
        polling every interval cost PostgreSQL a claim and a next-due probe of every
        owned partition per worker and interval. The others wake :data:`WAKE_STAGGER_S`
        after the due instant: the poller, within an interval of it by then, wakes at
        it (:meth:`_wait_until`). The worker feeding a backlog (:meth:`_backlog_pace`)
        polls no more: the poller is the worker that wakes first at the next due
        instant, and a feeder wakes only when its rest ends, so every other worker
        woke :data:`WAKE_STAGGER_S` late, all at once, for as long as it fed."""
        poll_s = self._config.poll_interval_s
        me = asyncio.current_task()
        poller = self._poller
        if poller is None or poller is me or poller.done() or poller is self._feeder:
            self._poller = me
            return poll_s
        longest = poll_s * IDLE_POLLS
        if until_due_s is None:
            return longest
        return min(longest, max(poll_s, until_due_s + WAKE_STAGGER_S))

    async def _backlog_pace(self, outcome: DispatchOutcome, took_s: float) -> float:
        """The wait after a full pass: 0, unless it published nothing and put runs on
        the waiting list, behind a backlog (docs/design.md section 7, "Flow control"). Then
        dispatching more of that backlog at once only lengthens the waiting list while
        it takes the event loop and the database from everyone else's leases and
        completions: from then on one worker alone, this one, claims the backlog (the
        others take only the jobs due since it began, :meth:`_claim`), and it rests as
        long as the pass took, :data:`AHEAD_REST` times as long while :data:`AHEAD_RUNS`
        of those tenants' runs wait already (at most ``poll_interval_s``). With a single
        worker it rests no later than the next job due after the backlog began, which is
        claimed first; with more, another worker claims that one when it falls due."""
        since = self._backlog_since
        if since is None or not outcome.waiting or outcome.batches:
            self._feeder = None
            return 0.0
        self._feeder = asyncio.current_task()
        rest = min(self._config.poll_interval_s, took_s)
        ahead = await self._store.waiting_runs(sorted(outcome.waiting_tenants), AHEAD_RUNS)
        if ahead >= AHEAD_RUNS:
            rest = min(self._config.poll_interval_s, took_s * AHEAD_REST)
        if self._config.dispatch_workers > 1:
            return rest
        due = await self._store.next_due_at(sorted(self._owned()), after=since)
        if due is not None:
            rest = min(rest, max(0.0, (due - self._clock.now()).total_seconds()))
        return rest

    def _fed_by_another(self) -> bool:
        """Another worker, still running, claims the backlog alone (:meth:`_backlog_pace`)."""
        feeder = self._feeder
        return feeder is not None and feeder is not asyncio.current_task() and not feeder.done()

    async def dispatch_once(self, *, wait_for_publish: bool = True) -> DispatchOutcome:
        """Run one dispatch transaction and publish its batches.

        Args:
            wait_for_publish: Wait for the publishes and their confirmation (tests);
                the loop lets them overlap the next transaction instead.
        """
        owned = sorted(self._owned())
        if not owned:
            return DispatchOutcome()
        # The claim walks the partitions in the order given (one index probe each, see
        # claim_due_jobs); starting each batch further along keeps a backlog in low
        # partitions from always going first.
        self._start = (self._start + 1) % len(owned)
        owned = owned[self._start :] + owned[: self._start]
        now = self._clock.now()
        outcome = DispatchOutcome()
        spans: list[trace.Span] = []
        async with contextlib.AsyncExitStack() as stack:
            # Entered first, so it ends the runs' spans after the commit (or the error).
            stack.callback(_end_all, spans)
            tx = await stack.enter_async_context(self._store.transaction())
            claimed = await self._claim(tx, owned, now)
            if not claimed:
                return outcome
            outcome.claimed = len(claimed)
            outcome.oldest_due_age_s = max(
                0.0, (now - min(j.next_run_at for j in claimed)).total_seconds()
            )
            awaited = [j for j in claimed if waits_for_last_run(j)]
            if awaited:  # fixed-delay jobs: their last run's end (docs/design.md section 4)
                last = await tx.last_scheduled_runs(awaited)
                claimed = [with_last_run(j, last.get(j.job_id)) for j in claimed]
            live = await tx.count_live_runs([j.job_id for j in claimed if needs_live_counts(j)])
            if live:
                claimed = [with_live_counts(j, live.get(j.job_id)) for j in claimed]
            plan = plan_batch(claimed, now, self._cache)
            await tx.quarantine_jobs(plan.quarantined, now + QUARANTINE)
            await tx.cancel_other_runs(plan.cancel_other, now)
            runs, waiting, weights = await self._admit(tx, plan.runs, now)
            traceparents = _start_traces(runs, claimed, spans) if tracing.enabled() else None
            outcome.inserted, outcome.batches = await tx.insert_runs(
                runs,
                now,
                confirm_until=now + timedelta(seconds=self._config.publish_confirm_s),
                traceparents=traceparents,
                waiting=waiting,
                weights=weights,
            )
            await tx.advance_jobs(plan.advances, now)
        outcome.waiting = len(waiting)
        outcome.waiting_tenants = frozenset(r.tenant_id for r in waiting)
        if waiting:
            by_tenant = self._config.metrics_tenant_attribute
            for tenant, count in Counter(r.tenant_id for r in waiting).items():
                self._held.add(count, {"tenant": tenant} if by_tenant else {})
        outcome.lateness_ms.extend(published_lateness([r for r in runs if r not in waiting], now))
        # Recorded after the commit: a rolled-back batch is retried and counted then.
        for lateness_ms in outcome.lateness_ms:
            self._lateness.record(lateness_ms / 1000)
        missed = sum(a.missed for a in plan.advances)
        overlapped = sum(a.skipped for a in plan.advances)
        if missed:
            self._skipped.add(missed, {"reason": "misfire"})
        if overlapped:
            self._skipped.add(overlapped, {"reason": "overlap"})
        if outcome.batches:
            await self._slots.acquire()
            task = asyncio.create_task(self._publish(outcome.batches))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)
            if wait_for_publish:
                await task
        return outcome

    async def _claim(self, tx: Transaction, owned: list[int], now: datetime) -> list[ClaimedJob]:
        """Up to a batch of due jobs, oldest first; behind a backlog, those that fell due
        since it began go first (docs/design.md section 7, "Flow control"): one tenant's
        herd being dispatched holds back no one's newly due jobs. Fewer than a batch of
        them are claimed alone, so their runs commit in a small transaction instead of
        waiting for a batch of the backlog to be written; the backlog still gets at
        least one pass in ``BACKLOG_SHARE`` and a ``BACKLOG_SHARE``-th of every batch.
        Once per backlog, the jobs of tenants other than those that made it, due with it,
        are claimed alone too (with the newly due), before the backlog's rest."""
        batch = self._config.batch_size
        since = self._backlog_since
        if since is None:
            claimed = await tx.claim_due_jobs(owned, batch, now, self._documents)
            if len(claimed) >= batch:
                self._backlog_since = now  # more is due than a batch: a backlog begins
                self._feeder = None
                self._backlog_tenants = backlog_tenants(claimed, batch)
                self.wake()  # the workers waiting for their next due job help with it
            return claimed
        newer = await tx.claim_due_jobs(owned, batch, now, self._documents, due_after=since)
        if self._backlog_tenants and len(newer) < batch:
            # Once per backlog: the other tenants' jobs due with it (a top-of-the-hour
            # cron beside one tenant's herd), alone, before the herd's rest.
            others = await tx.claim_due_jobs(
                owned,
                batch - len(newer),
                now,
                self._documents,
                due_until=since,
                except_tenants=sorted(self._backlog_tenants),
            )
            self._backlog_tenants = frozenset()
            if others:
                return newer + others
        if 0 < len(newer) < batch and self._newer_alone < BACKLOG_SHARE - 1:
            self._newer_alone += 1
            return newer
        if self._fed_by_another():
            return newer
        self._newer_alone = 0
        room = max(batch - len(newer), batch // BACKLOG_SHARE)
        older = await tx.claim_due_jobs(owned, room, now, self._documents, due_until=since)
        if len(older) < room:  # the backlog as of `since` is claimed
            self._backlog_since = now if len(newer) >= batch else None
            self._feeder = None
            if self._backlog_since is not None:
                self._backlog_tenants = backlog_tenants(newer, batch)
        return newer + older

    async def _admit(
        self, tx: Transaction, runs: list[PlannedRun], now: datetime
    ) -> tuple[list[PlannedRun], dict[PlannedRun, bool], dict[str, int]]:
        """Admission of the runs due now (admission.py): ``runs`` (with rate-limit keys
        resolved where a tenant has limits), those of them that wait, each with
        whether its rate-limit key holds it, and the tenants' fair-sharing weights."""
        due = [r for r in runs if r.status is RunStatus.QUEUED and r.due_at <= now]
        if not due:
            return runs, {}, {}
        flows = await tx.lock_admission(
            {r.tenant_id for r in due},
            self._config.tenant_window,
            self._config.fair_weight,
            now,
            wait=False,
        )
        if any(flow.keys for flow in flows.values()):
            runs = await tx.resolve_rate_keys(runs, flows, now)
            due = [r for r in runs if r.status is RunStatus.QUEUED and r.due_at <= now]
        weights = {tenant: flow.weight for tenant, flow in flows.items()}
        return runs, admit_at_dispatch(due, flows, now), weights

    async def _publish(self, batches: list[PublishBatch]) -> None:
        try:
            now = self._clock.now()
            acked = await self._publisher.publish_all(batches, now)
            if acked:
                recheck = now + timedelta(seconds=self._config.unleased_republish_s)
                try:
                    await self._store.confirm_published(acked, recheck)
                except TRANSIENT_ERRORS as exc:
                    # Harmless: the runs are republished after publish_confirm_s.
                    log.warning("confirm failed: %s", exc, extra={"action": "dispatch"})
                self.dispatched += sum(len(b.runs) for b in acked)
        finally:
            self._slots.release()

    async def _drain(self) -> None:
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)


def _start_traces(
    runs: list[PlannedRun], claimed: list[ClaimedJob], spans: list[trace.Span]
) -> list[str | None]:
    """Start each run's trace (a ``sundial.dispatch`` span, appended to ``spans``) and
    return the contexts to store with the rows: one span per run that will run, none
    for a skipped one, and nothing else per row (docs/design.md section 9). The first
    runs of a new job link to the call that created it."""
    created = {
        job.job_id: tracing.span_context_of(job.create_traceparent)
        for job in claimed
        if job.create_traceparent
    }
    contexts: list[str | None] = []
    for run in runs:
        if run.status is RunStatus.SKIPPED:
            contexts.append(None)
            continue
        attributes: dict[str, str | int] = {
            "sundial.run_key": RunRef(run.job_id, run.scheduled_at).key,
            "sundial.job_id": str(run.job_id),
            "sundial.run.kind": "scheduled",
            "sundial.run.status": run.status.value,
        }
        if run.lateness_ms is not None:
            attributes["sundial.lateness_ms"] = run.lateness_ms
        span = tracing.start_span(
            "sundial.dispatch",
            kind=trace.SpanKind.PRODUCER,
            attributes=attributes,
            links=[created.get(run.job_id)],
        )
        spans.append(span)
        contexts.append(tracing.traceparent_of(span))
    return contexts


def _end_all(spans: list[trace.Span]) -> None:
    for span in spans:
        span.end()
