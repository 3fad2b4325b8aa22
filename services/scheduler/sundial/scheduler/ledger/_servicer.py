"""The RunLedgerService servicer (see the package doc and docs/design.md section 7).

Every state change of a run an executor causes goes through here, in one transaction
per call, with the run rows locked:

- LeaseRuns grants what :func:`sundial.run.decide_leases` grants: QUEUED, RETRYING and
  due, or RUNNING with an expired lease the sweeper has not reclaimed yet; each grant
  increments ``attempt``, the fencing token. A run the calling executor already holds
  under a live lease is granted again at the same attempt with its lease extended
  (idempotent re-grant). The tenant's ``max_concurrent_runs`` is enforced under a
  per-tenant advisory lock, so concurrent calls (on any replica) cannot overshoot it.
- Heartbeat extends leases only where the attempt and the holder still match.
- CompleteRuns writes :func:`sundial.run.complete` where :func:`sundial.run.fence`
  lets the outcome through; a run that died gets its DeadLetter published after the
  commit (the dead row keeps ``check_at`` until JetStream acknowledged it: the sweeper
  publishes it otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from http import HTTPStatus

import grpc
from google.protobuf import duration_pb2, timestamp_pb2
from nats.js import JetStreamContext
from opentelemetry import metrics

from sundial.core import wire
from sundial.core.clock import Clock, SystemClock
from sundial.core.errors import InvalidArgument
from sundial.core.telemetry import OCCURRENCES_STARTED, RUNS_COMPLETED, RUNS_FENCED
from sundial.internal.v1 import ledger_pb2, ledger_pb2_grpc
from sundial.notify import late_run
from sundial.run import (
    Completion,
    ErrorClass,
    Fenced,
    Grant,
    Outcome,
    OutcomeStatus,
    Rejection,
    RunKind,
    RunRef,
    RunState,
    RunStatus,
    Transition,
    decide_completions,
    decide_leases,
)
from sundial.schedule import jitter_offset
from sundial.scheduler.config import SchedulerConfig
from sundial.scheduler.ledger._auth import current_token_id
from sundial.scheduler.ledger._budget import wire_sizes, within_budget
from sundial.scheduler.ledger._dead_letters import send_dead_letters
from sundial.scheduler.ledger._identity import IdentityMinter
from sundial.scheduler.ledger._secrets import SecretResolver
from sundial.scheduler.ledger._signing import call_headers, run_signature
from sundial.scheduler.model import LeaseCandidate, WrittenLease
from sundial.scheduler.store import HeldLease, SchedulerStore
from sundial.v1 import job_pb2, run_pb2

log = logging.getLogger(__name__)

MAX_BATCH = 500
MAX_HELD = 10_000
MIN_LEASE = timedelta(seconds=10)
MAX_LEASE = timedelta(minutes=5)
MAX_KEY_BLOCK = timedelta(hours=1)
"""Longest a target's Retry-After blocks its rate-limit key (a longer one is cut)."""


def executor_id_in(executor_id: str) -> str:
    """A request's executor_id, checked."""
    if not 1 <= len(executor_id) <= 128:
        raise InvalidArgument("executor_id", "must be 1-128 characters")
    return executor_id


def lease_id_in(lease_id: str, field: str) -> str:
    """A held run's or outcome's lease_id: a lease id the ledger issued looks like a UUID;
    anything else cannot be one (empty only for a lease granted before lease ids)."""
    if len(lease_id) > 36:
        raise InvalidArgument(f"{field}.lease_id", "must be the lease_id of the grant")
    return lease_id


def lease_ttl_in(
    request: ledger_pb2.LeaseRunsRequest | ledger_pb2.HeartbeatRequest, default_s: int
) -> timedelta:
    """A request's lease_ttl (10 s to 5 min), or the default when unset."""
    if not request.HasField("lease_ttl"):
        return timedelta(seconds=default_s)
    ttl = wire.timedelta_in(request.lease_ttl, "lease_ttl")
    if not MIN_LEASE <= ttl <= MAX_LEASE:
        raise InvalidArgument("lease_ttl", "must be between 10s and 5m")
    return ttl


def completion_in(message: ledger_pb2.Outcome, field: str) -> Completion:
    """A wire outcome as the state machine takes it."""
    ref = wire.run_ref_in(message.run, f"{field}.run")
    status = wire.enum_in(OutcomeStatus, message.status, f"{field}.status")
    if status is None:
        raise InvalidArgument(f"{field}.status", "is required")
    if message.attempt < 1:
        raise InvalidArgument(f"{field}.attempt", "must be >= 1")
    try:
        error_class = wire.enum_in(ErrorClass, message.error_class, f"{field}.error_class")
    except InvalidArgument:
        error_class = None  # a class this ledger does not know: classified by the status
    outcome = Outcome(
        status=status,
        error=message.error,
        error_class=error_class,
        retry_after=(
            wire.timedelta_in(message.retry_after, f"{field}.retry_after")
            if message.HasField("retry_after")
            else None
        ),
        http_status=message.http_status or None,
        grpc_code=message.grpc_code if message.HasField("grpc_code") else None,
    )
    return Completion(ref, message.attempt, outcome, lease_id=lease_id_in(message.lease_id, field))


def completion_result(
    run: run_pb2.RunRef, answer: Transition | Fenced
) -> ledger_pb2.CompletionResult:
    """One CompleteRuns answer on the wire."""
    result = ledger_pb2.CompletionResult(run=run)
    if isinstance(answer, Fenced):
        result.fence_reason = wire.enum_out(answer.reason)
        if answer.status is not None:
            result.next_status = wire.enum_out(answer.status)
        return result
    result.accepted = True
    result.next_status = wire.enum_out(answer.status)
    if answer.next_attempt_at is not None:
        result.next_attempt_at.CopyFrom(wire.timestamp(answer.next_attempt_at))
    return result


def rejection_out(answer: Rejection) -> ledger_pb2.Rejection:
    """A refused lease on the wire."""
    rejection = ledger_pb2.Rejection(reason=wire.enum_out(answer.reason), detail=answer.detail)
    if answer.retry_after is not None:
        rejection.retry_after.CopyFrom(wire.duration(answer.retry_after))
    return rejection


@dataclass(frozen=True, slots=True)
class _Start:
    """A scheduled run a LeaseRuns call started (its first grant set started_at)."""

    ref: RunRef
    tenant_id: str
    due: datetime
    threshold: timedelta
    late: bool
    throttled: bool = False
    """Late after waiting for its rate-limit key: not late by Sundial's fault."""


def _starts(
    grants: Sequence[Grant],
    candidates: Mapping[RunRef, LeaseCandidate],
    leases: Mapping[RunRef, WrittenLease],
    now: datetime,
) -> list[_Start]:
    """The scheduled runs these grants started, each on time or late against its job's
    lateness threshold (late: started more than the threshold after its due time, the
    nominal time plus its jitter), as the SLO judges them (docs/design.md section 11)."""
    starts = []
    # Late when due < now - threshold; a herd shares a few thresholds.
    cutoffs: dict[timedelta, datetime] = {}
    for grant in grants:
        ref = grant.ref
        lease = leases.get(ref)
        candidate = candidates[ref]
        # A re-grant keeps its attempt: the run started at its first grant.
        if (
            grant.regrant
            or lease is None
            or lease.attempt != 1
            or candidate.kind is not RunKind.SCHEDULED
        ):
            continue
        due = ref.scheduled_at
        if candidate.jitter:
            due += jitter_offset(str(ref.job_id), ref.scheduled_at, candidate.jitter)
        threshold = candidate.lateness_threshold
        cutoff = cutoffs.get(threshold)
        if cutoff is None:
            cutoff = cutoffs[threshold] = now - threshold
        late = due < cutoff
        starts.append(
            _Start(
                ref,
                candidate.state.tenant_id,
                due,
                threshold,
                late and not candidate.throttled,
                late and candidate.throttled,
            )
        )
    return starts


class RunLedgerServiceServicer(ledger_pb2_grpc.RunLedgerServiceServicer):
    """The RunLedgerService gRPC service.

    Args:
        store: The scheduler store.
        jetstream: Where dead letters go.
        config: ``run_lease_s``, ``heartbeat_interval_s``, ``capacity_retry_s``,
            ``cancel_poll_s``, ``publish_confirm_s``.
        clock: The source of "now".
        rng: Randomness of the backoff (tests pass a seeded one).
        meter: Where ``sundial.runs.completed`` and ``sundial.runs.fenced`` go (default:
            global).
        leased: Told how many runs each call leased, once they are (the sweeper's
            :meth:`~sundial.scheduler.sweeper.Sweeper.runs_leased`: leases free room in
            their tenants' windows).
    """

    def __init__(
        self,
        store: SchedulerStore,
        jetstream: JetStreamContext | None,
        config: SchedulerConfig,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        *,
        meter: metrics.Meter | None = None,
        leased: Callable[[int], None] | None = None,
    ) -> None:
        self._store = store
        self._leased = leased
        keyring = config.keyring()
        self._secrets = SecretResolver(store, keyring)
        self._identity = IdentityMinter(store, keyring, config.identity_issuer)
        self._js = jetstream
        self._config = config
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        meter = meter or metrics.get_meter("sundial.scheduler")
        self._completed = meter.create_counter(
            RUNS_COMPLETED,
            unit="{run}",
            description="Attempts' outcomes the ledger accepted, by the run's next status",
        )
        self._fenced = meter.create_counter(
            RUNS_FENCED, unit="{run}", description="Outcomes the ledger refused, by reason"
        )
        self._started = meter.create_counter(
            OCCURRENCES_STARTED,
            unit="{occurrence}",
            description="Scheduled runs' first attempts granted, on time or late (job SLO)",
        )

    # --- LeaseRuns ------------------------------------------------------------------

    async def LeaseRuns(
        self, request: ledger_pb2.LeaseRunsRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.LeaseRunsResponse:
        executor_id = executor_id_in(request.executor_id)
        if not 1 <= len(request.runs) <= MAX_BATCH:
            raise InvalidArgument("runs", f"must hold 1-{MAX_BATCH} runs")
        refs = [wire.run_ref_in(r, f"runs[{i}]") for i, r in enumerate(request.runs)]
        ttl = lease_ttl_in(request, self._config.run_lease_s)
        now = self._clock.now()
        lease_until = now + ttl
        async with self._store.transaction(durable=True) as tx:
            lock = await tx.lock_for_lease(refs)
            token_id = current_token_id()
            answers = decide_leases(
                refs,
                {ref: c.state for ref, c in lock.candidates.items()},
                executor_id=executor_id,
                token_id=token_id,
                now=now,
                running=lock.running,
                capacity_retry=timedelta(seconds=self._config.capacity_retry_s),
                key_running=lock.key_running,
            )
            # Cut before anything is written: a run left out takes no attempt.
            answers = within_budget(
                answers, lock.candidates, wire_sizes(), self._config.lease_answer_max_bytes
            )
            grants = [a for a in answers if isinstance(a, Grant)]
            leases = await tx.write_grants(
                grants,
                lock,
                executor_id=executor_id,
                token_id=token_id,
                lease_until=lease_until,
                now=now,
            )
            starts = _starts(grants, lock.candidates, leases, now)
            late = [s for s in starts if s.late]
            if late:  # only a call that started a late run writes events (section 12)
                await tx.record_events(
                    [late_run(s.ref.job_id, s.ref.key, now - s.due, s.threshold) for s in late],
                    now,
                )
        granted = [(lock.candidates[g.ref], leases[g.ref]) for g in grants if g.ref in leases]
        if granted and self._leased is not None:
            self._leased(len(granted))
        # Secret references become values in the grants only (docs/design.md section 7).
        resolved = await self._secrets.targets([candidate for candidate, _ in granted])
        # Identity tokens too: minted here, never by an executor (section 7).
        tokens = await self._identity.tokens(
            [(candidate, lease.attempt) for candidate, lease in granted], now
        )
        results = []
        logged = log.isEnabledFor(logging.INFO)  # one line per grant: only when read
        lease_until_wire = wire.timestamp(lease_until)
        targets: dict[int, job_pb2.Target] = {}  # a herd's runs share their target object
        timeouts: dict[timedelta, duration_pb2.Duration] = {}  # and a few run timeouts
        for ref, wire_ref, answer in zip(refs, request.runs, answers, strict=True):
            if isinstance(answer, Grant) and ref in leases:
                candidate = lock.candidates[ref]
                target = resolved.get((candidate.state.tenant_id, id(candidate.target)))
                if target is None:
                    target = targets.get(id(candidate.target))
                if target is None:
                    target = targets[id(candidate.target)] = wire.target(candidate.target)
                timeout = timeouts.get(candidate.run_timeout)
                if timeout is None:
                    timeout = timeouts[candidate.run_timeout] = wire.duration(candidate.run_timeout)
                grant = self._grant(
                    candidate,
                    leases[ref],
                    now,
                    lease_until=lease_until_wire,
                    target=target,
                    run_timeout=timeout,
                    token=tokens.get(ref),
                )
                results.append(ledger_pb2.LeaseResult(run=wire_ref, grant=grant))
                if logged:
                    log.info(
                        "run leased",
                        extra={
                            "action": "lease",
                            "job_id": str(ref.job_id),
                            "run_key": ref.key,
                            "attempt": leases[ref].attempt,
                            "executor_id": executor_id,
                        },
                    )
                continue
            rejection = ledger_pb2.Rejection(
                reason=ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE, detail="duplicate"
            )
            if not isinstance(answer, Grant):
                rejection = rejection_out(answer)
            results.append(ledger_pb2.LeaseResult(run=wire_ref, rejection=rejection))
        self._count_starts(starts)
        return ledger_pb2.LeaseRunsResponse(results=results)

    def _count_starts(self, starts: Sequence[_Start]) -> None:
        """Count the scheduled runs a call started as on time or late, as the job's SLO
        does (docs/design.md section 11); one ``add`` per attribute set."""
        by_tenant = self._config.metrics_tenant_attribute
        started: Counter[tuple[str, str | None]] = Counter()
        for start in starts:
            outcome = "late" if start.late else "throttled" if start.throttled else "on_time"
            started[(outcome, start.tenant_id if by_tenant else None)] += 1
        for (outcome, tenant), count in started.items():
            self._started.add(count, _with_tenant({"outcome": outcome}, tenant))

    @staticmethod
    def _grant(
        candidate: LeaseCandidate,
        lease: WrittenLease,
        now: datetime,
        *,
        lease_until: timestamp_pb2.Timestamp,
        target: job_pb2.Target,
        run_timeout: duration_pb2.Duration,
        token: str | None = None,
    ) -> ledger_pb2.Grant:
        """What an executor needs to call the target of one granted attempt (the lease's
        end, the target and the run timeout already in wire form: shared by the grants
        of a call)."""
        key = candidate.state.ref.key
        attempt = lease.attempt
        grant = ledger_pb2.Grant(
            attempt=attempt,
            lease_until=lease_until,
            target=target,
            payload=candidate.payload,
            run_timeout=run_timeout,
            tenant_id=candidate.state.tenant_id,
            run_key=key,
            signature=run_signature(candidate, attempt, now),
            kind=wire.enum_out(candidate.kind),
            job_name=candidate.job_name,
            lease_id=lease.lease_id,
            traceparent=candidate.traceparent,
        )
        if candidate.egress is not None:
            grant.egress.CopyFrom(wire.egress_policy(candidate.egress))
        if candidate.target is not None and candidate.target.auth:
            grant.headers.update(call_headers(candidate, now, token))
        return grant

    # --- Heartbeat ------------------------------------------------------------------

    async def Heartbeat(
        self,
        request_iterator: AsyncIterator[ledger_pb2.HeartbeatRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[ledger_pb2.HeartbeatResponse]:
        interval = wire.duration(timedelta(seconds=self._config.heartbeat_interval_s))
        requests: asyncio.Queue[ledger_pb2.HeartbeatRequest | None] = asyncio.Queue()

        async def read() -> None:
            try:
                async for request in request_iterator:
                    await requests.put(request)
            finally:
                await requests.put(None)

        reader = asyncio.create_task(read())
        held: list[HeldLease] = []
        wire_of: dict[HeldLease, ledger_pb2.HeldRun] = {}
        told: set[HeldLease] = set()
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
                                    attempt=key[1],
                                    reason="cancellation requested",
                                )
                                for key in sorted(flagged, key=str)
                            ]
                        )
                    continue
                if request is None:
                    return
                executor_id = executor_id_in(request.executor_id)
                if len(request.runs) > MAX_HELD:
                    raise InvalidArgument("runs", f"at most {MAX_HELD} held runs")
                held = [
                    (
                        wire.run_ref_in(h.run, f"runs[{i}].run"),
                        h.attempt,
                        lease_id_in(h.lease_id, f"runs[{i}]"),
                    )
                    for i, h in enumerate(request.runs)
                ]
                wire_of = dict(zip(held, request.runs, strict=True))
                now = self._clock.now()
                lease_until = now + lease_ttl_in(request, self._config.run_lease_s)
                extended = await self._store.extend_leases(held, executor_id, lease_until, now)
                response = ledger_pb2.HeartbeatResponse(heartbeat_interval=interval)
                for key, message in zip(held, request.runs, strict=True):
                    cancel = extended.get(key)
                    if cancel is None:
                        response.lost.append(message)
                        continue
                    response.extended.append(
                        ledger_pb2.LeaseExtension(
                            run=message.run,
                            attempt=key[1],
                            lease_until=wire.timestamp(lease_until),
                        )
                    )
                    if cancel:
                        told.add(key)
                        response.cancel.append(
                            ledger_pb2.CancelOrder(
                                run=message.run, attempt=key[1], reason="cancellation requested"
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
        executor_id = executor_id_in(request.executor_id)
        if not 1 <= len(request.outcomes) <= MAX_BATCH:
            raise InvalidArgument("outcomes", f"must hold 1-{MAX_BATCH} outcomes")
        completions = [completion_in(o, f"outcomes[{i}]") for i, o in enumerate(request.outcomes)]
        now = self._clock.now()
        dead_letter_at = now + timedelta(seconds=self._config.publish_confirm_s)
        async with self._store.transaction(durable=True) as tx:
            # Successes are written fenced in one statement (their new state depends on
            # nothing else of the run); the rest, and a success fenced there, are read
            # under lock and decided.
            quick = _first_successes(completions)
            fast = await tx.record_successes([completions[i] for i in quick], executor_id, now)
            fast_at = {i for i in quick if completions[i].ref in fast}
            rest = [c for i, c in enumerate(completions) if i not in fast_at]
            states = await tx.lock_for_completion([c.ref for c in rest]) if rest else {}
            decided = decide_completions(
                rest,
                states,
                now,
                executor_id=executor_id,
                rng=self._rng,
                dead_letter_at=dead_letter_at,
            )
            await tx.write_outcomes(
                [a for a in decided if isinstance(a, Transition)],
                now,
                recorded=[transition for transition, _ in fast.values()],
            )
            answers, tenants = _in_order(completions, fast_at, fast, decided, states)
            await tx.block_keys(throttled(completions, answers, now))
        self._count(answers, tenants)
        results = [
            completion_result(message.run, answer)
            for message, answer in zip(request.outcomes, answers, strict=True)
        ]
        dead = [a.ref for a in answers if isinstance(a, Transition) and a.status is RunStatus.DEAD]
        await send_dead_letters(self._store, self._js, dead, now)
        return ledger_pb2.CompleteRunsResponse(results=results)

    def _count(self, answers: list[Transition | Fenced], tenants: list[str | None]) -> None:
        """Count the committed outcomes, one ``add`` per distinct attribute set of the
        batch rather than per outcome (no job attribute, and a tenant attribute only where
        the operator asked for one: few series)."""
        by_tenant = self._config.metrics_tenant_attribute
        fenced: Counter[tuple[str, str | None]] = Counter()
        completed: Counter[tuple[str, str | None, str | None]] = Counter()
        for answer, run_tenant in zip(answers, tenants, strict=True):
            tenant = run_tenant if by_tenant else None
            if isinstance(answer, Fenced):
                fenced[(answer.reason.value, tenant)] += 1
            else:
                error_class = answer.error_class.value if answer.error_class else None
                completed[(answer.status.value, error_class, tenant)] += 1
        for (reason, tenant), count in fenced.items():
            self._fenced.add(count, _with_tenant({"reason": reason}, tenant))
        for (outcome, error_class, tenant), count in completed.items():
            attributes = {"outcome": outcome}
            if error_class is not None:
                attributes["error_class"] = error_class
            self._completed.add(count, _with_tenant(attributes, tenant))


def _first_successes(completions: Sequence[Completion]) -> list[int]:
    """The indexes of the completions CompleteRuns' fast path may write: each run's
    first, when it reports success (a run named twice is decided once)."""
    seen: set[RunRef] = set()
    quick: list[int] = []
    for i, completion in enumerate(completions):
        if completion.ref not in seen:
            seen.add(completion.ref)
            if completion.outcome.status is OutcomeStatus.SUCCEEDED:
                quick.append(i)
    return quick


def _in_order(
    completions: Sequence[Completion],
    fast_at: set[int],
    fast: Mapping[RunRef, tuple[Transition, str]],
    decided: Sequence[Transition | Fenced],
    states: Mapping[RunRef, RunState],
) -> tuple[list[Transition | Fenced], list[str | None]]:
    """Each completion's answer and its run's tenant, in the request's order: the fast
    path's (``fast_at``: the indexes it wrote) and the others' (``decided``, in order)."""
    rest = iter(decided)
    answers: list[Transition | Fenced] = []
    tenants: list[str | None] = []
    for i, completion in enumerate(completions):
        if i in fast_at:
            written, tenant = fast[completion.ref]
            answers.append(written)
            tenants.append(tenant)
        else:
            answers.append(next(rest))
            state = states.get(completion.ref)
            tenants.append(state.tenant_id if state is not None else None)
    return answers, tenants


def throttled(
    completions: Sequence[Completion], answers: Sequence[Transition | Fenced], now: datetime
) -> dict[uuid.UUID, datetime]:
    """The jobs whose accepted outcome was a 429 with Retry-After, each with the instant
    its rate-limit key is blocked until (flow control: a 429 slows the whole key, not
    only its run)."""
    blocked: dict[uuid.UUID, datetime] = {}
    for completion, answer in zip(completions, answers, strict=True):
        outcome = completion.outcome
        if (
            isinstance(answer, Transition)
            and outcome.http_status == HTTPStatus.TOO_MANY_REQUESTS
            and outcome.retry_after
        ):
            until = now + min(outcome.retry_after, MAX_KEY_BLOCK)
            job_id = completion.ref.job_id
            blocked[job_id] = max(until, blocked.get(job_id, until))
    return blocked


def _with_tenant(attributes: dict[str, str], tenant: str | None) -> dict[str, str]:
    return attributes if tenant is None else {"tenant": tenant, **attributes}
