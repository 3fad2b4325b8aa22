"""The notifier: delivers tenants' notifications (a lifecycle component of the API).

Every API replica runs one; they share the work through the database
(docs/design.md section 12):

1. **Make**: lock due outbox events (``notification_events``, SKIP LOCKED), group them
   per channel (:func:`sundial.notify.group_events`: one notification per event, or one
   per digest), write each notification with its body fixed and delete the events, in
   one transaction.
2. **Claim**: take due notifications (SKIP LOCKED), fairly across channels (at most
   :data:`PER_CHANNEL` of one channel) and tenants (every tenant's first before any
   tenant's second), and only as many as can start now: the free send slots, and of one
   tenant no more than it may still hold (:attr:`Notifier.per_tenant`, a quarter of the
   slots); add one to their attempt, move their next attempt to the claim's end, and
   commit: a notifier that dies while sending leaves them due again then (at least once).
3. **Send** each outside any transaction, at most ``concurrency`` at once and each
   bounded by ``timeout_s``; the next pass does not wait for them, so a tenant whose
   targets hang holds its quarter of the slots for the timeout and every other tenant's
   notifications go out on the next pass (they waited for every send of the pass before,
   each round a timeout long); signed like a run's call (``Sundial-Signature`` with the
   tenant's valid signing secrets, the notification id as key, purpose
   ``notification`` and the channel's target as destination; the Standard Webhooks
   headers where the target asks), ``Idempotency-Key: <notification_id>`` the same on
   every retry, through
   the executor's target callers (:mod:`sundial.targets`): the tenant's egress policy is
   checked again at every connection.
4. **Record** each as its send completes (not after the batch): delivered, due again
   after a backoff, or failed after :data:`sundial.notify.MAX_ATTEMPTS` (or when its
   channel is gone). The record is fenced on the claimed attempt: a notifier whose
   claim ended meanwhile changes nothing.

Nothing here is on the dispatch path: events are rows written by the transactions of
their facts, and a slow or failing notification target holds at most
:data:`PER_CHANNEL` sends, and a tenant :attr:`Notifier.per_tenant`, each for at most
``timeout_s``.
Logs carry ids, kinds and error classes, never a target's URL, header or secret.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta

import asyncpg
from opentelemetry import metrics

from sundial.api.deliveries import Delivery, SendResult, delivery_of, sent_result
from sundial.api.store import queries
from sundial.core.clock import Clock
from sundial.core.errors import SundialError
from sundial.core.signing import Purpose, destination, signature, standard_webhook_headers
from sundial.core.telemetry import NOTIFICATIONS_DELIVERED, NOTIFICATIONS_FAILED
from sundial.notify import (
    MAX_ATTEMPTS,
    OutboxEvent,
    group_events,
    notification_body,
    retry_delay,
)
from sundial.run import (
    GrpcTarget,
    HttpTarget,
    resolve_target,
    target_references,
)
from sundial.targets import AddressPolicy, GrpcCaller, HttpCaller
from sundial.v1 import target_pb2

__all__ = ["PER_CHANNEL", "Delivery", "Notifier", "SendResult"]

log = logging.getLogger(__name__)

_EVENT_BATCH = 10_000  # events made into notifications per pass, at most
_EVENT_CHANNELS = 100  # channels whose due events a pass takes, oldest due first
_DIGEST_EVENTS = 5000  # events of one digest channel per pass (one notification)
_PLAIN_EVENTS = 50  # events of one channel without a window per pass (one notification each)
_SEND_BATCH = 100
PER_CHANNEL = 4
"""Notifications of one channel a pass claims, at most."""
_CLAIM_WINDOW = 5000  # the oldest and the newest due notifications the fair claim looks at
_PURGE_AFTER = timedelta(days=7)
_PURGE_BATCH = 5000
_PURGE_BATCHES = 20  # per pass; a flood left beyond that is purged by the next pass
USER_AGENT = "sundial-notifier/1"


SecretValues = Callable[[Sequence[tuple[str, str]]], Awaitable[dict[tuple[str, str], str]]]
"""``[(tenant, name), ...] -> {(tenant, name): value}`` (:meth:`SecretManager.values`)."""


class Notifier:
    """Makes and delivers notifications until stopped (see the module doc).

    Args:
        pool: The API's pool.
        operator: The operator's SSRF settings (as for job targets).
        clock: The source of "now".
        interval_s: Seconds between passes while nothing is due.
        timeout_s: Bound on one delivery (connect and answer).
        concurrency: Deliveries in flight at once.
        claim_s: How long a claimed notification is left to its notifier before it is
            due again (at least twice ``timeout_s``). A pass claims only what it can
            send in that time, one ``timeout_s`` kept as a margin: ``concurrency``
            times the rounds of ``timeout_s`` that fit, at most 100.
        rng: Randomness of the backoff (tests pass a seeded one).
        meter: Where the delivered and failed counters go (default: global).
    """

    name = "notifier"

    def __init__(
        self,
        pool: asyncpg.Pool,
        operator: AddressPolicy,
        clock: Clock,
        *,
        interval_s: float = 1.0,
        timeout_s: float = 10.0,
        concurrency: int = 16,
        claim_s: float = 60.0,
        rng: random.Random | None = None,
        meter: metrics.Meter | None = None,
        secrets: SecretValues | None = None,
    ) -> None:
        self._pool = pool
        self._secrets = secrets
        self._operator = operator
        self._clock = clock
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        claim_s = max(claim_s, timeout_s * 2)
        self._claim = timedelta(seconds=claim_s)
        rounds = max(1, int(claim_s // timeout_s) - 1)
        self.batch = min(_SEND_BATCH, concurrency * rounds)
        """Notifications one claim takes at most: all are sent before their claim ends."""
        self.per_tenant = max(1, concurrency // 4)
        """Sends of one tenant in flight at most: its hanging targets leave the other
        three quarters of the slots to other tenants."""
        self._concurrency = concurrency
        self._slots = asyncio.Semaphore(concurrency)
        self._in_flight: Counter[str] = Counter()  # sends started and not recorded, by tenant
        self._sending: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Event()  # a send ended: its slot may take another
        self._rng = rng or random.Random()
        self._http = HttpCaller(operator, max_connections=concurrency)
        self._grpc = GrpcCaller(operator, clock=clock)
        self._stop = asyncio.Event()
        meter = meter or metrics.get_meter("sundial.api")
        self._delivered = meter.create_counter(
            NOTIFICATIONS_DELIVERED,
            unit="{notification}",
            description="Notifications their target accepted",
        )
        self._failed = meter.create_counter(
            NOTIFICATIONS_FAILED,
            unit="{notification}",
            description="Failed deliveries of notifications, by whether they were given up",
        )

    # --- one pass -------------------------------------------------------------------

    async def make_notifications(self) -> int:
        """Turn due outbox events into notifications; returns how many were made."""
        now = self._clock.now()
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                queries.lock_due_notification_events,
                now,
                _EVENT_BATCH,
                _EVENT_CHANNELS,
                _DIGEST_EVENTS,
                _PLAIN_EVENTS,
            )
            if not rows:
                return 0
            events = [
                OutboxEvent(
                    event_id=r["event_id"],
                    channel_id=r["channel_id"],
                    tenant_id=r["tenant_id"],
                    kind=r["kind"],
                    occurred_at=r["occurred_at"],
                    detail=json.loads(r["detail"]),
                    digest=r["digest"],
                )
                for r in rows
            ]
            planned = group_events(events)
            await conn.fetchval(
                queries.make_notifications,
                [p.notification_id for p in planned],
                [p.channel_id for p in planned],
                [p.tenant_id for p in planned],
                [notification_body(p, now) for p in planned],
                [len(p.events) for p in planned],
                now,
                [e.event_id for e in events],
            )
        return len(planned)

    async def claim(
        self,
        limit: int | None = None,
        *,
        per_tenant: int | None = None,
        room: Mapping[str, int] | None = None,
    ) -> list[Delivery]:
        """Claim up to ``limit`` (default: :attr:`batch`) due notifications, at most
        :data:`PER_CHANNEL` of a channel and, when ``per_tenant`` is given, at most that
        many of a tenant (``room[tenant]`` for a tenant with sends in flight), every
        tenant's first before any tenant's second (committed before any is sent)."""
        now = self._clock.now()
        tenants = sorted(room or {})
        rows = await self._pool.fetch(
            queries.claim_notifications,
            now,
            self.batch if limit is None else limit,
            now + self._claim,
            PER_CHANNEL,
            _CLAIM_WINDOW,
            tenants,
            [(room or {})[t] for t in tenants],
            per_tenant,
        )
        return [delivery_of(r) for r in rows]

    async def start_sends(self) -> list[asyncio.Task[None]]:
        """Make notifications, then claim what can start now (the free slots; of a
        tenant, what it may still hold) and start sending it, each recorded as its send
        completes; returns the sends started (not waited for)."""
        await self.make_notifications()
        free = self._concurrency - sum(self._in_flight.values())
        if free <= 0:
            return []
        room = {t: max(0, self.per_tenant - n) for t, n in self._in_flight.items() if n}
        deliveries = await self.claim(min(self.batch, free), per_tenant=self.per_tenant, room=room)
        # Sends that could not start early enough to end within the claim are left to it.
        latest_start = asyncio.get_running_loop().time() + (
            self._claim.total_seconds() - self._timeout_s
        )
        tasks = []
        for delivery in deliveries:
            self._in_flight[delivery.tenant_id] += 1
            task = asyncio.create_task(self._send_and_record(delivery, latest_start))
            self._sending.add(task)
            task.add_done_callback(functools.partial(self._sent, delivery.tenant_id))
            tasks.append(task)
        return tasks

    def _sent(self, tenant_id: str, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        self._in_flight[tenant_id] -= 1
        if self._in_flight[tenant_id] <= 0:
            del self._in_flight[tenant_id]
        self._freed.set()
        if not task.cancelled() and task.exception() is not None:
            # The database failed recording: the claim ends and it is sent again.
            log.warning(
                "notification not recorded: %s",
                type(task.exception()).__name__,
                extra={"action": "notify"},
            )

    async def deliver_once(self) -> int:
        """:meth:`start_sends`, then wait for those sends (tests; :meth:`run` does not
        wait); returns how many were claimed."""
        tasks = await self.start_sends()
        if not tasks:
            return 0
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome  # cancellation: stop
        failed = [o for o in outcomes if isinstance(o, Exception)]
        if failed:
            raise failed[0]  # the database failed recording: the pass fails (logged)
        return len(tasks)

    async def _send_and_record(self, delivery: Delivery, latest_start: float) -> None:
        try:
            result = await self._send(delivery, latest_start)
        except Exception as exc:
            # A bug in one send must not leave it claimed and unrecorded.
            log.error(
                "notification send failed unexpectedly",
                exc_info=exc,
                extra={"action": "notify", "notification_id": str(delivery.notification_id)},
            )
            result = SendResult(False, f"internal error: {type(exc).__name__}", "internal")
        if result is not None:
            await self.record([delivery], [result])

    async def record(self, deliveries: Sequence[Delivery], results: Sequence[SendResult]) -> int:
        """Record what the sends of claimed deliveries came to; returns how many rows
        changed (a delivery whose claim ended and was taken again changes nothing)."""
        now = self._clock.now()
        states: list[str] = []
        due: list[datetime | None] = []
        errors: list[str | None] = []
        for delivery, result in zip(deliveries, results, strict=True):
            if result.ok:
                states.append("delivered")
                due.append(None)
                errors.append(None)
                self._delivered.add(1)
                continue
            final = result.final or delivery.attempt >= MAX_ATTEMPTS
            states.append("failed" if final else "pending")
            due.append(
                None
                if final
                else now + retry_delay(delivery.attempt, self._rng, result.retry_after)
            )
            errors.append(result.error[:1000])
            self._failed.add(1, {"final": str(final).lower()})
            log.warning(
                "notification delivery failed",
                extra={
                    "action": "notify",
                    "notification_id": str(delivery.notification_id),
                    "tenant_id": delivery.tenant_id,
                    "attempt": delivery.attempt,
                    "error_class": result.error_class,
                    "final": final,
                },
            )
        status = await self._pool.execute(
            queries.finish_notifications,
            [d.notification_id for d in deliveries],
            [d.attempt for d in deliveries],
            states,
            due,
            errors,
            now,
        )
        changed = int(status.rsplit(" ", 1)[1])
        if changed < len(deliveries):
            log.warning(
                "notification outcome recorded after its claim ended: ignored",
                extra={"action": "notify", "count": len(deliveries) - changed},
            )
        return changed

    async def purge(self) -> bool:
        """Delete notifications delivered or given up more than 7 days ago, 5,000 at a
        time while a batch comes back full, at most 100,000 per call; returns whether
        none is left to purge."""
        cutoff = self._clock.now() - _PURGE_AFTER
        for _ in range(_PURGE_BATCHES):
            if await self._pool.fetchval(queries.purge_notifications, cutoff, _PURGE_BATCH) < (
                _PURGE_BATCH
            ):
                return True
        return False

    # --- sending --------------------------------------------------------------------

    def _headers(self, delivery: Delivery) -> dict[str, str]:
        """Signed as a notification to the channel's target (docs/design.md section 7,
        "Signatures"): replayed to a job's target, it does not verify there."""
        key = str(delivery.notification_id)
        target = delivery.target
        assert target is not None
        now = self._clock.now()
        to = destination(target)
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": key,
            "Sundial-Attempt": str(delivery.attempt),
            "Sundial-Signature": signature(
                delivery.secrets,
                now,
                key,
                delivery.attempt,
                delivery.body,
                purpose=Purpose.NOTIFICATION,
                to=to,
            ),
            "Sundial-Notification-Id": key,
            "User-Agent": USER_AGENT,
        }
        if target.auth.standard_webhooks:
            headers.update(
                standard_webhook_headers(
                    delivery.secrets,
                    now,
                    key,
                    delivery.body,
                    purpose=Purpose.NOTIFICATION,
                    to=to,
                )
            )
        return headers

    async def _send(self, delivery: Delivery, latest_start: float) -> SendResult | None:
        if delivery.target is None:
            return SendResult(False, "no channel to deliver to", "channel_deleted", final=True)
        async with self._slots:
            if asyncio.get_running_loop().time() > latest_start:
                return None  # not sent: due again when its claim ends
            delivery = await self._resolved(delivery)
            try:
                async with asyncio.timeout(self._timeout_s):
                    if isinstance(delivery.target, HttpTarget):
                        return await self._send_http(delivery, delivery.target)
                    assert isinstance(delivery.target, GrpcTarget)
                    return await self._send_grpc(delivery, delivery.target)
            except TimeoutError:
                return SendResult(False, f"no answer within {self._timeout_s:g} s", "timeout")

    async def _resolved(self, delivery: Delivery) -> Delivery:
        """The delivery with its target's ``${secret:<name>}`` references filled in
        (docs/design.md section 7, "Secrets"), for this send only; a header whose secret
        is gone is left out."""
        target = delivery.target
        names = sorted(target_references([target]))
        if target is None or not names or self._secrets is None:
            return delivery
        found = await self._secrets([(delivery.tenant_id, name) for name in names])
        values = {name: value for (_, name), value in found.items()}
        filled, _ = resolve_target(target, values)
        return dataclasses.replace(delivery, target=filled)

    async def _send_http(self, delivery: Delivery, target: HttpTarget) -> SendResult:
        outcome = await self._http.call(
            target, delivery.body, self._headers(delivery), delivery.egress, delivery.tenant_id
        )
        return sent_result(outcome)

    async def _send_grpc(self, delivery: Delivery, target: GrpcTarget) -> SendResult:
        headers = self._headers(delivery)
        metadata = {
            k.lower(): v for k, v in headers.items() if k not in ("Content-Type", "User-Agent")
        }
        request = target_pb2.ExecuteRequest(
            run_key=str(delivery.notification_id),
            idempotency_key=str(delivery.notification_id),
            tenant_id=delivery.tenant_id,
            attempt=delivery.attempt,
            payload=delivery.body,
        )
        # The executor's caller: the address checked at every call, channels cached per
        # checked address, the answer classified as a run's would be.
        outcome = await self._grpc.call(
            target,
            request,
            metadata,
            timeout_s=self._timeout_s,
            egress=delivery.egress,
            tenant=delivery.tenant_id,
        )
        return sent_result(outcome)

    # --- lifecycle ------------------------------------------------------------------

    async def run(self, started: Callable[[], None]) -> None:
        """Deliver until :meth:`stop`, not waiting for the sends started: after a pass
        that claimed any, or while sends are in flight, again as soon as a send ends;
        else every ``interval_s``. Sends in flight when stopping are cancelled
        (their claims end and they are sent again: at least once)."""
        started()
        purged_at: datetime | None = None
        while not self._stop.is_set():
            sent = 0
            self._freed.clear()
            try:
                sent = len(await self.start_sends())
                now = self._clock.now()
                if purged_at is None or now - purged_at > timedelta(hours=1):
                    # Hourly; at once again while a flood is left to purge.
                    purged_at = now if await self.purge() else None
            except (SundialError, asyncpg.PostgresError, OSError) as exc:
                log.warning(
                    "notifier pass failed: %s", type(exc).__name__, extra={"action": "notify"}
                )
            except Exception:
                # Notifications must never take the API down: log it and try again.
                log.exception("notifier pass failed", extra={"action": "notify"})
            # More may be due while this pass claimed some, or while sends are in flight
            # (a tenant at its share had to leave its own for later).
            await self._rest(backlog=sent > 0 or bool(self._in_flight))
        for task in list(self._sending):
            task.cancel()
        await asyncio.gather(*self._sending, return_exceptions=True)
        await self.aclose()

    async def _rest(self, *, backlog: bool) -> None:
        """Wait ``interval_s`` (or until stopped); behind a backlog, only until a send
        ends (cleared before the pass: none is missed), so a flood of notifications goes
        out as fast as its sends end."""
        waits = [asyncio.ensure_future(self._stop.wait())]
        if backlog:
            waits.append(asyncio.ensure_future(self._freed.wait()))
        try:
            await asyncio.wait(waits, timeout=self._interval_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def aclose(self) -> None:
        """Close the connections to targets (:meth:`run` does at its end)."""
        await self._http.aclose()
        await self._grpc.aclose()

    async def stop(self) -> None:
        """Stop after the current pass; idempotent."""
        self._stop.set()
