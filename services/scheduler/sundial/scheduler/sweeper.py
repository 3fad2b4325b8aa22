"""The sweeper: acts on owned runs whose ``check_at`` passed (docs/design.md sections 5-6).

One index, ``(partition_id, check_at) WHERE status IN (queued, running, retrying)``,
serves every sweep: unconfirmed or never-leased publishes are republished under a new
dispatch sequence, expired leases make their run leasable again (and republish it),
retries that are due are published, and buffered runs whose blocker ended are released.
Dead runs are an outbox of their own (``(partition_id, check_at) WHERE status = 'dead'
AND check_at IS NOT NULL``): each pass publishes the due DeadLetters and clears
``check_at`` once JetStream acknowledged them, so a crash or a NATS outage after a run
died delays its letter, never loses it.
What each due run becomes is :func:`sundial.run.due_check` (an expired lease counts as a
failed attempt: the run is queued again, dead on its last attempt, or cancelled when a
cancel was requested); the store locks the rows and writes the result.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from datetime import timedelta

from opentelemetry import metrics, trace

from sundial.core import tracing
from sundial.core.clock import Clock, SystemClock
from sundial.core.loop import PassLoop
from sundial.core.telemetry import LEASES_EXPIRED, RUNS_ADMITTED
from sundial.run import RunState, RunStatus, Transition, due_check
from sundial.scheduler.config import SchedulerConfig
from sundial.scheduler.model import DeadLetterRun, SweepOutcome
from sundial.scheduler.publisher import RunPublisher, publish_due_dead_letters
from sundial.scheduler.store import TRANSIENT_ERRORS, SchedulerStore

log = logging.getLogger(__name__)

LEASE_WAKE_GAP_S = 0.01
"""The least time between admission passes that leases brought (:meth:`Sweeper.
runs_leased`): at most 100 a second beside the ``admit_interval_s`` passes."""


class Sweeper(PassLoop):
    """Lifecycle component running the sweep loop.

    Args:
        store: The scheduler store.
        publisher: Sends the republished batches.
        owned: Returns the partitions this scheduler may act on now.
        config: ``sweep_interval_s``, ``batch_size``, ``publish_confirm_s``,
            ``unleased_republish_s``.
        clock: The source of "now".
        meter: Where ``sundial.leases.expired`` goes (default: global).
    """

    name = "sweeper"
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
    ) -> None:
        super().__init__()
        self._store = store
        self._publisher = publisher
        self._owned = owned
        self._config = config
        self._clock = clock or SystemClock()
        self._admission_cursor = ""
        self._next_whole = 0.0  # monotonic instant of the next whole sweep
        self._admitting = False
        """The last pass left runs waiting: the next one comes within admit_interval_s."""
        self._leased = 0
        """Runs this scheduler's ledger leased since the last pass started."""
        self._lease_woken = False
        """Leases woke the wait after the last pass (:meth:`runs_leased`)."""
        self._pass_ended = 0.0  # monotonic instant the last pass ended
        meter = meter or metrics.get_meter("sundial.scheduler")
        self._expired = meter.create_counter(
            LEASES_EXPIRED,
            unit="{run}",
            description="Leases that lapsed (the executor stopped heartbeating), by what "
            "the run became",
        )
        self._admitted = meter.create_counter(
            RUNS_ADMITTED,
            unit="{run}",
            description="Waiting runs admitted (flow control): their tenant's window freed "
            "and their key's rate limit allowed",
        )

    @property
    def error_wait_s(self) -> float:
        """A failed pass is retried after the usual wait."""
        return self._config.sweep_interval_s

    async def pass_once(self) -> float:
        """One pass; the wait before the next (0 when the pass was full).

        A whole sweep runs every ``sweep_interval_s`` (at once again after a full one);
        while runs wait for admission, the passes in between only admit: the sweep's
        probes of its partial indexes (one per owned partition and day partition each)
        cost milliseconds, and at 20 passes a second they were PostgreSQL's largest
        statements in a herd. Recovery keeps the sweep's own cadence."""
        if self._lease_woken:
            # Woken by a lease: such a pass comes at least LEASE_WAKE_GAP_S after the
            # last, so a stream of leases while nothing can be admitted (a rate limit's
            # runs wait) costs a bounded number of passes.
            self._lease_woken = False
            gap = min(LEASE_WAKE_GAP_S, self._config.admit_interval_s)
            rest = self._pass_ended + gap - time.monotonic()
            if rest > 0:
                await asyncio.sleep(rest)
        started = time.monotonic()
        whole = started >= self._next_whole
        self._leased = 0
        try:
            outcome = await self.sweep_once(whole=whole)
        finally:
            self._pass_ended = time.monotonic()
        if whole:
            self._next_whole = started + self._config.sweep_interval_s
        done = max(outcome.checked, len(outcome.dead_letters))
        # A full pass: more is due right now.
        if done >= self._config.batch_size:
            self._next_whole = 0.0
            return 0.0
        until_whole = max(0.0, self._next_whole - time.monotonic())
        # Runs waiting for admission are looked at again soon: a window frees as runs
        # finish, on any scheduler's ledger, and a rate limit's tokens refill.
        self._admitting = outcome.waiting > 0
        if outcome.waiting:
            return min(self._config.admit_interval_s, until_whole)
        return self._config.sweep_interval_s if whole else until_whole

    def runs_waiting(self) -> None:
        """A dispatch put runs on the waiting list: admit them within
        ``admit_interval_s``, not at the next whole sweep (the waits of a tenant whose
        admission lock another dispatch held, docs/design.md section 7)."""
        if not self._admitting:
            self._admitting = True
            self.wake()

    def runs_leased(self, count: int) -> None:
        """This scheduler's ledger leased ``count`` runs, which frees room in their
        tenants' windows: while runs wait for admission, once a quarter of a window
        (``tenant_window / 4``) was leased since the last pass started, the next pass
        comes as soon as the last one ended (at least ``LEASE_WAKE_GAP_S`` after it)
        instead of ``admit_interval_s`` after it (docs/design.md section 7). Leases on
        another scheduler's ledger are found by the interval."""
        if not self._admitting:
            return
        self._leased += count
        if self._leased >= max(1, self._config.tenant_window // 4):
            self._lease_woken = True
            self.wake()

    async def sweep_once(self, *, whole: bool = True) -> SweepOutcome:
        """One pass: release buffered runs, admit waiting ones, act on due checks,
        publish, confirm. With ``whole`` False only the admission (and its publish)."""
        owned = sorted(self._owned())
        if not owned:
            return SweepOutcome([], 0, 0)
        now = self._clock.now()
        limit = self._config.batch_size
        confirm_until = now + timedelta(seconds=self._config.publish_confirm_s)
        async with self._store.transaction() as tx:
            # Released first, so they are published by the next pass.
            released = await tx.release_pending(owned, limit, now) if whole else 0
            # Admitted next (flow control): published by this pass, as a dispatch's runs.
            admission = await tx.admit_waiting(
                owned,
                window=self._config.tenant_window,
                default_weight=self._config.fair_weight,
                limit=limit,
                now=now,
                confirm_until=confirm_until,
                after=self._admission_cursor,
            )
            self._admission_cursor = admission.cursor
            due = await tx.lock_due_checks(owned, limit, now) if whole else []
            # A queued run whose publish was acknowledged waits for its lost-message
            # recheck; the others are decided by the run machine.
            deferred = [
                (state.ref, acked_until)
                for state, _, acked_until, _ in due
                if acked_until is not None and acked_until > now
            ]
            await tx.defer_checks(deferred)
            checked = [
                (state, partition, traceparent)
                for state, partition, acked_until, traceparent in due
                if acked_until is None or acked_until <= now
            ]
            tenants = {state.ref: state.tenant_id for state, _, _ in checked}
            # Due retries are admitted as a dispatch's runs are (docs/design.md section
            # 7): those that must wait are written unpublished, with a waiting row.
            transitions, held = await tx.hold_retries(
                [(due_check(state, now), partition) for state, partition, _ in checked],
                tenants,
                window=self._config.tenant_window,
                default_weight=self._config.fair_weight,
                now=now,
            )
            batches = await tx.apply_checks(
                transitions,
                now,
                confirm_until=confirm_until,
                tenants=tenants,
                default_weight=self._config.fair_weight,
            )
            await tx.insert_run_waits(held, now)
            letters: list[DeadLetterRun] = []
            if whole:
                # Last, so runs that died in this pass are in it.
                letters = await tx.claim_dead_letters(owned, limit, now, retry_at=confirm_until)
                # Failure-policy pauses a dead run's transaction could not make (the
                # job's row was locked then): one probe of a nearly always empty index.
                await tx.apply_due_failure_pauses(owned, limit, now)
        by_tenant = self._config.metrics_tenant_attribute
        for tenant, count in admission.admitted.items():
            self._admitted.add(count, {"tenant": tenant} if by_tenant else {})
        for (state, _, _), (transition, _) in zip(checked, transitions, strict=True):
            if state.status is RunStatus.RUNNING:  # a lapsed lease (see due_check)
                self._expired.add(1, {"outcome": transition.status.value})
        spans = _check_spans(checked, transitions) if tracing.enabled() else []
        cancelled = sum(t.status is RunStatus.CANCELLED for t, _ in transitions)
        outcome = SweepOutcome(
            admission.batches + batches,
            cancelled,
            released,
            letters,
            checked=len(due),
            admitted=sum(admission.admitted.values()),
            waiting=admission.waiting or bool(held),
        )
        # The republished batches and the dead-letter outbox go out together, each
        # publish bounded by a timeout, so a NATS outage stalls a pass by one timeout.
        acked, sent = await asyncio.gather(
            self._publisher.publish_all(outcome.batches, now),
            publish_due_dead_letters(
                self._publisher.jetstream,
                outcome.dead_letters,
                now,
                timeout_s=self._publisher.timeout_s,
            ),
        )
        for span in spans:
            span.end()
        if acked:
            await self._store.confirm_published(
                acked, now + timedelta(seconds=self._config.unleased_republish_s)
            )
            log.info(
                "republished %d runs",
                sum(len(b.runs) for b in acked),
                extra={"action": "sweep", "runs": sum(len(b.runs) for b in acked)},
            )
        if sent:
            await self._store.clear_dead_letters(sent)
        if whole:
            await self._store.purge_dispatch_acks(now, limit)
        return outcome


# What a due check is, in a run's trace, by the status it found the run in.
_CHECK_SPANS = {
    RunStatus.QUEUED: "sundial.publish",  # queued by the API, or its publish unconfirmed
    RunStatus.RETRYING: "sundial.retry",
    RunStatus.RUNNING: "sundial.lease_expired",
}


def _check_spans(
    checked: list[tuple[RunState, int, str]], transitions: list[tuple[Transition, int]]
) -> list[trace.Span]:
    """One span per decided run, in the run's trace (runs without a stored context get
    none): its publish, its retry, or the lapse of its lease (an ERROR: the attempt
    was lost). Ended by the caller after the publishes."""
    spans = []
    for (state, _, traceparent), (transition, _) in zip(checked, transitions, strict=True):
        if not traceparent:
            continue
        span = tracing.start_span(
            _CHECK_SPANS.get(state.status, "sundial.check"),
            parent=traceparent,
            kind=trace.SpanKind.PRODUCER if transition.republish else trace.SpanKind.INTERNAL,
            attributes={
                "sundial.run_key": state.ref.key,
                "sundial.attempt": state.attempt,
                "sundial.run.next_status": transition.status.value,
            },
        )
        if state.status is RunStatus.RUNNING:
            span.set_status(trace.StatusCode.ERROR, "lease expired: the attempt was lost")
        spans.append(span)
    return spans
