"""The runs an executor holds: call slots, run tasks, cancel orders and lost leases.

A granted run is *held* from its grant until the ledger answered its outcome; the
heartbeat extends the lease of every held run. Its *slot* (one of ``max_in_flight``) is
taken before LeaseRuns and given back when the target call ends, so the number of
concurrent target calls never exceeds ``max_in_flight``. No one tenant holds the last
of them: as many as another tenant needed at once lately are kept free (at least
``slots_kept_free``, at most half), so another tenant's runs never wait for a busy
tenant's calls to end; beside other tenants holding or waiting for slots, a tenant may
still hold its weighted share of them. A tenant the pacer slows (:mod:`pacing`: a herd
while the event loop lags) is given slots only as its pace allows.

How a held run ends:

- the call returns: the outcome is reported (CompleteRuns) and the run is dropped once
  the ledger answered;
- a cancel order (heartbeat): the call is cancelled, OUTCOME_STATUS_CANCELLED reported;
- a lost lease (heartbeat): the call is cancelled and nothing is reported (the report
  would be fenced out: another attempt owns the run now). If the call had already ended,
  its report may be on its way; the ledger fences it out (STALE_ATTEMPT), which is
  harmless;
- a re-grant of an attempt that already finished under the same lease (its report was
  given up, or is still on its way, and a redelivered message asked again): the target
  is not called again; the kept outcome is reported once more;
- shutdown past the grace period: the call is cancelled and nothing is reported. The
  lease expires and the ledger retries the run (ERROR_CLASS_LEASE_EXPIRED): a stopping
  executor never reports a run as failed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from asyncio import FIRST_COMPLETED
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from sundial.core import tracing
from sundial.core.clock import Clock, SystemClock
from sundial.core.logging import run_key_var
from sundial.core.telemetry import EXECUTOR_FREE_SLOTS, EXECUTOR_IN_FLIGHT
from sundial.executor.config import ExecutorConfig
from sundial.executor.model import Answer, HeldLease, HeldRun, Lease
from sundial.executor.pacing import Pacer
from sundial.executor.runner import Runner
from sundial.run import Completion, ErrorClass, Outcome, OutcomeStatus, RunRef

__all__ = ["Held", "InFlight", "Submit"]

log = logging.getLogger(__name__)

FINISHED_MARGIN_S = 30.0
"""How long past its lease (at least ``run_lease_s``) a finished attempt's outcome is kept
for a re-grant of that lease."""

MAX_FINISHED = 100_000
"""Finished outcomes kept at most (the oldest go first)."""

RECENT_NEED_S = 10.0
"""How long a tenant's largest need for slots at once is remembered: while it is, that
many slots are kept free of every other tenant (:meth:`InFlight.tenant_cap`). A tenant
whose runs come due every few seconds (a cron of a minute or less, bursts of a
backfill) finds its usual number free when it comes back behind another's herd."""

Submit = Callable[[Completion], Awaitable[object]]
"""Hands an outcome to the completer and waits until the ledger answered it."""


@dataclass(eq=False)
class Held:
    """One held run at one attempt."""

    lease: Lease
    task: asyncio.Task[None] | None = None
    """The run's one task: it calls the target, then reports the outcome."""
    calling: bool = False
    """True while the task is in the target call (only then is a cancel order acted on)."""
    cancel_reason: str | None = None
    lost: bool = False
    abandoned: bool = False
    """Cancelled by shutdown: nothing is reported."""
    cancels: int = 0
    """Cancellations of the task requested by a cancel order or a lost lease."""
    slot_tenant: str = ""
    """The tenant its slot was reserved for (what :meth:`InFlight.release` gives back)."""


@dataclass(eq=False)
class _Waiter:
    """A caller of :meth:`InFlight.reserve` waiting for slots."""

    ticket: int
    tenant: str
    want: int
    got: int = 0
    turn: asyncio.Event = field(default_factory=asyncio.Event)


class InFlight:
    """Held runs and the slots that bound concurrent target calls.

    Args:
        config: Supplies ``max_in_flight``.
        runner: Calls the targets.
        submit: Reports each attempt's outcome (the completer's ``submit``).
        clock: Stamps the outcomes the registry makes itself (cancelled, a caller's bug).
        meter: Where the ``sundial.executor.in_flight`` and ``sundial.executor.free_slots``
            gauges go (default: global).
        pacer: Slows the call starts of a tenant starting far more calls than another
            while the event loop lags (:mod:`sundial.executor.pacing`); None: never.
    """

    def __init__(
        self,
        config: ExecutorConfig,
        runner: Runner,
        submit: Submit,
        *,
        clock: Clock | None = None,
        meter: metrics.Meter | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self._runner = runner
        self._pacer = pacer
        if pacer is not None:
            pacer.on_tokens = self._pass_turn
        self._submit = submit
        self._clock = clock or SystemClock()
        self.max_in_flight = config.max_in_flight
        self._free = config.max_in_flight
        self._kept_floor = min(config.slots_kept_free, config.max_in_flight // 8)
        # 0 kept (SUNDIAL_SLOTS_KEPT_FREE=0, or under 8 slots): a tenant may take all.
        self._kept_most = config.max_in_flight // 2 if self._kept_floor else 0
        self._peaks: dict[str, tuple[int, float]] = {}
        """Per tenant: the most slots it held and asked for at once lately, and when
        (monotonic); forgotten :data:`RECENT_NEED_S` after."""
        self._top: tuple[str, int, int] = ("", 0, 0)
        """The tenant with the largest recent peak, that peak and the next largest."""
        self._top_at = 0.0
        self._waiting: list[_Waiter] = []
        """Callers of :meth:`reserve` waiting for slots."""
        self._taken: Counter[str] = Counter()
        """Slots taken per tenant (reserved for a LeaseRuns, or calling)."""
        self._weights: dict[str, int] = {}
        """The fair-sharing weight of each tenant holding or waiting for slots, as its
        runs' messages said."""
        self._weight_sum = 0
        """The sum of ``_weights``."""
        self._released = asyncio.Event()
        """Set when a slot is given back (see :meth:`wait_released`)."""
        self._tickets = itertools.count(1)
        self._held: dict[HeldRun, Held] = {}
        self._finished: OrderedDict[HeldLease, tuple[Completion, float]] = OrderedDict()
        """Outcomes of attempts called under each lease, until that lease has surely
        expired (monotonic time): a re-grant of one is answered from here."""
        self._keep_finished_s = config.run_lease_s + FINISHED_MARGIN_S
        self._reports: set[asyncio.Future[object]] = set()
        self._closed = False
        self.draining = False
        """True once the executor stopped leasing (reported on heartbeats)."""
        meter = meter or metrics.get_meter("sundial.executor")
        meter.create_observable_gauge(
            EXECUTOR_IN_FLIGHT,
            callbacks=[lambda _options: [metrics.Observation(len(self._held))]],
            unit="{run}",
            description="Runs this executor holds (leased, being called or reported)",
        )
        meter.create_observable_gauge(
            EXECUTOR_FREE_SLOTS,
            callbacks=[lambda _options: [metrics.Observation(self.idle_slots)]],
            unit="{slot}",
            description="Slots free of SUNDIAL_MAX_IN_FLIGHT that no fetched run waits for"
            " (0 while runs wait: the slots kept free for other tenants are then busy in"
            " all but name)",
        )

    # --- slots -------------------------------------------------------------------------

    @property
    def free_slots(self) -> int:
        """Slots not taken."""
        return self._free

    @property
    def idle_slots(self) -> int:
        """Slots not taken that no fetched run waits for (0 while one waits: the slots
        left are kept for tenants other than the waiting ones)."""
        return 0 if self._waiting else self._free

    def ticket(self) -> int:
        """A place in the queue for slots, behind every ticket handed out before."""
        return next(self._tickets)

    def paced(self, tenant: str) -> bool:
        """``tenant``'s call starts are paced now (:mod:`sundial.executor.pacing`)."""
        return self._pacer is not None and tenant in self._pacer.paced

    def taken(self, tenant: str) -> int:
        """Slots ``tenant`` holds now (reserved or calling)."""
        return self._taken[tenant]

    async def reserve(
        self,
        most: int,
        *,
        stop: asyncio.Event,
        timeout_s: float | None = None,
        ticket: int | None = None,
        tenant: str = "",
        weight: int = 1,
    ) -> int:
        """Wait for at least one free slot for a run of ``tenant``, then take up to
        ``most``.

        Freed slots go one at a time to the waiting caller whose tenant holds the fewest
        slots for its ``weight`` (slots / weight), the oldest ticket first among equals
        (a new ticket, the last place, when ``ticket`` is None); a caller takes free
        slots at once only when no waiting caller comes before it in that order. So a
        quiet tenant's runs fetched behind a herd's get the next freed slots until both
        tenants hold as many for their weights, then the two share them in proportion
        (docs/design.md section 7, "Flow control"). A fetched batch keeps its
        ticket for all of its runs, so among one tenant's batches the first fetched is
        served first, also when it comes back for more after a lease. Served in the
        order of waiting instead, each freed slot went to whichever batch woke first, and
        a batch that had leased a few runs went to the back of the queue each time:
        seconds of lateness behind a herd. A tenant never holds more than
        :meth:`tenant_cap` slots: the rest are kept for the next tenant's runs, which
        found them all taken by a herd's calls and waited for one to end (B's runs
        behind A's 20k herd: 40 ms at p50, up to 0.2 s; with 8 kept and B's 20 due at
        once, up to 0.3 s at the herd's start, while A's leases were slow).

        Returns:
            The slots taken; 0 when ``stop`` was set first (slots given meanwhile go
            back) or ``timeout_s`` passed before any was given.
        """
        if stop.is_set():
            return 0
        place = self.ticket() if ticket is None else ticket
        self._weight_sum += max(weight, 1) - self._weights.get(tenant, 0)
        self._weights[tenant] = max(weight, 1)
        mine = (self._taken[tenant] / self._weights[tenant], place)
        self._note_need(tenant, self._taken[tenant] + most)
        room = min(self._free, self.tenant_cap(tenant) - self._taken[tenant])
        if self._pacer is not None:
            room = min(room, self._pacer.allows(tenant))
        if room > 0 and not any(
            self._key(w) < mine for w in self._waiting if self._may_take(w.tenant)
        ):
            taken = min(most, room)
            self._free -= taken
            self._taken[tenant] += taken
            if self._pacer is not None:
                self._pacer.started(tenant, taken, self._weights[tenant])
            return taken
        waiter = _Waiter(place, tenant, most)
        self._waiting.append(waiter)
        self._pass_turn()
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        returned = False
        try:
            while not waiter.got and not stop.is_set():
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    break
                woken = asyncio.ensure_future(waiter.turn.wait())
                stopped = asyncio.ensure_future(stop.wait())
                try:
                    await asyncio.wait([woken, stopped], timeout=left, return_when=FIRST_COMPLETED)
                finally:
                    woken.cancel()
                    stopped.cancel()
                if not waiter.turn.is_set():
                    break  # timed out, or stopping
                waiter.turn.clear()
            returned = True
        finally:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            if waiter.got and (stop.is_set() or not returned):
                # Stopping, or cancelled: nothing will be leased with them.
                self.release(waiter.got, tenant)
                waiter.got = 0
            self._forget_if_idle(tenant)
        return waiter.got

    def release(self, count: int = 1, tenant: str = "") -> None:
        """Give back ``count`` slots of ``tenant`` (unused after LeaseRuns, or a
        finished call)."""
        if count > 0:
            self._free += count
            left = self._taken[tenant] - count
            if left > 0:
                self._taken[tenant] = left
            else:
                del self._taken[tenant]
                self._forget_if_idle(tenant)
            self._released.set()
            self._pass_turn()

    async def wait_released(self, stop: asyncio.Event, timeout_s: float) -> None:
        """Return once a slot was given back since the last call, ``stop`` was set, or
        ``timeout_s`` passed (the consumer's prefetch waits on this)."""
        if not self._released.is_set():
            released = asyncio.ensure_future(self._released.wait())
            stopped = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait(
                    [released, stopped], timeout=timeout_s, return_when=FIRST_COMPLETED
                )
            finally:
                released.cancel()
                stopped.cancel()
        self._released.clear()

    def _forget_if_idle(self, tenant: str) -> None:
        """Drop ``tenant``'s weight once it neither holds nor waits for a slot."""
        if (
            tenant in self._weights
            and not self._taken[tenant]
            and not any(w.tenant == tenant for w in self._waiting)
        ):
            self._weight_sum -= self._weights.pop(tenant)

    def _key(self, waiter: _Waiter) -> tuple[float, int]:
        """A waiter's place in the order for slots: its tenant's slots for its weight,
        then its ticket."""
        return (self._taken[waiter.tenant] / self._weights.get(waiter.tenant, 1), waiter.ticket)

    def _may_take(self, tenant: str) -> bool:
        """``tenant`` holds fewer than :meth:`tenant_cap` slots, and its pace (if it
        is paced) lets it start a call now."""
        return self._taken[tenant] < self.tenant_cap(tenant) and (
            self._pacer is None or self._pacer.allows(tenant) > 0
        )

    def tenant_cap(self, tenant: str) -> int:
        """The slots ``tenant`` may hold: all but those kept for other tenants' runs,
        as many as the largest number another tenant needed at once in the last
        :data:`RECENT_NEED_S` (held and asked for), at least SUNDIAL_SLOTS_KEPT_FREE
        (at most an eighth) and at most half of ``max_in_flight``; none when
        SUNDIAL_SLOTS_KEPT_FREE is 0 or ``max_in_flight`` under 8.

        Beside other tenants holding or waiting for slots, always at least its weighted
        share of them (``max_in_flight * weight / the weights of all those tenants``):
        the slots kept for one tenant are kept from each of the others, so with a
        second tenant's burst remembered, a tenant of weight 3 and one of weight 1,
        both backlogged, were each held to the same half of the calls and the weights
        no longer decided (75/25 measured as 57/43 in ``tests/e2e/test_flow_control.py``).
        Alone, a tenant has no such share: the kept slots stay free for the next."""
        if self._clock.monotonic() - self._top_at > 1.0:
            self._rank()  # forget peaks that are too old, at most once a second
        top_tenant, top, second = self._top
        others = second if tenant == top_tenant else top
        cap = self.max_in_flight - min(self._kept_most, max(self._kept_floor, others))
        weight = self._weights.get(tenant)
        if weight is None or self._weight_sum <= weight:
            return cap  # no other tenant holds or waits
        return max(cap, self.max_in_flight * weight // self._weight_sum)

    def _note_need(self, tenant: str, need: int) -> None:
        """Remember that ``tenant`` needed ``need`` slots at once (held and asked for)."""
        now = self._clock.monotonic()
        old = self._peaks.get(tenant)
        if old is None or need >= old[0] or now - old[1] > RECENT_NEED_S:
            self._peaks[tenant] = (need, now)
            if old is None or need != old[0]:
                self._rank()

    def _rank(self) -> None:
        """Forget the peaks older than :data:`RECENT_NEED_S`; find the two largest."""
        now = self._clock.monotonic()
        self._top_at = now
        top: tuple[str, int, int] = ("", 0, 0)
        for tenant, (peak, at) in list(self._peaks.items()):
            if now - at > RECENT_NEED_S:
                del self._peaks[tenant]
            elif peak > top[1]:
                top = (tenant, peak, top[1])
            elif peak > top[2]:
                top = (top[0], top[1], peak)
        self._top = top

    def _pass_turn(self) -> None:
        """Give the free slots, one at a time, to the waiter first in the order among
        those whose tenant may take one (its tenant's count grows with each, so tenants
        alternate once they hold as many)."""
        while self._free and self._waiting:
            eligible = [w for w in self._waiting if self._may_take(w.tenant)]
            if not eligible:
                return  # the free slots are kept for another tenant's runs
            best = min(eligible, key=self._key)
            best.got += 1
            self._free -= 1
            self._taken[best.tenant] += 1
            if self._pacer is not None:
                self._pacer.started(best.tenant, 1, self._weights.get(best.tenant, 1))
            if best.got >= best.want:
                self._waiting.remove(best)
            best.turn.set()

    # --- held runs ---------------------------------------------------------------------

    def held(self) -> list[HeldLease]:
        """Every held run with its attempt and lease id (what the next heartbeat lists)."""
        return [(run, attempt, h.lease.lease_id) for (run, attempt), h in self._held.items()]

    def __len__(self) -> int:
        return len(self._held)

    def start(self, lease: Lease, slot_tenant: str = "") -> bool:
        """Hold ``lease`` and call its target; its slot must already be reserved (for
        ``slot_tenant``).

        Returns:
            False (nothing started; the caller keeps the slot) when this attempt is
            already held: the ledger grants a run its holder leases again at the same
            attempt (a retried LeaseRuns, a redelivered message), and calling the target
            twice for one attempt would be a duplicate.
        """
        if (lease.run, lease.attempt) in self._held:
            log.info(
                "granted again; already running",
                extra={
                    "action": "lease.regrant",
                    "run_key": lease.run_key,
                    "attempt": lease.attempt,
                },
            )
            return False
        finished = self._finished_outcome(lease)
        if finished is not None:
            # Called already under this very lease: its report did not reach the ledger
            # (given up, or still on its way). Report it again, never call again.
            log.info(
                "granted again after it finished; reporting its outcome again",
                extra={
                    "action": "lease.regrant_finished",
                    "run_key": lease.run_key,
                    "attempt": lease.attempt,
                },
            )
            task: asyncio.Future[object] = asyncio.ensure_future(self._submit(finished))
            self._reports.add(task)
            task.add_done_callback(self._reports.discard)
            return False
        held = Held(lease, slot_tenant=slot_tenant)
        self._held[(lease.run, lease.attempt)] = held
        held.task = asyncio.create_task(self._execute(held), name=f"run {lease.run_key}")
        return True

    def _finished_outcome(self, lease: Lease) -> Completion | None:
        """The outcome already called under ``lease`` (same run, attempt and lease id)."""
        now = time.monotonic()
        while self._finished:  # oldest first: forget what expired
            _, (_, forget_at) = next(iter(self._finished.items()))
            if forget_at > now:
                break
            self._finished.popitem(last=False)
        found = self._finished.get((lease.run, lease.attempt, lease.lease_id))
        return found[0] if found is not None else None

    def _remember(self, completion: Completion, lease: Lease) -> None:
        remaining = (lease.lease_until - self._clock.now()).total_seconds()
        key = (lease.run, lease.attempt, lease.lease_id)
        self._finished[key] = (
            completion,
            time.monotonic() + max(remaining, 0.0) + self._keep_finished_s,
        )
        self._finished.move_to_end(key)
        while len(self._finished) > MAX_FINISHED:
            self._finished.popitem(last=False)

    def cancel(self, run: RunRef, attempt: int, reason: str) -> bool:
        """A cancel order: stop the call and report CANCELLED. False if not held/in call."""
        held = self._held.get((run, attempt))
        if held is None or held.task is None or not held.calling:
            return False
        held.cancel_reason = reason
        held.cancels += 1
        held.task.cancel()
        log.info(
            "cancelling run: %s",
            reason,
            extra={"action": "run.cancel", "run_key": held.lease.run_key, "attempt": attempt},
        )
        return True

    def lose(self, run: RunRef, attempt: int) -> bool:
        """A lost lease: stop the call and report nothing. False if not held."""
        held = self._held.get((run, attempt))
        if held is None:
            return False
        held.lost = True
        if held.task is not None and held.calling:
            held.cancels += 1
            held.task.cancel()
        log.warning(
            "lease lost; abandoning run",
            extra={"action": "run.lost", "run_key": held.lease.run_key, "attempt": attempt},
        )
        return True

    async def wait_idle(self) -> None:
        """Wait until no run is held (every outcome answered or abandoned)."""
        while self._held:
            tasks = [h.task for h in self._held.values() if h.task is not None]
            if tasks:
                await asyncio.wait(tasks)
            else:
                await asyncio.sleep(0.01)

    async def abandon_all(self) -> None:
        """Shutdown past the grace period: cancel every run task, report nothing."""
        abandoned = [h for h in self._held.values() if h.task is not None and not h.task.done()]
        tasks = [h.task for h in abandoned if h.task is not None]
        for held in abandoned:
            held.abandoned = True
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
            log.warning(
                "abandoned %d runs at shutdown; their leases will expire",
                len(tasks),
                extra={"action": "run.abandon", "runs": len(tasks)},
            )

    async def _execute(self, held: Held) -> None:
        # One task per run: the target is called in this task (no task of its own, a
        # per-run cost), so a cancel order or a lost lease cancels this task while
        # `calling`, and the flags tell what the cancellation was.
        lease = held.lease
        token = run_key_var.set(lease.run_key)
        # The attempt's span (none while tracing is off) is current for the call and the
        # report: the target call's span is its child, log lines carry its ids.
        # An unsampled run (its stored context says so) gets no span: the sampler follows
        # the parent, so it would make a span that records nothing, at a per-run cost;
        # the call then carries the run's own context (runner.sundial_headers).
        traced = tracing.enabled() and tracing.sampled(lease.traceparent) is not False
        span = _attempt_span(lease) if traced else None
        scope = otel_context.attach(trace.set_span_in_context(span)) if span else None
        released = False
        try:
            held.calling = True
            try:
                outcome = await self._runner.run(lease)
            except asyncio.CancelledError:
                if held.abandoned or not _uncancel_ours(held):
                    raise  # shutdown (or a cancellation not ours): nothing to report
                if held.lost or held.cancel_reason is None:
                    if span is not None:
                        span.set_status(trace.StatusCode.ERROR, "abandoned: lease lost")
                    return  # a lost lease: nothing to report
                now = self._clock.now()
                outcome = Outcome(
                    status=OutcomeStatus.CANCELLED,
                    started_at=now,
                    finished_at=now,
                    error=f"cancelled: {held.cancel_reason}",
                    error_class=ErrorClass.CANCELLED,
                )
            except Exception as exc:
                # A bug in a caller (the runner never raises for a failed call): report
                # it as a retryable failure, with its text. Only logging it would let
                # the lease expire as a failed attempt a lease later, with no trace of
                # why in the run's history.
                log.exception(
                    "target call raised", extra={"action": "run.error", "run_key": lease.run_key}
                )
                now = self._clock.now()
                outcome = Outcome(
                    status=OutcomeStatus.FAILED_RETRYABLE,
                    started_at=now,
                    finished_at=now,
                    error=f"executor error: {type(exc).__name__}: {exc}",
                    error_class=ErrorClass.RETRYABLE,
                )
            finally:
                held.calling = False
            self.release(1, held.slot_tenant)
            released = True
            if held.lost:
                return
            _log_outcome(lease, outcome)
            if span is not None:
                _record_outcome(span, outcome)
            completion = Completion(lease.run, lease.attempt, outcome, lease_id=lease.lease_id)
            self._remember(completion, lease)
            answer = await self._submit(completion)
            if span is not None and isinstance(answer, Answer):
                _record_answer(span, answer)
        except asyncio.CancelledError:
            if span is not None:
                span.set_status(trace.StatusCode.ERROR, "abandoned: lease lost or shutdown")
            if held.abandoned or not _uncancel_ours(held):
                raise
            # Otherwise the lease was lost: the run task ends quietly.
        except Exception:
            log.exception(
                "run task failed", extra={"action": "run.error", "run_key": lease.run_key}
            )
        finally:
            if not released:
                self.release(1, held.slot_tenant)
            self._held.pop((lease.run, lease.attempt), None)
            run_key_var.reset(token)
            if span is not None:
                span.end()
            if scope is not None:
                otel_context.detach(scope)


def _attempt_span(lease: Lease) -> trace.Span:
    """The attempt's span: a child of the run's stored context (so every attempt of a
    run shares its trace), linked to the LeaseRuns batch that granted it."""
    attributes: dict[str, str | int] = {
        "sundial.run_key": lease.run_key,
        "sundial.attempt": lease.attempt,
        "sundial.tenant_id": lease.tenant_id,
    }
    if lease.kind is not None:
        attributes["sundial.run.kind"] = lease.kind.value
    return tracing.start_span(
        "sundial.attempt",
        parent=lease.traceparent,
        attributes=attributes,
        links=[lease.lease_span],
    )


def _record_outcome(span: trace.Span, outcome: Outcome) -> None:
    span.set_attribute("sundial.outcome", outcome.status.value)
    if outcome.error_class is not None:
        span.set_attribute("sundial.error_class", outcome.error_class.value)
    if outcome.failed:  # a retryable or final failure, a timeout: the attempt failed
        span.set_status(trace.StatusCode.ERROR, (outcome.error or outcome.status.value)[:256])


def _record_answer(span: trace.Span, answer: Answer) -> None:
    """What the ledger made of the report: the run's next status (a retry, dead...)."""
    if not answer.sent:
        span.set_attribute("sundial.report", "not_sent")
    elif answer.accepted:
        span.set_attribute("sundial.report", "accepted")
        if answer.next_status is not None:
            span.set_attribute("sundial.run.next_status", answer.next_status.value)
    else:
        span.set_attribute("sundial.report", "fenced")
        if answer.fence_reason is not None:
            span.set_attribute("sundial.fence_reason", answer.fence_reason.value)


def _uncancel_ours(held: Held) -> bool:
    """Withdraw the cancellations of ``held``'s task that a cancel order or a lost lease
    requested; True when no other (a shutdown's) remains."""
    current = asyncio.current_task()
    if current is None:
        return False
    remaining = current.cancelling()
    while held.cancels and remaining:
        held.cancels -= 1
        remaining = current.uncancel()
    return remaining == 0


def _log_outcome(lease: Lease, outcome: Outcome) -> None:
    if not log.isEnabledFor(logging.INFO):
        return  # the line's fields cost a run more than the rest of its bookkeeping
    extra: dict[str, object] = {
        "action": "run.attempt",
        "run_key": lease.run_key,
        "attempt": lease.attempt,
        "tenant_id": lease.tenant_id,
        "status": outcome.status.name,
    }
    if outcome.started_at is not None and outcome.finished_at is not None:
        elapsed = outcome.finished_at - outcome.started_at
        extra["duration_ms"] = round(elapsed.total_seconds() * 1000, 1)
    if outcome.failed:
        extra["error_class"] = outcome.error_class.name if outcome.error_class else None
        log.info("attempt failed: %s", outcome.error, extra=extra)
    else:
        log.info("attempt %s", outcome.status.name.lower(), extra=extra)
