"""The notifier: delivers tenants' notifications (a lifecycle component of the API).

Every API replica runs one; they share the work through the database
(docs/design.md section 12):

1. **Make**: lock due outbox events (``notification_events``, SKIP LOCKED), group them
   per channel (:func:`sundial.notify.group_events`: one notification per event, or one
   per digest), write each notification with its body fixed and delete the events, in
   one transaction.
2. **Claim**: take due notifications (SKIP LOCKED), add one to their attempt and move
   their next attempt to the claim's end, and commit: a notifier that dies while sending
   leaves them due again then (at least once).
3. **Send** each outside any transaction, at most ``concurrency`` at once and each
   bounded by ``timeout_s``, signed like a run's call (``Sundial-Signature`` over
   ``<t>.<notification_id>.<attempt>.`` and the body, with the tenant's valid signing
   secrets), ``Idempotency-Key: <notification_id>`` the same on every retry, through
   the executor's target callers (:mod:`sundial.targets`): the tenant's egress policy is
   checked again at every connection.
4. **Record**: delivered, due again after a backoff, or failed after
   :data:`sundial.notify.MAX_ATTEMPTS` (or when its channel is gone).

Nothing here is on the dispatch path: events are rows written by the transactions of
their facts, and a slow or failing notification target delays only its notifications.
Logs carry ids, kinds and error classes, never a target's URL, header or secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg
import grpc
from opentelemetry import metrics

from sundial.api.store import queries
from sundial.core.clock import Clock
from sundial.core.egress import EgressPolicy, Protocol, policy_from_document
from sundial.core.errors import SundialError
from sundial.core.signing import signature
from sundial.core.telemetry import NOTIFICATIONS_DELIVERED, NOTIFICATIONS_FAILED
from sundial.notify import (
    MAX_ATTEMPTS,
    OutboxEvent,
    group_events,
    notification_body,
    retry_delay,
)
from sundial.run import GrpcTarget, HttpTarget, Target, target_from_json
from sundial.targets import AddressPolicy, HttpCaller, TargetRefused, split_host_port
from sundial.v1 import target_pb2, target_pb2_grpc

__all__ = ["Delivery", "Notifier"]

log = logging.getLogger(__name__)

_EVENT_BATCH = 5000
_SEND_BATCH = 100
_PURGE_AFTER = timedelta(days=7)
USER_AGENT = "sundial-notifier/1"
_MAX_CHANNELS = 256  # gRPC channels kept open, oldest closed first


@dataclass(frozen=True, slots=True)
class Delivery:
    """One claimed notification and what sending it needs."""

    notification_id: uuid.UUID
    tenant_id: str
    body: bytes
    attempt: int
    target: Target | None
    egress: EgressPolicy | None
    secrets: tuple[bytes, ...]


def _delivery(row: asyncpg.Record) -> Delivery:
    """A claimed row as what sending it needs; a channel whose stored target or policy
    cannot be read is delivered nowhere (and the notification given up)."""
    try:
        target = target_from_json(json.loads(row["target"])) if row["target"] else None
        egress = policy_from_document(row["egress_policy"]) if row["egress_policy"] else None
    except (ValueError, TypeError, KeyError):
        log.exception(
            "unreadable notification channel",
            extra={"action": "notify", "notification_id": str(row["notification_id"])},
        )
        target, egress = None, None
    return Delivery(
        notification_id=row["notification_id"],
        tenant_id=row["tenant_id"],
        body=row["body"],
        attempt=row["attempt"],
        target=target,
        egress=egress,
        secrets=tuple(row["signing_secrets"] or ()),
    )


@dataclass(frozen=True, slots=True)
class _Result:
    ok: bool
    error: str = ""
    error_class: str = ""
    retry_after: timedelta | None = None
    final: bool = False


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
            due again (longer than ``timeout_s``).
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
    ) -> None:
        self._pool = pool
        self._operator = operator
        self._clock = clock
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._claim = timedelta(seconds=max(claim_s, timeout_s * 2))
        self._slots = asyncio.Semaphore(concurrency)
        self._rng = rng or random.Random()
        self._http = HttpCaller(operator, max_connections=concurrency)
        self._channels: dict[tuple[str, bool, str], grpc.aio.Channel] = {}
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
            rows = await conn.fetch(queries.lock_due_notification_events, now, _EVENT_BATCH)
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

    async def claim(self, limit: int = _SEND_BATCH) -> list[Delivery]:
        """Claim up to ``limit`` due notifications (committed before any is sent)."""
        now = self._clock.now()
        rows = await self._pool.fetch(queries.claim_notifications, now, limit, now + self._claim)
        return [_delivery(r) for r in rows]

    async def deliver_once(self) -> int:
        """Make notifications, then claim, send and record one batch; returns how many
        were sent (delivered or not)."""
        await self.make_notifications()
        deliveries = await self.claim()
        if not deliveries:
            return 0
        sent = await asyncio.gather(*(self._send(d) for d in deliveries), return_exceptions=True)
        results: list[_Result] = []
        for delivery, outcome in zip(deliveries, sent, strict=True):
            if isinstance(outcome, _Result):
                results.append(outcome)
                continue
            if not isinstance(outcome, Exception):
                raise outcome  # cancellation: stop
            # A bug in one send must not leave the batch claimed and unrecorded.
            log.error(
                "notification send failed unexpectedly",
                exc_info=outcome,
                extra={"action": "notify", "notification_id": str(delivery.notification_id)},
            )
            results.append(_Result(False, f"internal error: {type(outcome).__name__}", "internal"))
        await self._record(deliveries, results)
        return len(deliveries)

    async def _record(self, deliveries: Sequence[Delivery], results: Sequence[_Result]) -> None:
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
        await self._pool.execute(
            queries.finish_notifications,
            [d.notification_id for d in deliveries],
            states,
            due,
            errors,
            now,
        )

    # --- sending --------------------------------------------------------------------

    def _headers(self, delivery: Delivery) -> dict[str, str]:
        key = str(delivery.notification_id)
        return {
            "Content-Type": "application/json",
            "Idempotency-Key": key,
            "Sundial-Attempt": str(delivery.attempt),
            "Sundial-Signature": signature(
                delivery.secrets, self._clock.now(), key, delivery.attempt, delivery.body
            ),
            "Sundial-Notification-Id": key,
            "User-Agent": USER_AGENT,
        }

    async def _send(self, delivery: Delivery) -> _Result:
        if delivery.target is None:
            return _Result(False, "no channel to deliver to", "channel_deleted", final=True)
        async with self._slots:
            try:
                async with asyncio.timeout(self._timeout_s):
                    if isinstance(delivery.target, HttpTarget):
                        return await self._send_http(delivery, delivery.target)
                    assert isinstance(delivery.target, GrpcTarget)
                    return await self._send_grpc(delivery, delivery.target)
            except TimeoutError:
                return _Result(False, f"no answer within {self._timeout_s:g} s", "timeout")

    async def _send_http(self, delivery: Delivery, target: HttpTarget) -> _Result:
        outcome = await self._http.call(
            target, delivery.body, self._headers(delivery), delivery.egress
        )
        if not outcome.failed:
            return _Result(True)
        error_class = outcome.error_class.value if outcome.error_class else ""
        return _Result(
            False,
            outcome.error,
            error_class,
            retry_after=outcome.retry_after,
            # A target the policy forbids stays forbidden; anything else may pass later.
            final=error_class == "target_forbidden",
        )

    async def _send_grpc(self, delivery: Delivery, target: GrpcTarget) -> _Result:
        host, port = split_host_port(target.address)
        try:
            ip = (await self._operator.rules(delivery.egress, Protocol.GRPC).resolve(host, port))[0]
        except TargetRefused as exc:
            return _Result(False, str(exc), exc.error_class.value, final=True)
        except OSError as exc:
            return _Result(False, str(exc), "connection")
        key = (target.address, target.plaintext, ip)
        channel = self._channels.get(key)
        if channel is None:
            dial = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
            options: list[tuple[str, str | int]] = [("grpc.default_authority", target.address)]
            if target.plaintext:
                channel = grpc.aio.insecure_channel(dial, options=options)
            else:
                options.append(("grpc.ssl_target_name_override", host))
                channel = grpc.aio.secure_channel(dial, grpc.ssl_channel_credentials(), options)
            self._channels[key] = channel
            while len(self._channels) > _MAX_CHANNELS:
                oldest = next(iter(self._channels))
                await self._channels.pop(oldest).close()
        headers = self._headers(delivery)
        metadata = [(k, v) for k, v in sorted(target.metadata.items())]
        metadata += [
            (k.lower(), v) for k, v in headers.items() if k not in ("Content-Type", "User-Agent")
        ]
        request = target_pb2.ExecuteRequest(
            run_key=str(delivery.notification_id),
            idempotency_key=str(delivery.notification_id),
            tenant_id=delivery.tenant_id,
            attempt=delivery.attempt,
            payload=delivery.body,
        )
        try:
            await target_pb2_grpc.TargetServiceStub(channel).Execute(
                request, timeout=self._timeout_s, metadata=metadata
            )
        except grpc.aio.AioRpcError as exc:
            return _Result(False, f"gRPC {exc.code().name}", "grpc")
        return _Result(True)

    # --- lifecycle ------------------------------------------------------------------

    async def run(self, started: Callable[[], None]) -> None:
        """Deliver until :meth:`stop`: at once again after a full batch, else every
        ``interval_s``."""
        started()
        purged_at: datetime | None = None
        while not self._stop.is_set():
            sent = 0
            try:
                sent = await self.deliver_once()
                now = self._clock.now()
                if purged_at is None or now - purged_at > timedelta(hours=1):
                    purged_at = now
                    await self._pool.execute(queries.purge_notifications, now - _PURGE_AFTER, 5000)
            except (SundialError, asyncpg.PostgresError, OSError) as exc:
                log.warning(
                    "notifier pass failed: %s", type(exc).__name__, extra={"action": "notify"}
                )
            except Exception:
                # Notifications must never take the API down: log it and try again.
                log.exception("notifier pass failed", extra={"action": "notify"})
            if sent >= _SEND_BATCH:
                continue
            try:
                async with asyncio.timeout(self._interval_s):
                    await self._stop.wait()
            except TimeoutError:
                pass
        await self._http.aclose()
        for channel in self._channels.values():
            await channel.close()

    async def stop(self) -> None:
        """Stop after the current pass; idempotent."""
        self._stop.set()
