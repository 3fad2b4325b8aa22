"""Pulls RunDispatch messages from JetStream and leases their runs (RunLedgerService.LeaseRuns).

One durable pull consumer (``sundial-executors``) on SUNDIAL_RUNS is shared by every
executor, so each message goes to one of them. The loop:

1. while a call slot is free, or fewer than ``prefetch_runs`` fetched runs wait for one
   (so a quiet tenant's message behind a busy tenant's runs in the stream is reached at
   once): fetch one message, waiting for it, then with a short pull what else is there,
   up to ``fetch_batch`` messages in all and never more than free slots (every message
   holds at least one run);
2. decode them; a malformed message (not a RunDispatch, no runs, a run whose job id
   is not a UUID) is logged and terminated (never redelivered, never raised into the
   loop);
3. lease their runs per tenant as call slots come, each tenant's in chunks of the slots
   it was given (and 500); the chunks asked for while a LeaseRuns is out share the next
   one (:class:`~sundial.executor.lease_batch.LeaseBatcher`). Freed slots go to the
   tenant holding the fewest for its weight (:meth:`InFlight.reserve`): behind a herd,
   a quiet tenant's runs start next. Only
   what has slots is leased: a message whose runs wait 1 s without one is nak'ed without
   delay once the rest is leased, so an executor with free slots takes it at once
   instead of it waiting here for ours (hoarding). Its leased runs come back as
   LEASED_ELSEWHERE (or re-granted, if it comes back here), so it converges;
4. once every run of a message is granted or rejected: ack it, unless a run was
   rejected TENANT_AT_CAPACITY, then nak it with the rejection's retry_after so it comes
   back later (never dropped). A redelivered message may name runs this executor (or
   another) already leased or finished; the ledger answers those LEASED_ELSEWHERE (held
   by another executor) or FINISHED, both of which ack, so a partly leased message
   converges. A run this executor already holds is granted again at the same attempt
   (the ledger's idempotent re-grant, which also makes a LeaseRuns retried after a lost
   answer safe): it is acked and not started twice.

Up to ``pipeline`` fetched batches go through steps 2-4 at once, so a LeaseRuns round
trip does not stall fetching. Granted runs are handed to :class:`InFlight`, which calls
their targets. LeaseRuns goes through :class:`~sundial.executor.ledger.LedgerClient`,
retried under its policy; refused or given up, the messages of the chunk are nak'ed
with ``capacity_retry_s`` of delay and come back later.

A failed fetch (JetStream or the connection unavailable) is logged and retried after
a bounded, jittered backoff; it never stops the executor. A lost stream takes the
durable consumer with it (docs/design.md section 6, "A lost stream"): after a failed
fetch, and every :data:`CONSUMER_CHECK_S` seconds, the consumer is looked up, and when
it is gone the executor waits for a scheduler to recreate the stream, then creates the
consumer again and fetches from it.

Stop: fetching stops at once, messages not yet fully leased are nak'ed (no delay:
another executor takes them), then the held runs get the rest of the grace period to
finish; what is still running after it is abandoned without a report.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.aio.msg import Msg
from nats.errors import (
    ConnectionClosedError,
    ConnectionReconnectingError,
    NoRespondersError,
)
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import BadRequestError, NotFoundError, ServerError, ServiceUnavailableError
from opentelemetry import metrics

from sundial.core.backoff import Backoff
from sundial.core.bus import RUNS_STREAM, RUNS_SUBJECT_PREFIX
from sundial.core.clock import Clock, SystemClock
from sundial.core.telemetry import CONSUMER_ACK_PENDING, CONSUMER_PENDING
from sundial.executor.config import ExecutorConfig
from sundial.executor.convert import decode_dispatch
from sundial.executor.inflight import InFlight, Submit
from sundial.executor.lease_batch import MAX_LEASE_BATCH, LeaseBatcher
from sundial.executor.ledger import LedgerClient, LedgerError
from sundial.executor.model import Lease, LeaseResult, UnusableGrant
from sundial.executor.timing import sleep_unless
from sundial.run import Completion, ErrorClass, Outcome, OutcomeStatus, RejectReason, RunRef

__all__ = ["CONSUMER_CHECK_S", "Consumer", "MessageStats"]

log = logging.getLogger(__name__)

_FETCH_WAIT_S = 1.0  # how long one fetch waits for messages (stop is noticed this fast)
_MORE_WAIT_S = 0.005  # how long the pull for more after the first message lingers
_BIND_TRANSIENT = (
    TimeoutError,  # nats-py's own TimeoutError is one too
    NoRespondersError,
    ConnectionClosedError,
    ConnectionReconnectingError,
    NotFoundError,  # the stream went again between its lookup and the bind
    ServiceUnavailableError,
    ServerError,
)
"""What binding the durable consumer retries: JetStream not answering yet or not
reachable now. Anything else (a BadRequestError from binding to a durable of other
settings) ends the consumer, so the executor stops with the error instead of warning
forever."""

_FETCH_BACKOFF = Backoff(initial_s=0.1, max_s=5.0)  # between fetches that failed
# How long a fetched batch waits for free slots before giving its unleased runs back
# (another executor may have room). Calls to a fast target free slots within
# milliseconds: giving the message back at once made a full executor fetch, decode and
# lease the same runs again (bench_e2e, a 20k herd at 256 slots: 1,936 messages given
# back, 2,917 finished runs leased again; with the wait none).
_SLOT_WAIT_S = 1.0
# The same wait for a tenant whose call starts are paced (pacing.py): its runs wait for
# its pace, not for a free slot another executor might have; given back, they came back
# here, were fetched and decoded again and waited again.
_PACED_SLOT_WAIT_S = 10.0
# LeaseRuns calls in flight at most per tenant; the tenant's runs whose slots are reserved
# meanwhile go out together in the next (lease_batch.LeaseBatcher).
_LEASE_CALLS = 2
CONSUMER_CHECK_S = 5.0
"""Seconds between checks that the durable consumer still exists (also looked up after
every failed fetch)."""
# Rejections that resolve a run for good here: another executor holds it, or it needs
# no call (anything else, TENANT_AT_CAPACITY or a reason newer than us, comes back).
_ACK_REASONS = frozenset(
    {
        RejectReason.FINISHED,
        RejectReason.LEASED_ELSEWHERE,
        RejectReason.NOT_FOUND,
        RejectReason.CANCELLED,
        RejectReason.NOT_DUE,
    }
)


@dataclass
class MessageStats:
    """What happened to messages (for tests and metrics)."""

    acked: int = 0
    naked: int = 0
    terminated: int = 0
    granted: int = 0
    rejected: dict[RejectReason | None, int] = field(default_factory=dict)
    """Rejections by reason (None: a reason newer than this executor)."""


@dataclass(eq=False)
class _BatchOutcome:
    """What the tenants' lease loops of one fetched batch found."""

    slotted: int = 0
    """Runs given call slots (the rest of the batch still counts as unslotted)."""
    out_of_slots: bool = False
    """A run waited :data:`_SLOT_WAIT_S` without a slot: its message goes back at once."""
    refused: bool = False
    """A LeaseRuns was refused or given up: lease no more, the messages go back later."""


class _Permit:
    """A fetched batch's place in the pipeline (a permit of its semaphore), given back
    once, when the batch ends or earlier."""

    __slots__ = ("_room",)

    def __init__(self, room: asyncio.Semaphore) -> None:
        self._room: asyncio.Semaphore | None = room

    def release(self) -> None:
        if self._room is not None:
            self._room.release()
            self._room = None


@dataclass(eq=False)
class _Pending:
    """A fetched message whose runs are not all resolved yet."""

    msg: Msg
    unresolved: int
    nak_delay_s: float | None = None
    done: bool = False


class Consumer:
    """Lifecycle component: JetStream -> LeaseRuns -> :class:`InFlight`.

    Args:
        config: Supplies the durable consumer's name, ``fetch_batch``, ``ack_wait_s``,
            ``lease_pipeline`` and ``capacity_retry_s``.
        jetstream: Where RunDispatch messages are fetched.
        ledger: Leases their runs.
        inflight: Holds the granted runs and calls their targets.
        submit: Reports a grant that cannot be acted on (the completer's ``submit``).
        clock: Times the in-progress pings and the fetch backoff.
        consumer_check_s: Seconds between checks that the durable consumer exists.
        meter: Where the consumer's pending and ack-pending gauges go (default: global).
    """

    name = "consumer"

    def __init__(
        self,
        config: ExecutorConfig,
        jetstream: JetStreamContext,
        ledger: LedgerClient,
        inflight: InFlight,
        *,
        submit: Submit | None = None,
        clock: Clock | None = None,
        consumer_check_s: float = CONSUMER_CHECK_S,
        meter: metrics.Meter | None = None,
    ) -> None:
        self._js = jetstream
        self._consumer_check_s = consumer_check_s
        self._ledger = ledger
        self._inflight = inflight
        self._durable = config.consumer_name
        self._fetch_batch = config.fetch_batch
        self._ack_wait_s = config.ack_wait_s
        self._capacity_retry_s = config.capacity_retry_s
        self._pipeline = config.lease_pipeline
        self._prefetch = config.prefetch_runs
        self._unslotted = 0
        """Runs of fetched batches not given call slots yet (bounded by the prefetch)."""
        self._leases = LeaseBatcher(self._lease, calls=_LEASE_CALLS)
        self._submit = submit
        self._clock = clock or SystemClock()
        self._rng = random.Random()
        self._stopping = asyncio.Event()
        self._running = False
        self._fetching_done = asyncio.Event()
        self.stats = MessageStats()
        self.rebound = 0
        """Times the durable consumer was found gone and created again (for tests)."""
        self._background: set[asyncio.Future[object]] = set()
        # The durable consumer's backlog as of the last check (None: not read yet).
        self._pending: tuple[int, int] | None = None
        meter = meter or metrics.get_meter("sundial.executor")
        meter.create_observable_gauge(
            CONSUMER_PENDING,
            callbacks=[self._observe_pending(0)],
            unit="{message}",
            description="Messages of the shared consumer not delivered yet",
        )
        meter.create_observable_gauge(
            CONSUMER_ACK_PENDING,
            callbacks=[self._observe_pending(1)],
            unit="{message}",
            description="Messages delivered to executors, not acknowledged",
        )

    def _observe_pending(
        self, index: int
    ) -> Callable[[metrics.CallbackOptions], list[metrics.Observation]]:
        def observe(_options: metrics.CallbackOptions) -> list[metrics.Observation]:
            if self._pending is None:
                return []
            return [metrics.Observation(self._pending[index])]

        return observe

    async def _subscribe(self) -> JetStreamContext.PullSubscription:
        config = ConsumerConfig(
            durable_name=self._durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self._ack_wait_s,
            max_deliver=-1,  # a run waits (capacity) as often as needed; never dropped
            max_ack_pending=-1,
            filter_subject=f"{RUNS_SUBJECT_PREFIX}.>",
        )
        try:
            return await self._js.pull_subscribe(
                f"{RUNS_SUBJECT_PREFIX}.>", durable=self._durable, stream=RUNS_STREAM, config=config
            )
        except BadRequestError:
            # Another executor created it at the same moment (or with other settings):
            # it is shared, so bind to it as it is.
            return await self._js.pull_subscribe_bind(durable=self._durable, stream=RUNS_STREAM)

    async def _await_stream(self) -> bool:
        """Wait until SUNDIAL_RUNS exists (schedulers create it; executors may not).

        Returns:
            False when stopped first.
        """
        failures = 0
        while not self._stopping.is_set():
            try:
                await self._js.stream_info(RUNS_STREAM)
                return True
            except NotFoundError:
                problem = "does not exist yet (a scheduler creates it)"
            except NatsError as exc:
                problem = f"cannot be read ({type(exc).__name__}: {exc})"
            failures += 1
            delay = _FETCH_BACKOFF.delay_s(failures, self._rng.random)
            log.warning(
                "stream %s %s; retrying in %.1f s",
                RUNS_STREAM,
                problem,
                delay,
                extra={"action": "consume.no_stream", "failures": failures},
            )
            await sleep_unless(self._clock, delay, self._stopping)
        return False

    async def _bind(self) -> JetStreamContext.PullSubscription | None:
        """A subscription to the durable consumer once the stream exists and the consumer
        is created or bound. A JetStream that cannot answer yet (a cluster electing its
        leaders: its API requests time out) is retried with backoff, not fatal; any
        other error (a durable it cannot bind to) is raised.

        Returns:
            None when stopped first.
        """
        failures = 0
        while await self._await_stream():
            try:
                return await self._subscribe()
            except _BIND_TRANSIENT as exc:  # gone again, or JetStream busy
                failures += 1
                delay = _FETCH_BACKOFF.delay_s(failures, self._rng.random)
                log.warning(
                    "binding consumer %s failed: %s; retrying in %.1f s",
                    self._durable,
                    exc,
                    delay,
                    extra={"action": "consume.bind", "failures": failures},
                )
                await sleep_unless(self._clock, delay, self._stopping)
        return None

    async def run(self, started: Callable[[], None]) -> None:
        """Fetch, lease and start runs until stopped."""
        self._running = True
        batches: set[asyncio.Task[None]] = set()
        # Up to `pipeline` fetched batches are leased at once, so one LeaseRuns round
        # trip does not hold up the next fetch (measured: a single executor reached
        # ~700 runs/s with one batch at a time).
        room = asyncio.Semaphore(self._pipeline)
        subscription: JetStreamContext.PullSubscription | None = None
        try:
            subscription = await self._bind()
            if subscription is None:
                return  # stopped before the consumer could be bound
            started()
            fetch_failures = 0
            checked_at = float("-inf")  # check (and read the backlog) at once
            while not self._stopping.is_set():
                if time.monotonic() - checked_at >= self._consumer_check_s:
                    checked_at = time.monotonic()
                    fresh = await self._rebind_if_gone(subscription)
                    if fresh is None:
                        break  # stopped while waiting for the stream
                    subscription = fresh
                # Fetch while a slot is free, or while fewer than the prefetch's runs
                # wait for one: a quiet tenant's message behind a busy tenant's window
                # in the stream is fetched at once, and its runs take the next freed
                # slots (InFlight.reserve), not after every run fetched before them.
                # Slots kept free for other tenants while this one's runs wait do not
                # count: only the prefetch then bounds what is fetched.
                if not self._inflight.idle_slots and self._unslotted >= self._prefetch:
                    await self._inflight.wait_released(self._stopping, _FETCH_WAIT_S)
                    continue
                wanted = max(1, min(self._fetch_batch, self._inflight.free_slots))
                await room.acquire()
                try:
                    # One message, waiting for it: a pull of several that finds the
                    # stream empty lingers on the server until it is filled or expires
                    # (nats-py sends its no-wait probe with `expires`), so a message
                    # published a moment after another waited up to the whole
                    # _FETCH_WAIT_S (a quiet tenant's runs: leased 0.8 s after due).
                    messages = await subscription.fetch(batch=1, timeout=_FETCH_WAIT_S)
                except (TimeoutError, NatsTimeoutError):
                    room.release()
                    continue
                except NatsError as exc:
                    # JetStream unavailable (leader election, 503 no responders), the
                    # connection closed or reconnecting: the messages wait in the stream,
                    # so back off and fetch again instead of stopping the executor.
                    room.release()
                    fetch_failures += 1
                    delay = _FETCH_BACKOFF.delay_s(fetch_failures, self._rng.random)
                    log.warning(
                        "fetch failed (%s: %s); retrying in %.1f s",
                        type(exc).__name__,
                        exc,
                        delay,
                        extra={"action": "consume.fetch_error", "failures": fetch_failures},
                    )
                    # A missing consumer answers every fetch at once (503): look it up
                    # instead of fetching from nothing until the next periodic check.
                    checked_at = time.monotonic()
                    fresh = await self._rebind_if_gone(subscription)
                    if fresh is None:
                        break
                    if fresh is not subscription:
                        subscription, fetch_failures = fresh, 0
                        continue
                    await sleep_unless(self._clock, delay, self._stopping)
                    continue
                fetch_failures = 0
                self._start_batch(messages, batches, room)
                if wanted > 1 and not room.locked():
                    # Then what else is there now, as one more batch (LeaseRuns calls
                    # are shared anyway): a short pull, so it waits for nothing.
                    await room.acquire()
                    try:
                        more = await subscription.fetch(batch=wanted - 1, timeout=_MORE_WAIT_S)
                    except (TimeoutError, NatsTimeoutError, NatsError):
                        more = []  # nothing now, or an error the next fetch meets again
                    if more:
                        self._start_batch(more, batches, room)
                    else:
                        room.release()
            if batches:
                await asyncio.wait(batches)
        finally:
            for task in batches:
                task.cancel()
            await self._leases.close()
            if subscription is not None:
                # Also when cancelled (a stop past the grace period): a pull answer that
                # came after its fetch gave up sits in the subscription's queue, and
                # draining the connection would wait for it until the drain timeout.
                try:
                    await subscription.unsubscribe()
                except (NatsError, TimeoutError) as exc:
                    log.debug("unsubscribe failed: %s", exc, extra={"action": "consume.stop"})
            self._inflight.draining = True
            self._fetching_done.set()

    def _start_batch(
        self, messages: list[Msg], batches: set[asyncio.Task[None]], room: asyncio.Semaphore
    ) -> None:
        """Lease ``messages`` as one batch (it holds one of ``room``'s permits)."""
        permit = _Permit(room)
        task = asyncio.create_task(self._process(messages, permit))
        batches.add(task)
        task.add_done_callback(lambda done: self._batch_done(done, batches, permit))

    async def _rebind_if_gone(
        self, subscription: JetStreamContext.PullSubscription
    ) -> JetStreamContext.PullSubscription | None:
        """``subscription`` while its durable consumer exists (or cannot be looked up:
        JetStream unavailable); else a new one once the stream is back and the consumer
        created again. None when stopped while waiting for the stream."""
        try:
            info = await self._js.consumer_info(RUNS_STREAM, self._durable)
            self._pending = (info.num_pending or 0, info.num_ack_pending or 0)
            return subscription
        except NotFoundError:
            pass
        except (NatsError, TimeoutError) as exc:
            log.debug("consumer check failed: %s", exc, extra={"action": "consume.check"})
            return subscription
        log.warning(
            "consumer %s on %s is gone (the stream was lost?); waiting for the stream",
            self._durable,
            RUNS_STREAM,
            extra={"action": "consume.rebind"},
        )
        try:
            await subscription.unsubscribe()
        except (NatsError, TimeoutError) as exc:
            log.debug("unsubscribe failed: %s", exc, extra={"action": "consume.rebind"})
        fresh = await self._bind()
        if fresh is not None:
            self.rebound += 1
            log.warning(
                "consumer %s created again", self._durable, extra={"action": "consume.rebind"}
            )
        return fresh

    @staticmethod
    def _batch_done(
        task: asyncio.Task[None], batches: set[asyncio.Task[None]], permit: _Permit
    ) -> None:
        batches.discard(task)
        permit.release()
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "leasing a batch failed",
                exc_info=task.exception(),
                extra={"action": "consume.error"},
            )

    async def stop(self) -> None:
        """Stop fetching, let held runs finish (the app bounds this by its grace period)."""
        self._stopping.set()
        self._inflight.draining = True
        if self._running:  # safe before run(): nothing was fetched
            await self._fetching_done.wait()
        try:
            await self._inflight.wait_idle()
        except asyncio.CancelledError:
            await self._inflight.abandon_all()
            raise

    # --- one fetched batch -------------------------------------------------------------

    async def _process(self, messages: list[Msg], permit: _Permit) -> None:
        pendings: list[_Pending] = []
        # Per tenant, in message order: each run with the messages naming it.
        groups: dict[str, list[tuple[RunRef, list[_Pending]]]] = {}
        weights: dict[str, int] = {}
        index: dict[RunRef, list[_Pending]] = {}
        for msg in messages:
            try:
                runs = decode_dispatch(msg.data)
            except ValueError as exc:
                log.warning(
                    "terminating malformed message: %s",
                    exc,
                    extra={"action": "consume.malformed", "subject": msg.subject},
                )
                await _quietly(msg.term())
                self.stats.terminated += 1
                continue
            pending = _Pending(msg, unresolved=0)
            pendings.append(pending)
            for ref, tenant, weight in runs:
                weights[tenant] = weight
                owners = index.get(ref)
                if owners is not None:  # the same run twice in a batch: lease it once
                    owners.append(pending)
                else:
                    owners = index[ref] = [pending]
                    groups.setdefault(tenant, []).append((ref, owners))
                pending.unresolved += 1
        if not groups:
            return
        if all(self._inflight.paced(tenant) for tenant in groups):
            # Its runs wait for their tenants' pace (pacing.py), which may take seconds:
            # holding a place in the pipeline meanwhile, a paced tenant's small batches
            # (one per admission pass) filled it, and another tenant's message waited
            # in the stream behind them. The prefetch still bounds what waits here.
            permit.release()
        keepalive = asyncio.create_task(self._keep_alive(pendings))
        # The batch's place in the queue for slots, kept for all its runs (InFlight.reserve).
        ticket = self._inflight.ticket()
        outcome = _BatchOutcome()
        self._unslotted += len(index)
        try:
            async with asyncio.TaskGroup() as tasks:
                for tenant, work in groups.items():
                    tasks.create_task(
                        self._lease_group(tenant, weights[tenant], work, ticket, outcome)
                    )
        finally:
            keepalive.cancel()
            await asyncio.gather(keepalive, return_exceptions=True)
            self._unslotted -= len(index) - outcome.slotted
            # Stopping or out of slots: another executor may take them now. The ledger
            # refusing: wait. A run rejected at capacity keeps its retry_after.
            at_once = self._stopping.is_set() or outcome.out_of_slots
            delay = None if at_once else self._capacity_retry_s
            for pending in pendings:
                if not pending.done:
                    pending.done = True
                    wait = pending.nak_delay_s if pending.nak_delay_s is not None else delay
                    await _quietly(pending.msg.nak(delay=wait))
                    self.stats.naked += 1

    async def _lease_group(
        self,
        tenant: str,
        weight: int,
        work: list[tuple[RunRef, list[_Pending]]],
        ticket: int,
        outcome: _BatchOutcome,
    ) -> None:
        """Lease one tenant's runs of a batch as its call slots come: each slot's worth
        in a LeaseRuns of its own while this waits for more (the next freed slots go to
        the tenant holding the fewest, so waiting out a lease would hand them on)."""
        position = 0
        async with asyncio.TaskGroup() as leases:
            while position < len(work) and not (self._stopping.is_set() or outcome.refused):
                most = min(len(work) - position, MAX_LEASE_BATCH)
                slots = await self._inflight.reserve(
                    most,
                    stop=self._stopping,
                    timeout_s=_PACED_SLOT_WAIT_S if self._inflight.paced(tenant) else _SLOT_WAIT_S,
                    ticket=ticket,
                    tenant=tenant,
                    weight=weight,
                )
                if slots == 0:
                    outcome.out_of_slots = outcome.out_of_slots or not self._stopping.is_set()
                    break
                chunk = work[position : position + slots]
                position += slots
                self._unslotted -= slots
                outcome.slotted += slots
                leases.create_task(self._lease_chunk(tenant, chunk, outcome))

    async def _lease_chunk(
        self, tenant: str, chunk: list[tuple[RunRef, list[_Pending]]], outcome: _BatchOutcome
    ) -> None:
        """One LeaseRuns for runs whose slots are reserved; the slots no started run
        took go back, whatever happened (a leaked slot would shrink max_in_flight)."""
        used = 0
        finished: list[_Pending] = []
        try:
            results = await self._leases.lease(tenant, [ref for ref, _ in chunk])
            if results is None:
                outcome.refused = True
                return
            used, finished = self._apply(chunk, results, tenant)
        finally:
            self._inflight.release(len(chunk) - used, tenant)
        for pending in finished:
            await self._finish(pending)

    def _apply(
        self,
        chunk: list[tuple[RunRef, list[_Pending]]],
        results: list[LeaseResult],
        tenant: str,
    ) -> tuple[int, list[_Pending]]:
        """Start granted runs, record rejections; returns the slots used and the
        messages whose runs are now all resolved."""
        used = 0
        finished: list[_Pending] = []
        for (_, owners), result in zip(chunk, results, strict=True):
            if isinstance(result, Lease):
                self.stats.granted += 1
                # False: already held (an idempotent re-grant), no second call.
                if self._inflight.start(result, tenant):
                    used += 1
            elif isinstance(result, UnusableGrant):
                self.stats.granted += 1
                self._refuse_grant(result)
            else:
                reason = result.reason
                self.stats.rejected[reason] = self.stats.rejected.get(reason, 0) + 1
                if reason not in _ACK_REASONS:
                    # TENANT_AT_CAPACITY (and anything unknown): the run must come back.
                    delay = (
                        result.retry_after.total_seconds()
                        if result.retry_after is not None
                        else self._capacity_retry_s
                    )
                    for owner in owners:
                        owner.nak_delay_s = max(owner.nak_delay_s or 0.0, delay)
            for owner in owners:
                owner.unresolved -= 1
                if owner.unresolved == 0 and not owner.done:
                    owner.done = True
                    finished.append(owner)
        return used, finished

    def _refuse_grant(self, grant: UnusableGrant) -> None:
        """A grant we cannot act on (no target): report it as a final failure."""
        log.error(
            "unusable grant: %s",
            grant.error,
            extra={"action": "lease.bad_grant", "run_key": grant.run.key},
        )
        if self._submit is None:
            return
        now = self._clock.now()
        outcome = Outcome(
            status=OutcomeStatus.FAILED_FINAL,
            started_at=now,
            finished_at=now,
            error=f"unusable grant: {grant.error}",
            error_class=ErrorClass.REFUSED,
        )
        completion = Completion(grant.run, grant.attempt, outcome, lease_id=grant.lease_id)
        task = asyncio.ensure_future(self._submit(completion))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _finish(self, pending: _Pending) -> None:
        if pending.nak_delay_s is not None:
            await _quietly(pending.msg.nak(delay=pending.nak_delay_s))
            self.stats.naked += 1
        else:
            await _quietly(pending.msg.ack())
            self.stats.acked += 1

    async def _keep_alive(self, pendings: list[_Pending]) -> None:
        """Tell JetStream we still work on messages waiting for slots (no redelivery)."""
        while True:
            await self._clock.sleep(self._ack_wait_s / 3)
            for pending in pendings:
                if not pending.done:
                    await _quietly(pending.msg.in_progress())

    async def _lease(self, refs: list[RunRef]) -> list[LeaseResult] | None:
        """One LeaseRuns (retried by the ledger client); None if refused, given up or
        stopping: the caller gives the messages back."""
        try:
            return await self._ledger.lease_runs(refs, stop=self._stopping)
        except LedgerError as exc:
            # Given up: the client logged it; stopping: nothing to say.
            if not exc.gave_up and not self._stopping.is_set():
                log.error(
                    "LeaseRuns failed: %s",
                    exc.details,
                    extra={"action": "lease", "grpc_code": exc.code_name, "runs": len(refs)},
                )
            return None


async def _quietly(ack: object) -> None:
    """Ack/nak/term without raising: a lost ack only means a redelivery."""
    try:
        await ack  # type: ignore[misc]
    except Exception as exc:
        log.warning("message ack failed: %s", exc, extra={"action": "consume.ack"})
