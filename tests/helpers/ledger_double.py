"""A TEST DOUBLE of RunLedger: the real run state machine over runs held in memory,
served by the services' own gRPC server builder on 127.0.0.1.

What it shares with the real ledger (``sundial.scheduler.ledger``):

- Every decision. Run state is one :class:`sundial.run.RunState` per
  :class:`sundial.run.RunRef`; LeaseRuns answers what :func:`sundial.run.decide_leases`
  answers over the in-memory RUNNING counts and :attr:`LedgerDouble.tenant_cap`
  (including the idempotent re-grant and NOT_DUE); CompleteRuns writes what
  :func:`sundial.run.fence` lets through and :func:`sundial.run.complete` decides (backoff
  from a seeded rng, DEAD on the last attempt, a cancel winning over a retry);
  :meth:`LedgerDouble.expire` applies :func:`sundial.run.lease_expiry` as the sweeper does.
- The request parsing of the real servicer (UUID job ids through
  :func:`sundial.core.wire.run_ref_in`, executor ids, batch sizes, a lease_ttl of
  10 s-5 min, outcomes) and :mod:`sundial.core.wire` for every conversion.
- The server: :func:`sundial.core.grpc.build_server`, so errors map to the same codes,
  behind the real :class:`~sundial.scheduler.ledger.LedgerAuthInterceptor`: every call
  needs an executor token, here one of :attr:`LedgerDouble.tokens` (in memory, where the
  real ledger looks them up in ``api_tokens``); :attr:`LedgerDouble.token` is valid.

What it does not do: keep anything durable, dispatch, republish, sweep on its own,
publish dead letters, count job stats, or sign with tenant secrets (the signature is
``t=<now>,v1=double-signature``). A cancellation (:meth:`LedgerDouble.cancel`) is pushed
on every open heartbeat stream at once, where the real ledger polls for it.

Runs: with ``implicit_runs`` (the default) every occurrence of a job added with
:meth:`LedgerDouble.add_job` is a QUEUED run from the first LeaseRuns that names it, as
if a dispatcher had written its row before publishing it (executor tests publish their
own dispatches). With ``implicit_runs=False`` only runs added with
:meth:`LedgerDouble.add_run` exist, as in the real ledger; any other is NOT_FOUND.

``tests/integration/scheduler/test_ledger_contract.py`` runs the same contract tests on
this double (``implicit_runs=False``) and on the real ledger.

Usage::

    async with LedgerDouble() as ledger:
        ledger.add_job(job_id, http_target(url), tenant="t1")  # job_id: a UUID
        ... ExecutorConfig(ledger_address=ledger.address, ledger_token=ledger.token, ...) ...
        await assert_eventually(lambda: ledger.status(run) == "SUCCEEDED")
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import grpc

from sundial.core import wire
from sundial.core.auth import Credential, Role
from sundial.core.clock import Clock, SystemClock
from sundial.core.config import ServerConfig
from sundial.core.errors import InvalidArgument, SundialError, Unauthenticated
from sundial.core.grpc import Server, build_server
from sundial.internal.v1 import ledger_pb2, ledger_pb2_grpc
from sundial.run import (
    Grant,
    Rejection,
    RejectReason,
    RetryPolicy,
    RunKind,
    RunRef,
    RunState,
    RunStatus,
    Target,
    Transition,
    decide_completions,
    decide_leases,
    holds,
    lease_expiry,
)

# The real servicer's request parsing, so both refuse the same requests the same way.
from sundial.scheduler.ledger import (
    MAX_BATCH,
    MAX_HELD,
    LedgerAuthInterceptor,
    completion_in,
    completion_result,
    current_token_id,
    executor_id_in,
    lease_id_in,
    lease_ttl_in,
    rejection_out,
)
from sundial.v1 import job_pb2, run_pb2

DEFAULT_LEASE_S = 30
"""Lease of a request without lease_ttl (the scheduler's default ``run_lease_s``)."""


def http_target(url: str, method: str = "POST") -> job_pb2.Target:
    """A Target message for an HTTP URL."""
    return job_pb2.Target(http=job_pb2.HttpTarget(url=url, method=method))


def grpc_target(address: str) -> job_pb2.Target:
    """A plaintext gRPC Target message."""
    return job_pb2.Target(grpc=job_pb2.GrpcTarget(address=address, plaintext=True))


def ref(job_id: str | uuid.UUID, at: datetime) -> run_pb2.RunRef:
    """A RunRef message (``job_id`` must be a UUID for the ledger to accept it)."""
    return run_pb2.RunRef(job_id=str(job_id), scheduled_at=wire.timestamp(at))


def _ref_in(r: run_pb2.RunRef) -> RunRef:
    return wire.run_ref_in(r, "run")


@dataclass(frozen=True)
class JobSpec:
    """A job as the double knows it: what a grant carries, and its retry policy."""

    target: Target
    tenant: str
    payload: bytes = b""
    run_timeout_s: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass
class _Stream:
    executor_id: str = ""
    outbox: asyncio.Queue[ledger_pb2.HeartbeatResponse] = field(default_factory=asyncio.Queue)


def _holds(state: RunState | None, attempt: int, executor_id: str, lease_id: str) -> bool:
    """Whether a heartbeat of ``executor_id`` for ``attempt`` under ``lease_id`` may
    extend the lease (the real ledger's ``extend_leases``: RUNNING, held by the caller)."""
    return (
        state is not None
        and state.status is RunStatus.RUNNING
        and holds(state, attempt, executor_id=executor_id, lease_id=lease_id)
    )


class _TokenTable:
    """The double's ``api_tokens``: token -> role, consulted on every call."""

    def __init__(self, tokens: dict[str, Role]) -> None:
        self.tokens = tokens

    async def authenticate(self, token: str) -> Credential:
        role = self.tokens.get(token)
        if role is None:
            raise Unauthenticated("invalid, revoked or expired token")
        # A stable id per token, as api_tokens.token_id is.
        return Credential(role=role, tenant_id=None, token_id=uuid.uuid5(uuid.NAMESPACE_OID, token))


EXECUTOR_TOKEN = "double-executor-token"
"""The executor token every :class:`LedgerDouble` accepts (until removed from
:attr:`LedgerDouble.tokens`)."""


class LedgerDouble(ledger_pb2_grpc.RunLedgerServiceServicer):
    """In-memory RunLedger (see the module docstring). A double: label results as such.

    Args:
        port: Port to listen on (0: a free one, kept across :meth:`stop`/:meth:`start`).
        heartbeat_interval_s: The interval Heartbeat answers announce.
        implicit_runs: Occurrences of added jobs exist without :meth:`add_run`.
        clock: The source of "now" (the system clock by default).
        rng: Randomness of the retry backoff (seeded by default).
    """

    def __init__(
        self,
        *,
        port: int = 0,
        heartbeat_interval_s: float = 0.2,
        implicit_runs: bool = True,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.token = EXECUTOR_TOKEN
        """A valid executor token (pass it as ``ledger_token``)."""
        self.tokens: dict[str, Role] = {EXECUTOR_TOKEN: Role.EXECUTOR}
        """Valid tokens and their roles; remove one to revoke it."""
        self.jobs: dict[uuid.UUID, JobSpec] = {}
        self.states: dict[RunRef, RunState] = {}
        """Every run the double knows, as the state machine sees it."""
        self.tenant_cap: dict[str, int] = {}
        """Tenant -> max_concurrent_runs (absent: no cap)."""
        self.capacity_retry_s = 0.5
        """retry_after of a TENANT_AT_CAPACITY rejection."""
        self.heartbeat_interval_s = heartbeat_interval_s
        self.implicit_runs = implicit_runs
        self.lease_requests: list[ledger_pb2.LeaseRunsRequest] = []
        self.complete_requests: list[ledger_pb2.CompleteRunsRequest] = []
        self.outcomes: list[ledger_pb2.Outcome] = []
        """Every outcome accepted (not fenced), in order."""
        self.heartbeats: list[ledger_pb2.HeartbeatRequest] = []
        self.fail_lease_calls = 0
        """The next N LeaseRuns calls fail with UNAVAILABLE."""
        self.grants_per_answer: int | None = None
        """At most this many grants per LeaseRuns answer; the rest are answered
        ANSWER_FULL with nothing written (the real ledger's byte budget, counted in
        runs)."""
        self.lose_lease_answers = 0
        """The next N LeaseRuns calls commit their grants, then fail with UNAVAILABLE (the
        answer lost after the ledger committed, as a deadline or a broken connection)."""
        self.fail_complete_codes: list[grpc.StatusCode] = []
        """The next CompleteRuns calls fail with these codes, one call each, in order."""
        self.invalid_outcomes: set[str] = set()
        """Run keys whose outcome makes a CompleteRuns call fail INVALID_ARGUMENT (as the
        real ledger refuses a whole request for one malformed outcome)."""
        self.internal_outcomes: set[str] = set()
        """Run keys whose outcome makes every CompleteRuns call holding it fail INTERNAL
        (an outcome the ledger chokes on, deterministically)."""
        self.mute_heartbeats = False
        """Read beats but answer none (a half-open connection: nothing fails, nothing
        arrives)."""
        self.heartbeat_streams = 0
        """Heartbeat streams opened so far."""
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random(7)
        self._streams: list[_Stream] = []
        self._port = port
        self._server: Server | None = None
        self.address = ""

    # --- set-up --------------------------------------------------------------------------

    async def start(self) -> LedgerDouble:
        self._server = build_server(
            ServerConfig(listen=f"127.0.0.1:{self._port}", grace_period_s=0),
            services=[(ledger_pb2_grpc.add_RunLedgerServiceServicer_to_server, self)],
            service_names=["sundial.internal.v1.RunLedgerService"],
            interceptors=[LedgerAuthInterceptor(_TokenTable(self.tokens))],
        )
        self._port = self._server.port
        self.address = self._server.address
        await self._server.start()
        await self._server.set_serving()
        return self

    async def stop(self, grace_s: float | None = 0) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
        self._streams.clear()

    async def __aenter__(self) -> LedgerDouble:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def add_job(
        self,
        job_id: str | uuid.UUID,
        target: job_pb2.Target,
        *,
        tenant: str = "tenant-1",
        payload: bytes = b"",
        run_timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        """Know a job (``job_id`` a UUID, as the real ledger requires)."""
        shape = wire.target_in(target)
        if shape is None:
            raise ValueError("target: no kind set")
        self.jobs[wire.job_id_in(str(job_id))] = JobSpec(
            shape, tenant, payload, run_timeout_s, retry or RetryPolicy()
        )

    def add_run(self, r: run_pb2.RunRef) -> None:
        """A QUEUED run of an added job, as a dispatch leaves it."""
        run = _ref_in(r)
        self.states[run] = self._queued(run, self.jobs[run.job_id])

    @staticmethod
    def _queued(run: RunRef, job: JobSpec) -> RunState:
        return RunState(ref=run, status=RunStatus.QUEUED, retry=job.retry, tenant_id=job.tenant)

    # --- inspection ----------------------------------------------------------------------

    @property
    def runs(self) -> dict[str, RunState]:
        """The known runs by run key (``<job_id>@<scheduled_at>``)."""
        return {run.key: state for run, state in self.states.items()}

    def status(self, r: run_pb2.RunRef) -> str:
        """The run's status name ("QUEUED", "RUNNING", "SUCCEEDED"...), or "UNKNOWN"."""
        state = self.states.get(_ref_in(r))
        return state.status.name if state else "UNKNOWN"

    def outcomes_for(self, r: run_pb2.RunRef) -> list[ledger_pb2.Outcome]:
        run = _ref_in(r)
        return [o for o in self.outcomes if _ref_in(o.run) == run]

    def running(self, tenant: str) -> int:
        return self._running().get(tenant, 0)

    def _running(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for state in self.states.values():
            if state.status is RunStatus.RUNNING:
                counts[state.tenant_id] += 1
        return dict(counts)

    def cancel(self, r: run_pb2.RunRef, reason: str = "CancelRun") -> None:
        """Ask the holder of ``r`` to stop: an unsolicited cancel order on every stream."""
        run = _ref_in(r)
        state = self.states[run] = replace(self.states[run], cancel_requested=True)
        order = ledger_pb2.CancelOrder(run=r, attempt=state.attempt, reason=reason)
        for stream in self._streams:
            stream.outbox.put_nowait(ledger_pb2.HeartbeatResponse(cancel=[order]))

    def expire(self, r: run_pb2.RunRef) -> None:
        """Let the RUNNING run ``r``'s lease lapse now and apply what the sweeper would
        (:func:`sundial.run.lease_expiry`: QUEUED to be leased again, DEAD on the last
        attempt, CANCELLED when asked to stop)."""
        state = self.states[_ref_in(r)]
        if state.status is not RunStatus.RUNNING:
            raise ValueError(f"run is {state.status.name}, not RUNNING")
        self._write(lease_expiry(state, self._clock.now()))

    def _write(self, transition: Transition) -> None:
        """Write a transition as the real store does (the lease ends with it)."""
        self.states[transition.ref] = replace(
            self.states[transition.ref],
            status=transition.status,
            lease_until=None,
            next_attempt_at=transition.next_attempt_at,
        )

    # --- LeaseRuns -----------------------------------------------------------------------

    async def LeaseRuns(
        self, request: ledger_pb2.LeaseRunsRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.LeaseRunsResponse:
        self.lease_requests.append(request)
        if self.fail_lease_calls > 0:
            self.fail_lease_calls -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "double: ledger unavailable")
        executor_id = executor_id_in(request.executor_id)
        if not 1 <= len(request.runs) <= MAX_BATCH:
            raise InvalidArgument("runs", f"must hold 1-{MAX_BATCH} runs")
        refs = [wire.run_ref_in(r, f"runs[{i}]") for i, r in enumerate(request.runs)]
        now = self._clock.now()
        lease_until = now + lease_ttl_in(request, DEFAULT_LEASE_S)
        states: dict[RunRef, RunState] = {}
        for run in refs:
            state = self.states.get(run)
            if state is None and self.implicit_runs and run.job_id in self.jobs:
                state = self.states[run] = self._queued(run, self.jobs[run.job_id])
            if state is not None:
                cap = self.tenant_cap.get(state.tenant_id)
                states[run] = replace(state, max_concurrent_runs=cap)
        token_id = current_token_id()
        answers = decide_leases(
            refs,
            states,
            executor_id=executor_id,
            token_id=token_id,
            now=now,
            running=self._running(),
            capacity_retry=timedelta(seconds=self.capacity_retry_s),
        )
        if self.grants_per_answer is not None:
            answers = _cut_at(answers, self.grants_per_answer)
        results = []
        for wire_ref, answer in zip(request.runs, answers, strict=True):
            if isinstance(answer, Grant):
                state = self._write_grant(answer, executor_id, token_id, lease_until)
                grant = self._grant(state, lease_until, now)
                results.append(ledger_pb2.LeaseResult(run=wire_ref, grant=grant))
                continue
            results.append(ledger_pb2.LeaseResult(run=wire_ref, rejection=rejection_out(answer)))
        if self.lose_lease_answers > 0:
            self.lose_lease_answers -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "double: answer lost")
        return ledger_pb2.LeaseRunsResponse(results=results)

    def _write_grant(
        self, grant: Grant, executor_id: str, token_id: str, lease_until: datetime
    ) -> RunState:
        """A new attempt, or (re-grant) the holder's lease extended at the same one, as
        the real store's ``grant_runs``/``regrant_leases`` write them (a new attempt
        draws a new lease id)."""
        state = self.states[grant.ref]
        if grant.regrant:
            state = replace(state, lease_until=lease_until)
        else:
            state = replace(
                state,
                status=RunStatus.RUNNING,
                attempt=state.attempt + 1,
                executor_id=executor_id,
                lease_id=str(uuid.uuid4()),
                lease_token_id=token_id,
                lease_until=lease_until,
                next_attempt_at=None,
            )
        self.states[grant.ref] = state
        return state

    def _grant(self, state: RunState, lease_until: datetime, now: datetime) -> ledger_pb2.Grant:
        job = self.jobs[state.ref.job_id]
        return ledger_pb2.Grant(
            attempt=state.attempt,
            lease_until=wire.timestamp(lease_until),
            target=wire.target(job.target),
            payload=job.payload,
            run_timeout=wire.duration(timedelta(seconds=job.run_timeout_s)),
            tenant_id=job.tenant,
            run_key=state.ref.key,
            signature=f"t={int(now.timestamp())},v1=double-signature",
            kind=wire.enum_out(RunKind.SCHEDULED),
            job_name=f"job {state.ref.job_id}",
            lease_id=state.lease_id or "",
        )

    # --- Heartbeat -----------------------------------------------------------------------

    async def Heartbeat(
        self,
        request_iterator: AsyncIterator[ledger_pb2.HeartbeatRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[ledger_pb2.HeartbeatResponse]:
        self.heartbeat_streams += 1
        stream = _Stream()
        self._streams.append(stream)
        pump = asyncio.create_task(self._answer_beats(request_iterator, stream))
        getter: asyncio.Future[ledger_pb2.HeartbeatResponse] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(stream.outbox.get())
                await asyncio.wait([getter, pump], return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                    continue
                break
            # A malformed beat ends the stream with its status, as in the real ledger;
            # a client that went away just ends it.
            error = None if pump.cancelled() else pump.exception()
            if isinstance(error, SundialError):
                raise error
        finally:
            # The server may cancel this handler (stop, client gone): leave no task behind.
            for task in (getter, pump):
                if task is not None and not task.done():
                    task.cancel()
            await asyncio.gather(
                *(t for t in (getter, pump) if t is not None), return_exceptions=True
            )
            if stream in self._streams:
                self._streams.remove(stream)

    async def _answer_beats(
        self, request_iterator: AsyncIterator[ledger_pb2.HeartbeatRequest], stream: _Stream
    ) -> None:
        interval = wire.duration(timedelta(seconds=self.heartbeat_interval_s))
        async for beat in request_iterator:
            self.heartbeats.append(beat)
            if self.mute_heartbeats:
                continue
            executor_id = executor_id_in(beat.executor_id)
            if len(beat.runs) > MAX_HELD:
                raise InvalidArgument("runs", f"at most {MAX_HELD} held runs")
            held = [
                (wire.run_ref_in(h.run, f"runs[{i}].run"), lease_id_in(h.lease_id, f"runs[{i}]"))
                for i, h in enumerate(beat.runs)
            ]
            stream.executor_id = executor_id
            lease_until = self._clock.now() + lease_ttl_in(beat, DEFAULT_LEASE_S)
            response = ledger_pb2.HeartbeatResponse(heartbeat_interval=interval)
            for (run, lease_id), message in zip(held, beat.runs, strict=True):
                state = self.states.get(run)
                if state is None or not _holds(state, message.attempt, executor_id, lease_id):
                    response.lost.append(message)
                    continue
                self.states[run] = replace(state, lease_until=lease_until)
                response.extended.append(
                    ledger_pb2.LeaseExtension(
                        run=message.run,
                        attempt=message.attempt,
                        lease_until=wire.timestamp(lease_until),
                    )
                )
                if state.cancel_requested:
                    response.cancel.append(
                        ledger_pb2.CancelOrder(
                            run=message.run,
                            attempt=message.attempt,
                            reason="cancellation requested",
                        )
                    )
            await stream.outbox.put(response)

    # --- CompleteRuns --------------------------------------------------------------------

    async def CompleteRuns(
        self, request: ledger_pb2.CompleteRunsRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.CompleteRunsResponse:
        self.complete_requests.append(request)
        if self.fail_complete_codes:
            await context.abort(self.fail_complete_codes.pop(0), "double: complete failed")
        executor_id = executor_id_in(request.executor_id)
        if not 1 <= len(request.outcomes) <= MAX_BATCH:
            raise InvalidArgument("outcomes", f"must hold 1-{MAX_BATCH} outcomes")
        completions = [completion_in(o, f"outcomes[{i}]") for i, o in enumerate(request.outcomes)]
        keys = [c.ref.key for c in completions]
        if any(key in self.internal_outcomes for key in keys):
            await context.abort(grpc.StatusCode.INTERNAL, "double: internal error")
        for i, key in enumerate(keys):
            if key in self.invalid_outcomes:
                raise InvalidArgument(f"outcomes[{i}]", f"double: bad outcome {key}")
        now = self._clock.now()
        # Decided on the states before the call, written after, as the real ledger does
        # under its row locks.
        answers = decide_completions(
            completions,
            self.states,
            now,
            executor_id=executor_id,
            rng=self._rng,
            dead_letter_at=now,
        )
        results = []
        for message, answer in zip(request.outcomes, answers, strict=True):
            results.append(completion_result(message.run, answer))
            if isinstance(answer, Transition):
                self.outcomes.append(message)
                self._write(answer)
        return ledger_pb2.CompleteRunsResponse(results=results)


def counts(outcomes: list[ledger_pb2.Outcome]) -> dict[str, int]:
    """Outcome statuses counted by name."""
    result: dict[str, int] = defaultdict(int)
    for outcome in outcomes:
        result[ledger_pb2.OutcomeStatus.Name(outcome.status)] += 1
    return dict(result)


def _cut_at(answers: list[Grant | Rejection], most: int) -> list[Grant | Rejection]:
    """``answers`` with every grant after the first ``most`` answered ANSWER_FULL."""
    out: list[Grant | Rejection] = []
    kept = 0
    for answer in answers:
        if isinstance(answer, Grant) and kept >= max(most, 1):
            out.append(Rejection(RejectReason.ANSWER_FULL, "double: answer full", timedelta(0)))
            continue
        kept += isinstance(answer, Grant)
        out.append(answer)
    return out
