"""A TEST DOUBLE of RunLedger, served over a real ``grpc.aio`` server on 127.0.0.1:0.

It keeps run state in memory and follows the contract of proto/sundial/v1/ledger.proto
closely enough for executor tests: grants with increasing attempts and leases (the same
attempt again for a run the calling executor already holds), the rejection reasons
(FINISHED, LEASED_ELSEWHERE, TENANT_AT_CAPACITY with retry_after, NOT_FOUND,
CANCELLED), heartbeats that extend held leases and report lost ones,
unsolicited cancel orders, and CompleteRuns fenced by attempt. It does not retry,
republish or write anything durable: the real ledger (services/scheduler) does.

Usage::

    async with LedgerDouble() as ledger:
        ledger.add_job("job-1", http_target(url), tenant="t1")
        ... ExecutorConfig(ledger_address=ledger.address, ...) ...
        await assert_eventually(lambda: ledger.status(run) == "SUCCEEDED")
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from sundial.run import run_key
from sundial.v1 import job_pb2, ledger_pb2, ledger_pb2_grpc, run_pb2

TERMINAL = frozenset({"SUCCEEDED", "DEAD", "SKIPPED", "CANCELLED"})


def http_target(url: str, method: str = "POST") -> job_pb2.Target:
    """A Target message for an HTTP URL."""
    return job_pb2.Target(http=job_pb2.HttpTarget(url=url, method=method))


def grpc_target(address: str) -> job_pb2.Target:
    """A plaintext gRPC Target message."""
    return job_pb2.Target(grpc=job_pb2.GrpcTarget(address=address, plaintext=True))


def ref(job_id: str, at: datetime) -> run_pb2.RunRef:
    """A RunRef."""
    stamp = Timestamp()
    stamp.FromDatetime(at)
    return run_pb2.RunRef(job_id=job_id, scheduled_at=stamp)


def _key(r: run_pb2.RunRef) -> str:
    return run_key(r.job_id, r.scheduled_at.ToDatetime(tzinfo=UTC))


@dataclass
class JobSpec:
    target: job_pb2.Target
    tenant: str
    payload: bytes = b""
    run_timeout_s: float = 30.0


@dataclass
class RunState:
    ref: run_pb2.RunRef
    status: str = "QUEUED"
    attempt: int = 0
    executor_id: str = ""
    lease_until: float = 0.0
    cancel_requested: bool = False


@dataclass
class _Stream:
    executor_id: str = ""
    outbox: asyncio.Queue[ledger_pb2.HeartbeatResponse] = field(default_factory=asyncio.Queue)


class LedgerDouble(ledger_pb2_grpc.RunLedgerServicer):
    """In-memory RunLedger (see the module docstring). A double: label results as such."""

    def __init__(self, *, port: int = 0, heartbeat_interval_s: float = 0.2) -> None:
        self.jobs: dict[str, JobSpec] = {}
        self.runs: dict[str, RunState] = {}
        self.tenant_cap: dict[str, int] = {}
        self.capacity_retry_s = 0.5
        self.heartbeat_interval_s = heartbeat_interval_s
        self.lease_requests: list[ledger_pb2.LeaseRunsRequest] = []
        self.complete_requests: list[ledger_pb2.CompleteRunsRequest] = []
        self.outcomes: list[ledger_pb2.Outcome] = []
        self.heartbeats: list[ledger_pb2.HeartbeatRequest] = []
        self.fail_lease_calls = 0
        """The next N LeaseRuns calls fail with UNAVAILABLE."""
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
        self._streams: list[_Stream] = []
        self._port = port
        self._server: grpc.aio.Server | None = None
        self.address = ""

    # --- set-up --------------------------------------------------------------------------

    async def start(self) -> LedgerDouble:
        self._server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        ledger_pb2_grpc.add_RunLedgerServicer_to_server(self, self._server)
        self._port = self._server.add_insecure_port(f"127.0.0.1:{self._port}")
        self.address = f"127.0.0.1:{self._port}"
        await self._server.start()
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
        job_id: str,
        target: job_pb2.Target,
        *,
        tenant: str = "tenant-1",
        payload: bytes = b"",
        run_timeout_s: float = 30.0,
    ) -> None:
        self.jobs[job_id] = JobSpec(target, tenant, payload, run_timeout_s)

    # --- inspection ----------------------------------------------------------------------

    def status(self, r: run_pb2.RunRef) -> str:
        state = self.runs.get(_key(r))
        return state.status if state else "UNKNOWN"

    def outcomes_for(self, r: run_pb2.RunRef) -> list[ledger_pb2.Outcome]:
        return [o for o in self.outcomes if _key(o.run) == _key(r)]

    def running(self, tenant: str) -> int:
        return sum(
            1
            for s in self.runs.values()
            if s.status == "RUNNING" and self.jobs[s.ref.job_id].tenant == tenant
        )

    def cancel(self, r: run_pb2.RunRef, reason: str = "CancelRun") -> None:
        """Ask the holder of ``r`` to stop: an unsolicited cancel order on every stream."""
        state = self.runs[_key(r)]
        state.cancel_requested = True
        order = ledger_pb2.CancelOrder(run=state.ref, attempt=state.attempt, reason=reason)
        for stream in self._streams:
            stream.outbox.put_nowait(ledger_pb2.HeartbeatResponse(cancel=[order]))

    def expire(self, r: run_pb2.RunRef) -> None:
        """Let ``r``'s lease lapse and grant it again later (as a sweep would)."""
        state = self.runs[_key(r)]
        state.status = "QUEUED"
        state.lease_until = 0.0

    # --- RunLedger -----------------------------------------------------------------------

    async def LeaseRuns(
        self, request: ledger_pb2.LeaseRunsRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.LeaseRunsResponse:
        self.lease_requests.append(request)
        if self.fail_lease_calls > 0:
            self.fail_lease_calls -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "double: ledger unavailable")
        ttl = request.lease_ttl.ToTimedelta().total_seconds() or 30.0
        results = []
        now = time.time()
        for r in request.runs:
            results.append(self._lease_one(r, request.executor_id, ttl, now))
        if self.lose_lease_answers > 0:
            self.lose_lease_answers -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "double: answer lost")
        return ledger_pb2.LeaseRunsResponse(results=results)

    def _lease_one(
        self, r: run_pb2.RunRef, executor_id: str, ttl: float, now: float
    ) -> ledger_pb2.LeaseResult:
        def reject(
            reason: int, detail: str, retry_after: float | None = None
        ) -> ledger_pb2.LeaseResult:
            rejection = ledger_pb2.Rejection(reason=reason, detail=detail)
            if retry_after is not None:
                rejection.retry_after.FromTimedelta(timedelta(seconds=retry_after))
            return ledger_pb2.LeaseResult(run=r, rejection=rejection)

        job = self.jobs.get(r.job_id)
        if job is None:
            return reject(ledger_pb2.REJECT_REASON_NOT_FOUND, "no such job")
        state = self.runs.setdefault(_key(r), RunState(ref=r))
        if state.status == "CANCELLED":
            return reject(ledger_pb2.REJECT_REASON_CANCELLED, "run is CANCELLED")
        if state.status in TERMINAL:
            return reject(ledger_pb2.REJECT_REASON_FINISHED, f"run is {state.status}")
        regrant = False
        if state.status == "RUNNING" and state.lease_until > now:
            if state.executor_id != executor_id:
                return reject(ledger_pb2.REJECT_REASON_LEASED_ELSEWHERE, state.executor_id)
            regrant = True  # the caller holds it: the same attempt again (idempotent)
        cap = self.tenant_cap.get(job.tenant)
        if not regrant and cap is not None and self.running(job.tenant) >= cap:
            return reject(
                ledger_pb2.REJECT_REASON_TENANT_AT_CAPACITY, "at capacity", self.capacity_retry_s
            )
        state.status = "RUNNING"
        if not regrant:
            state.attempt += 1
        state.executor_id = executor_id
        state.lease_until = now + ttl
        grant = ledger_pb2.Grant(
            attempt=state.attempt,
            target=job.target,
            payload=job.payload,
            tenant_id=job.tenant,
            run_key=_key(r),
            signature=f"t={int(now)},v1=double-signature",
            kind=run_pb2.RUN_KIND_SCHEDULED,
            job_name=f"job {r.job_id}",
        )
        grant.lease_until.FromSeconds(int(state.lease_until))
        grant.run_timeout.FromTimedelta(timedelta(seconds=job.run_timeout_s))
        return ledger_pb2.LeaseResult(run=r, grant=grant)

    async def Heartbeat(self, request_iterator, context):
        self.heartbeat_streams += 1
        stream = _Stream()
        self._streams.append(stream)
        interval = Duration()
        interval.FromTimedelta(timedelta(seconds=self.heartbeat_interval_s))

        async def pump_requests() -> None:
            async for beat in request_iterator:
                self.heartbeats.append(beat)
                if self.mute_heartbeats:
                    continue
                stream.executor_id = beat.executor_id
                ttl = beat.lease_ttl.ToTimedelta().total_seconds() or 30.0
                response = ledger_pb2.HeartbeatResponse(heartbeat_interval=interval)
                now = time.time()
                for held in beat.runs:
                    state = self.runs.get(_key(held.run))
                    if (
                        state is None
                        or state.status != "RUNNING"
                        or state.attempt != held.attempt
                        or state.executor_id != beat.executor_id
                    ):
                        response.lost.append(held)
                        continue
                    state.lease_until = now + ttl
                    ext = ledger_pb2.LeaseExtension(run=held.run, attempt=held.attempt)
                    ext.lease_until.FromSeconds(int(state.lease_until))
                    response.extended.append(ext)
                    if state.cancel_requested:
                        response.cancel.append(
                            ledger_pb2.CancelOrder(
                                run=held.run, attempt=held.attempt, reason="cancel requested"
                            )
                        )
                await stream.outbox.put(response)

        pump = asyncio.create_task(pump_requests())
        getter: asyncio.Future[ledger_pb2.HeartbeatResponse] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(stream.outbox.get())
                await asyncio.wait([getter, pump], return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                    continue
                break
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

    async def CompleteRuns(
        self, request: ledger_pb2.CompleteRunsRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.CompleteRunsResponse:
        self.complete_requests.append(request)
        if self.fail_complete_codes:
            await context.abort(self.fail_complete_codes.pop(0), "double: complete failed")
        if any(_key(o.run) in self.internal_outcomes for o in request.outcomes):
            await context.abort(grpc.StatusCode.INTERNAL, "double: internal error")
        bad = [o for o in request.outcomes if _key(o.run) in self.invalid_outcomes]
        if bad:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"double: bad outcome {_key(bad[0].run)}"
            )
        results = []
        for outcome in request.outcomes:
            state = self.runs.get(_key(outcome.run))
            result = ledger_pb2.CompletionResult(run=outcome.run)
            if state is None:
                result.fence_reason = ledger_pb2.FENCE_REASON_NOT_FOUND
            elif state.attempt != outcome.attempt:
                result.fence_reason = ledger_pb2.FENCE_REASON_STALE_ATTEMPT
            elif state.status != "RUNNING":
                result.fence_reason = ledger_pb2.FENCE_REASON_NOT_RUNNING
            else:
                self.outcomes.append(outcome)
                state.status = {
                    ledger_pb2.OUTCOME_STATUS_SUCCEEDED: "SUCCEEDED",
                    ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE: "RETRYING",
                    ledger_pb2.OUTCOME_STATUS_TIMED_OUT: "RETRYING",
                    ledger_pb2.OUTCOME_STATUS_FAILED_FINAL: "DEAD",
                    ledger_pb2.OUTCOME_STATUS_CANCELLED: "CANCELLED",
                }[outcome.status]
                result.accepted = True
            if state is not None:
                result.next_status = run_pb2.RunStatus.Value(f"RUN_STATUS_{state.status}")
            results.append(result)
        return ledger_pb2.CompleteRunsResponse(results=results)


def counts(outcomes: list[ledger_pb2.Outcome]) -> dict[str, int]:
    """Outcome statuses counted by name."""
    result: dict[str, int] = defaultdict(int)
    for outcome in outcomes:
        result[ledger_pb2.OutcomeStatus.Name(outcome.status)] += 1
    return dict(result)
