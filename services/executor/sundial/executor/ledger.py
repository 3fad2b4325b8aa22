"""The executor's one door to RunLedgerService: every LeaseRuns, CompleteRuns and Heartbeat
stream goes through :class:`LedgerClient`, under one retry policy.

The policy (:class:`LedgerRetryPolicy`), declared once for every operation:

- **Transient** codes (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED,
  CANCELLED: the ledger restarting, overloaded, a connection lost mid-call) are retried
  with jittered exponential backoff (0.1 s doubling to 5 s) until the operation's
  deadline.
- **Server errors** (INTERNAL, UNKNOWN) are retried at most ``server_error_retries``
  times: the ledger maps anything unexpected (a lost database connection) to INTERNAL,
  and UNKNOWN is what a proxy or a crashing handler yields; both are transient far more
  often than not. One that persists may be caused by the request itself, which
  :attr:`LedgerError.request_suspect` tells the caller (the completer then splits its
  batch to isolate the outcome the ledger chokes on).
- Every other code refuses the request: it is not retried.

Retrying is safe because both unary calls are idempotent at the ledger: LeaseRuns grants
a run its holder already leases again at the same attempt, and a repeated report of an
attempt is answered FENCE_REASON_NOT_RUNNING and changes nothing. So a call whose
answer was lost (committed, then the connection broke) is simply sent again.

Deadlines: each call has ``ledger_timeout_s``; an operation as a whole (its calls and
the waits between them) ``run_lease_s``. A ledger unreachable for that long has let the
leases in question lapse (the heartbeat cannot reach it either): a grant whose answer
was lost has expired, and an outcome would be fenced out, so retrying longer saves
nothing, while giving up hands the messages back to JetStream (another executor may
reach another ledger replica) and lets the completer go on with later batches.

The Heartbeat stream has no deadline: it is opened here and reopened by
:class:`~sundial.executor.heartbeat.Heartbeat` forever, with the same backoff, since
it is what keeps every held lease alive.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import grpc

from sundial.core import tracing
from sundial.core.backoff import Backoff
from sundial.core.clock import Clock, SystemClock
from sundial.executor import convert
from sundial.executor.config import ExecutorConfig
from sundial.executor.model import Answer, HeartbeatAnswer, HeldLease, LeaseResult, Rejected
from sundial.executor.timing import sleep_unless
from sundial.internal.v1 import ledger_pb2_grpc
from sundial.run import Completion, RejectReason, RunRef

__all__ = [
    "SERVER_ERROR_CODES",
    "TRANSIENT_CODES",
    "HeartbeatStream",
    "LedgerClient",
    "LedgerError",
    "LedgerRetryPolicy",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

_CREDENTIAL_CODES = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})

TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
    }
)
"""Retried until the operation's deadline."""

SERVER_ERROR_CODES = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})
"""Retried a few times (:attr:`LedgerRetryPolicy.server_error_retries`), then given up."""

# The shortest timeout a call is given when the operation's deadline is nearly spent:
# a call with no time at all could only fail.
_MIN_CALL_TIMEOUT_S = 0.05


@dataclass(frozen=True, slots=True)
class LedgerRetryPolicy:
    """How every unary ledger call is retried (see the module docstring)."""

    call_timeout_s: float
    """Deadline of each call (``ledger_timeout_s``)."""
    deadline_s: float
    """Deadline of an operation: all its calls and the waits between them."""
    server_error_retries: int = 4
    """Retries of INTERNAL/UNKNOWN before giving up (about 1.5 s of backoff)."""
    backoff: Backoff = field(default_factory=lambda: Backoff(initial_s=0.1))

    @classmethod
    def from_config(cls, config: ExecutorConfig) -> LedgerRetryPolicy:
        """The policy of an executor's configuration."""
        return cls(call_timeout_s=config.ledger_timeout_s, deadline_s=config.run_lease_s)


class LedgerError(Exception):
    """A ledger operation failed for good: refused, or retried until the policy gave up.

    Attributes:
        operation: ``LeaseRuns``, ``CompleteRuns`` or ``Heartbeat``.
        code: The last call's status; None when the answer itself was unusable.
        details: The status details (or what was wrong with the answer).
        gave_up: True when the code was retryable but the deadline or the retry budget
            ran out (or the caller asked to stop); False when the ledger refused.
    """

    def __init__(
        self, operation: str, code: grpc.StatusCode | None, details: str, *, gave_up: bool
    ) -> None:
        self.operation = operation
        self.code = code
        self.details = details
        self.gave_up = gave_up
        super().__init__(f"{operation} {self.code_name}: {details}")

    @property
    def code_name(self) -> str:
        """The status code's name (``BAD_ANSWER`` for an unusable answer)."""
        return self.code.name if self.code is not None else "BAD_ANSWER"

    @property
    def retryable(self) -> bool:
        """The code is one the policy retries (transient or a server error)."""
        return self.code in TRANSIENT_CODES or self.code in SERVER_ERROR_CODES

    @property
    def request_suspect(self) -> bool:
        """The request itself may be what fails: refused INVALID_ARGUMENT, or a server
        error that outlasted its retries. A caller sending a batch can split it."""
        return self.code == grpc.StatusCode.INVALID_ARGUMENT or self.code in SERVER_ERROR_CODES


class LedgerClient:
    """RunLedgerService calls of one executor, under :class:`LedgerRetryPolicy`.

    Args:
        stub: The RunLedgerService stub on the ledger channel.
        config: Supplies the lease asked for (``run_lease_s``) and the deadlines.
        executor_id: This process's id at the ledger (sent with every request).
        token: The executor token every call and stream presents (``ledger_token``).
        clock: Measures the deadlines and the backoff waits.
        rng: Draws the backoff jitter.
    """

    def __init__(
        self,
        stub: ledger_pb2_grpc.RunLedgerServiceStub,
        config: ExecutorConfig,
        *,
        executor_id: str,
        token: str,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._stub = stub
        self.executor_id = executor_id
        self._metadata = (("authorization", f"Bearer {token}"),)
        self.policy = LedgerRetryPolicy.from_config(config)
        self._lease_ttl_s = config.run_lease_s
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()

    async def lease_runs(
        self, refs: Sequence[RunRef], *, stop: asyncio.Event | None = None
    ) -> list[LeaseResult]:
        """Lease ``refs`` (1-500 runs) for ``run_lease_s``.

        Args:
            refs: The runs, each at most once.
            stop: Stop retrying once set (the consumer is stopping).

        Returns:
            One result per run, in the order of ``refs``.

        Raises:
            LedgerError: Refused, given up, or answered with the wrong number of results.

        An answer holds at most the ledger's byte budget of grants; the runs it left out
        (REJECT_REASON_ANSWER_FULL, nothing written for them) are leased again here at
        once, in further calls, so the caller sees every run granted or finally
        rejected. Each answer grants at least one run, so this ends.
        """
        results: list[LeaseResult] = list(await self._lease_once(refs, stop))
        left = [i for i, r in enumerate(results) if _answer_full(r)]
        while left and len(left) < len(refs):
            again = await self._lease_once([refs[i] for i in left], stop)
            for i, result in zip(left, again, strict=True):
                results[i] = result
            still = [i for i, r in zip(left, again, strict=True) if _answer_full(r)]
            if len(still) == len(left):  # no progress (a ledger that broke its promise)
                break
            left = still
        return results

    async def _lease_once(
        self, refs: Sequence[RunRef], stop: asyncio.Event | None
    ) -> list[LeaseResult]:
        """One LeaseRuns (retried under the policy) and its results."""
        request = convert.lease_request(self.executor_id, refs, self._lease_ttl_s)
        with tracing.batch_span("sundial.lease", {"sundial.runs": len(refs)}) as lease_span:
            response = await self._retrying(
                "LeaseRuns",
                lambda timeout: self._stub.LeaseRuns(
                    request, timeout=timeout, metadata=self._metadata
                ),
                stop=stop,
                extra={"runs": len(refs)},
            )
        try:
            return convert.lease_results(refs, response, lease_span=lease_span)
        except ValueError as exc:
            raise LedgerError("LeaseRuns", None, str(exc), gave_up=False) from None

    async def complete_runs(self, completions: Sequence[Completion]) -> list[Answer]:
        """Report ``completions`` (1-500 outcomes).

        Returns:
            The ledger's answers in request order; possibly fewer than ``completions``
            (a short answer: the rest count as not sent).

        Raises:
            LedgerError: Refused or given up (see :attr:`LedgerError.request_suspect`).
        """
        request = convert.complete_request(self.executor_id, completions)
        response = await self._retrying(
            "CompleteRuns",
            lambda timeout: self._stub.CompleteRuns(
                request, timeout=timeout, metadata=self._metadata
            ),
            extra={"outcomes": len(completions)},
        )
        return convert.answers(response)

    def heartbeat(self) -> HeartbeatStream:
        """Open a Heartbeat stream (it connects lazily: errors surface on use)."""
        return HeartbeatStream(
            self._stub.Heartbeat(metadata=self._metadata), self.executor_id, self._lease_ttl_s
        )

    def backoff(self, failures: int) -> float:
        """The policy's wait after ``failures`` consecutive failures (heartbeat reconnects)."""
        return self.policy.backoff.delay_s(failures, self._rng.random)

    async def _retrying(
        self,
        operation: str,
        call: Callable[[float], Awaitable[T]],
        *,
        stop: asyncio.Event | None = None,
        extra: dict[str, object],
    ) -> T:
        """``call(timeout)`` under the policy: the one retry loop of the executor."""
        policy = self.policy
        deadline = self._clock.monotonic() + policy.deadline_s
        failures = server_errors = 0
        while True:
            remaining = deadline - self._clock.monotonic()
            try:
                return await call(max(min(policy.call_timeout_s, remaining), _MIN_CALL_TIMEOUT_S))
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                details = exc.details() or ""
            failures += 1
            if code in SERVER_ERROR_CODES:
                server_errors += 1
            elif code not in TRANSIENT_CODES:
                if code in _CREDENTIAL_CODES:
                    log.error(
                        "the ledger refused this executor's credentials (%s: %s): check "
                        "SUNDIAL_LEDGER_TOKEN (an executor token) and the TLS settings",
                        code.name,
                        details,
                        extra={"action": "ledger.refused", "grpc_code": code.name, **extra},
                    )
                raise LedgerError(operation, code, details, gave_up=False)  # refused
            delay = self.backoff(failures)
            budget_spent = server_errors > policy.server_error_retries
            if budget_spent or self._clock.monotonic() + delay >= deadline:
                log.error(
                    "%s failed (%s) %d times; giving up",
                    operation,
                    code.name,
                    failures,
                    extra={"action": "ledger.give_up", "grpc_code": code.name, **extra},
                )
                raise LedgerError(operation, code, details, gave_up=True)
            if stop is not None and stop.is_set():
                raise LedgerError(operation, code, details, gave_up=True)
            log.warning(
                "%s failed (%s); retrying in %.1f s",
                operation,
                code.name,
                delay,
                extra={"action": "ledger.retry", "grpc_code": code.name, **extra},
            )
            wake = (stop,) if stop is not None else ()
            if await sleep_unless(self._clock, delay, *wake):
                raise LedgerError(operation, code, details, gave_up=True)


class HeartbeatStream:
    """One open Heartbeat stream: beats out, the ledger's answers in.

    Errors of the stream surface as :class:`LedgerError` (``operation="Heartbeat"``).
    """

    def __init__(
        self, call: grpc.aio.StreamStreamCall, executor_id: str, lease_ttl_s: float
    ) -> None:
        self._call = call
        self._executor_id = executor_id
        self._lease_ttl_s = lease_ttl_s

    async def send(self, held: Iterable[HeldLease], *, draining: bool) -> None:
        """Send one beat listing every held run (the ledger extends their leases)."""
        request = convert.heartbeat_request(
            self._executor_id, held, self._lease_ttl_s, draining=draining
        )
        try:
            await self._call.write(request)
        except grpc.aio.AioRpcError as exc:
            raise _stream_error(exc) from None

    async def answers(self) -> AsyncIterator[HeartbeatAnswer]:
        """The ledger's messages until it ends the stream."""
        try:
            async for response in self._call:
                yield convert.heartbeat_answer(response)
        except grpc.aio.AioRpcError as exc:
            raise _stream_error(exc) from None

    async def close(self) -> None:
        """Half-close: no more beats (the ledger then ends the stream)."""
        try:
            await self._call.done_writing()
        except grpc.aio.AioRpcError as exc:
            raise _stream_error(exc) from None

    def cancel(self) -> None:
        """Abandon the stream at once (idempotent)."""
        self._call.cancel()


def _answer_full(result: LeaseResult) -> bool:
    return isinstance(result, Rejected) and result.reason is RejectReason.ANSWER_FULL


def _stream_error(exc: grpc.aio.AioRpcError) -> LedgerError:
    # A broken stream is always reopened: "gave up" only says this stream is over.
    return LedgerError("Heartbeat", exc.code(), exc.details() or "", gave_up=True)
