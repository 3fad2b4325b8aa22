"""``RunLedger``: how executors lease, heartbeat and complete runs (ledger.proto).

Every state change of a run an executor causes goes through here, in one transaction
per call, with the run rows locked:

- LeaseRuns grants a run that is QUEUED, RETRYING and due, or RUNNING with an expired
  lease the sweeper has not reclaimed yet; each grant increments ``attempt``, the fencing
  token. A run the calling executor already holds under a live lease is granted again
  at the same attempt with its lease extended (idempotent re-grant: a retried call whose
  answer was lost). The tenant's ``max_concurrent_runs`` is enforced under a per-tenant advisory
  lock, so concurrent calls (on any scheduler replica) cannot overshoot it.
- Heartbeat extends leases only where the attempt still matches.
- CompleteRuns writes an outcome only where the run is RUNNING at the reported attempt.
  Retryable failures wait ``random(0, min(max_delay, base_delay * 2^n))`` (full jitter)
  or the target's Retry-After when longer; a final failure or the last attempt makes the
  run DEAD and publishes a DeadLetter (the dead row keeps ``check_at`` until JetStream
  acknowledged it: the sweeper publishes it otherwise). A run asked to stop ends
  CANCELLED on any outcome but success, and is never leased again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import random
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import grpc
from nats.js import JetStreamContext

from sundial.core.clock import Clock, SystemClock
from sundial.run import JobPolicies, policies_from_json
from sundial.core.errors import InvalidArgument
from sundial.run import run_key
from sundial.scheduler import convert
from sundial.scheduler.config import SchedulerConfig
from sundial.scheduler.model import RunRef
from sundial.scheduler.publisher import publish_due_dead_letters
from sundial.scheduler.store import TRANSIENT_ERRORS, Key, OutcomeWrite, Record, SchedulerStore
from sundial.v1 import ledger_pb2, ledger_pb2_grpc, run_pb2

log = logging.getLogger(__name__)

MAX_BATCH = 500
MAX_HELD = 10_000
MAX_ERROR_BYTES = 4096
MAX_RETRY_AFTER = timedelta(hours=24)
MIN_LEASE = timedelta(seconds=10)
MAX_LEASE = timedelta(minutes=5)

_FINISHED = {"succeeded", "dead", "skipped"}
_RETRYABLE = {ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE, ledger_pb2.OUTCOME_STATUS_TIMED_OUT}


def backoff(policies: JobPolicies, failures: int, rng: random.Random) -> timedelta:
    """Full-jitter delay after the ``failures``-th failed attempt (1-based)."""
    cap = min(policies.retry_max_delay, policies.retry_base_delay * (2**failures))
    return timedelta(seconds=rng.uniform(0, cap.total_seconds()))


def signature(secrets: list[bytes], at: datetime, key: str, attempt: int, payload: bytes) -> str:
    """The Sundial-Signature value (target.proto): ``t=<unix>,v1=<hex>[,v1=<hex>...]``,
    one v1 per currently valid secret of the tenant."""
    t = str(int(at.timestamp()))
    message = f"{t}.{key}.{attempt}.".encode() + payload
    macs = [hmac.new(secret, message, hashlib.sha256).hexdigest() for secret in secrets]
    return ",".join([f"t={t}", *(f"v1={mac}" for mac in macs)])


def _executor(executor_id: str) -> str:
    if not 1 <= len(executor_id) <= 128:
        raise InvalidArgument("executor_id", "must be 1-128 characters")
    return executor_id


def _lease_ttl(request: Any, default_s: int) -> timedelta:
    if not request.HasField("lease_ttl"):
        return timedelta(seconds=default_s)
    ttl = request.lease_ttl.ToTimedelta()
    if not MIN_LEASE <= ttl <= MAX_LEASE:
        raise InvalidArgument("lease_ttl", "must be between 10s and 5m")
    return ttl


class RunLedgerServicer(ledger_pb2_grpc.RunLedgerServicer):
    """The RunLedger gRPC service.

    Args:
        store: The scheduler store.
        jetstream: Where dead letters go.
        config: ``run_lease_s``, ``heartbeat_interval_s``, ``capacity_retry_s``.
        clock: The source of "now".
        rng: Randomness of the backoff (tests pass a seeded one).
    """

    def __init__(
        self,
        store: SchedulerStore,
        jetstream: JetStreamContext | None,
        config: SchedulerConfig,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._js = jetstream
        self._config = config
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()

    # --- LeaseRuns ------------------------------------------------------------------

    async def LeaseRuns(
        self, request: ledger_pb2.LeaseRunsRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.LeaseRunsResponse:
        executor_id = _executor(request.executor_id)
        if not 1 <= len(request.runs) <= MAX_BATCH:
            raise InvalidArgument("runs", f"must hold 1-{MAX_BATCH} runs")
        refs = [convert.run_ref_from_pb(r, f"runs[{i}]") for i, r in enumerate(request.runs)]
        ttl = _lease_ttl(request, self._config.run_lease_s)
        now = self._clock.now()
        lease_until = now + ttl
        rejections: dict[int, ledger_pb2.Rejection] = {}

        def decide(rows: dict[Key, Record], running: dict[str, int]) -> tuple[list[Key], list[Key]]:
            grants: list[Key] = []
            regrants: list[Key] = []
            granted: set[Key] = set()
            for index, ref in enumerate(refs):
                key = (ref.job_id, ref.scheduled_at)
                row = rows.get(key)
                reason, retry_after, detail = self._lease_verdict(row, now)
                if (
                    reason == ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE
                    and row is not None
                    and row["executor_id"] == executor_id
                    and key not in granted
                ):
                    # Idempotent re-grant: this executor already holds the live lease,
                    # so this is a retried LeaseRuns whose answer was lost (deadline,
                    # broken connection) after the grant committed, or a redelivery of a
                    # message it leased. Answering LEASED_ELSEWHERE would leave a granted
                    # run nobody calls until its lease expires as a failed attempt (DEAD
                    # on the last one, the target never called). The same attempt is
                    # granted again with its lease extended; no new fencing token, no
                    # capacity counted twice. The executor starts it unless it holds it.
                    granted.add(key)
                    regrants.append(key)
                    continue
                if reason is None and key in granted:
                    reason, detail = ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE, "duplicate"
                if reason is None and row is not None and row["status"] != "running":
                    tenant = row["tenant_id"]
                    if running.get(tenant, 0) >= row["max_concurrent_runs"]:
                        reason = ledger_pb2.REJECT_REASON_TENANT_AT_CAPACITY
                        retry_after = timedelta(seconds=self._config.capacity_retry_s)
                        detail = f"tenant has {running.get(tenant, 0)} runs running"
                    else:
                        running[tenant] = running.get(tenant, 0) + 1
                if reason is not None:
                    rejection = ledger_pb2.Rejection(reason=reason, detail=detail)
                    if retry_after is not None:
                        rejection.retry_after.CopyFrom(convert.duration(retry_after))
                    rejections[index] = rejection
                    continue
                granted.add(key)
                grants.append(key)
            return grants, regrants

        rows, attempts = await self._store.lease_runs(refs, executor_id, lease_until, now, decide)
        results = []
        for index, (ref, wire) in enumerate(zip(refs, request.runs, strict=True)):
            key = (ref.job_id, ref.scheduled_at)
            if index in rejections or key not in attempts:
                rejection = rejections.get(index) or ledger_pb2.Rejection(
                    reason=ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE, detail="duplicate"
                )
                results.append(ledger_pb2.LeaseResult(run=wire, rejection=rejection))
                continue
            row = rows[key]
            attempt = attempts.pop(key)
            policies = policies_from_json(row["policies"] or {})
            rk = run_key(ref.job_id, ref.scheduled_at)
            payload = bytes(row["payload"] or b"")
            grant = ledger_pb2.Grant(
                attempt=attempt,
                lease_until=convert.timestamp(lease_until),
                target=convert.target_to_pb(row["target"]),
                payload=payload,
                run_timeout=convert.duration(policies.run_timeout),
                tenant_id=row["tenant_id"],
                run_key=rk,
                signature=signature(
                    [bytes(k) for k in row["signing_secrets"] or [row["signing_secret"]]],
                    now,
                    rk,
                    attempt,
                    payload,
                ),
                kind=convert.RUN_KIND.get(row["kind"], run_pb2.RUN_KIND_UNSPECIFIED),
                job_name=row["job_name"] or "",
            )
            results.append(ledger_pb2.LeaseResult(run=wire, grant=grant))
            log.info(
                "run leased",
                extra={
                    "action": "lease",
                    "job_id": str(ref.job_id),
                    "run_key": rk,
                    "attempt": attempt,
                    "executor_id": executor_id,
                },
            )
        return ledger_pb2.LeaseRunsResponse(results=results)

    @staticmethod
    def _lease_verdict(
        row: Record | None, now: datetime
    ) -> tuple[int | None, timedelta | None, str]:
        if row is None or not row["job_exists"]:
            return ledger_pb2.REJECT_REASON_NOT_FOUND, None, "no such run"
        status = row["status"]
        if status in _FINISHED:
            return ledger_pb2.REJECT_REASON_FINISHED, None, f"run is {status.upper()}"
        if status == "cancelled":
            return ledger_pb2.REJECT_REASON_CANCELLED, None, "run is CANCELLED"
        if row["cancel_requested"]:
            # Cancelled while its lease expired (or before a retry): never run it again.
            return ledger_pb2.REJECT_REASON_CANCELLED, None, "run cancellation requested"
        if status == "pending":
            return ledger_pb2.REJECT_REASON_NOT_DUE, None, "run waits behind an earlier run"
        if status == "retrying" and row["next_attempt_at"] and row["next_attempt_at"] > now:
            wait = row["next_attempt_at"] - now
            return ledger_pb2.REJECT_REASON_NOT_DUE, wait, "retry not due yet"
        if status == "running" and row["lease_until"] and row["lease_until"] > now:
            return ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE, None, "run is leased"
        if status == "running":
            # The lease expired and the sweeper has not reclaimed it yet: the expired
            # attempt counts as failed, as the sweeper counts it. On the last attempt the
            # run is over (the sweeper records it DEAD and sends its dead letter).
            policies = policies_from_json(row["policies"] or {})
            if row["attempt"] - row["attempt_base"] >= policies.retry_max_attempts:
                return (
                    ledger_pb2.REJECT_REASON_FINISHED,
                    None,
                    "lease expired on the last attempt: the run is dead",
                )
        return None, None, ""

    # --- Heartbeat ------------------------------------------------------------------

    async def Heartbeat(
        self,
        request_iterator: AsyncIterator[ledger_pb2.HeartbeatRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[ledger_pb2.HeartbeatResponse]:
        interval = convert.duration(timedelta(seconds=self._config.heartbeat_interval_s))
        requests: asyncio.Queue[ledger_pb2.HeartbeatRequest | None] = asyncio.Queue()

        async def read() -> None:
            try:
                async for request in request_iterator:
                    await requests.put(request)
            finally:
                await requests.put(None)

        reader = asyncio.create_task(read())
        held: list[tuple[RunRef, int]] = []
        wire_of: dict[tuple[uuid.UUID, datetime, int], ledger_pb2.HeldRun] = {}
        told: set[tuple[uuid.UUID, datetime, int]] = set()
        try:
            while True:
                try:
                    async with asyncio.timeout(self._config.cancel_poll_s):
                        request = await requests.get()
                except TimeoutError:
                    # Between beats: runs asked to stop are told at once, not at the next
                    # beat up to 10 s later.
                    flagged = await self._store.cancel_requested(held) - told
                    if flagged:
                        told |= flagged
                        yield ledger_pb2.HeartbeatResponse(
                            cancel=[
                                ledger_pb2.CancelOrder(
                                    run=wire_of[key].run,
                                    attempt=key[2],
                                    reason="cancellation requested",
                                )
                                for key in sorted(flagged, key=str)
                            ]
                        )
                    continue
                if request is None:
                    return
                executor_id = _executor(request.executor_id)
                if len(request.runs) > MAX_HELD:
                    raise InvalidArgument("runs", f"at most {MAX_HELD} held runs")
                held = [
                    (convert.run_ref_from_pb(h.run, f"runs[{i}].run"), h.attempt)
                    for i, h in enumerate(request.runs)
                ]
                wire_of = {
                    (ref.job_id, ref.scheduled_at, attempt): wire
                    for (ref, attempt), wire in zip(held, request.runs, strict=True)
                }
                now = self._clock.now()
                lease_until = now + _lease_ttl(request, self._config.run_lease_s)
                extended = await self._store.extend_leases(held, executor_id, lease_until, now)
                response = ledger_pb2.HeartbeatResponse(heartbeat_interval=interval)
                for (ref, attempt), wire in zip(held, request.runs, strict=True):
                    key = (ref.job_id, ref.scheduled_at, attempt)
                    cancel = extended.get(key)
                    if cancel is None:
                        response.lost.append(wire)
                        continue
                    response.extended.append(
                        ledger_pb2.LeaseExtension(
                            run=wire.run,
                            attempt=attempt,
                            lease_until=convert.timestamp(lease_until),
                        )
                    )
                    if cancel:
                        told.add(key)
                        response.cancel.append(
                            ledger_pb2.CancelOrder(
                                run=wire.run, attempt=attempt, reason="cancellation requested"
                            )
                        )
                yield response
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    # --- CompleteRuns ---------------------------------------------------------------

    async def CompleteRuns(
        self, request: ledger_pb2.CompleteRunsRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.CompleteRunsResponse:
        _executor(request.executor_id)
        if not 1 <= len(request.outcomes) <= MAX_BATCH:
            raise InvalidArgument("outcomes", f"must hold 1-{MAX_BATCH} outcomes")
        refs: list[RunRef] = []
        for i, outcome in enumerate(request.outcomes):
            refs.append(convert.run_ref_from_pb(outcome.run, f"outcomes[{i}].run"))
            if outcome.status == ledger_pb2.OUTCOME_STATUS_UNSPECIFIED:
                raise InvalidArgument(f"outcomes[{i}].status", "is required")
            if outcome.attempt < 1:
                raise InvalidArgument(f"outcomes[{i}].attempt", "must be >= 1")
        now = self._clock.now()
        results: list[ledger_pb2.CompletionResult | None] = [None] * len(refs)
        dead: list[RunRef] = []

        def decide(rows: dict[Key, Record]) -> list[OutcomeWrite]:
            writes: list[OutcomeWrite] = []
            written: set[Key] = set()
            for index, (ref, outcome) in enumerate(zip(refs, request.outcomes, strict=True)):
                key = (ref.job_id, ref.scheduled_at)
                row = rows.get(key)
                result = ledger_pb2.CompletionResult(run=outcome.run)
                if row is None:
                    result.fence_reason = ledger_pb2.FENCE_REASON_NOT_FOUND
                elif row["attempt"] != outcome.attempt:
                    result.fence_reason = ledger_pb2.FENCE_REASON_STALE_ATTEMPT
                    result.next_status = convert.RUN_STATUS[row["status"]]
                elif row["status"] != "running" or key in written:
                    result.fence_reason = ledger_pb2.FENCE_REASON_NOT_RUNNING
                    result.next_status = convert.RUN_STATUS[row["status"]]
                else:
                    write = self._outcome_write(row, outcome, now)
                    writes.append(write)
                    written.add(key)
                    result.accepted = True
                    result.next_status = convert.RUN_STATUS[write.status]
                    if write.next_attempt_at is not None:
                        result.next_attempt_at.CopyFrom(convert.timestamp(write.next_attempt_at))
                    if write.status == "dead":
                        dead.append(ref)
                results[index] = result
            return writes

        await self._store.complete_runs(refs, now, decide)
        if dead:
            await self._send_dead_letters(dead, now)
        return ledger_pb2.CompleteRunsResponse(results=[r for r in results if r is not None])

    async def _send_dead_letters(self, dead: list[RunRef], now: datetime) -> None:
        """The fast path of the dead-letter outbox, after the outcomes committed.

        Never fails the call: the outcomes are recorded, and the dead rows keep
        ``check_at`` until their letters are acknowledged, so whatever this does not get
        done (NATS or the database unavailable) the sweeper does a little later.
        """
        try:
            rows = await self._store.dead_letters_of(dead)
            acked = await publish_due_dead_letters(self._js, rows, now)
            await self._store.clear_dead_letters(acked)
        except TRANSIENT_ERRORS as exc:
            log.warning(
                "dead letters left to the sweeper: %s", exc, extra={"action": "dead_letter"}
            )

    def _outcome_write(self, row: Record, outcome: Any, now: datetime) -> OutcomeWrite:
        error = outcome.error.encode()[:MAX_ERROR_BYTES].decode(errors="ignore") or None
        error_class = convert.ERROR_CLASS_NAMES.get(outcome.error_class)
        status = outcome.status

        http_status = outcome.http_status or None
        grpc_code = outcome.grpc_code if outcome.HasField("grpc_code") else None

        def final(new_status: str, err_class: str | None = error_class) -> OutcomeWrite:
            # A dead run's check_at is its dead-letter outbox entry: the sweeper publishes
            # the letter if the fast path after the commit does not get it acknowledged.
            outbox = now + timedelta(seconds=self._config.publish_confirm_s)
            return OutcomeWrite(
                row["job_id"],
                row["scheduled_at"],
                new_status,
                outbox if new_status == "dead" else None,
                None,
                now,
                error,
                err_class,
                http_status,
                grpc_code,
            )

        if status == ledger_pb2.OUTCOME_STATUS_SUCCEEDED:
            return final("succeeded", None)
        if status == ledger_pb2.OUTCOME_STATUS_CANCELLED or row["cancel_requested"]:
            # Asked to stop (CancelRun, CANCEL_OTHER, DeleteJob): any outcome but success
            # ends the run, a retryable failure included.
            return final("cancelled", "cancelled")
        if status == ledger_pb2.OUTCOME_STATUS_TIMED_OUT:
            error_class = "timeout"
        if status in _RETRYABLE:
            policies = policies_from_json(row["policies"] or {})
            failures = outcome.attempt - row["attempt_base"]
            if failures < policies.retry_max_attempts:
                delay = backoff(policies, failures, self._rng)
                if outcome.HasField("retry_after"):
                    delay = max(delay, min(outcome.retry_after.ToTimedelta(), MAX_RETRY_AFTER))
                at = now + delay
                return OutcomeWrite(
                    row["job_id"],
                    row["scheduled_at"],
                    "retrying",
                    at,
                    at,
                    None,
                    error,
                    error_class or "retryable",
                    http_status,
                    grpc_code,
                )
        return final("dead", error_class or "final")
