"""Reports attempt outcomes to the ledger in batches (RunLedger.CompleteRuns).

An outcome waits at most ``complete_flush_ms`` for others to share its call, and a full
batch (``complete_batch_size``) is sent at once. A failed call is retried with backoff
while the ledger is unavailable or answers INTERNAL/UNKNOWN (a database hiccup, a proxy
reset): CompleteRuns is idempotent per attempt (a repeated report is answered
FENCE_REASON_NOT_RUNNING and changes nothing), so a retry never records twice, and
dropping an outcome costs a whole attempt (its lease expires as a failure). A batch
refused INVALID_ARGUMENT (or failing INTERNAL/UNKNOWN past a few retries) is split in
halves until the bad outcome is alone, so one poisonous report never drops or stalls
the others. Each submitter waits for its own answer, so
its run stays held (and heartbeated) until the ledger has it. An unexpected error (a bug)
resolves the batch's submitters as not sent: the completer keeps running and the runs'
leases expire, so the ledger retries them later.

On stop, what is queued is still sent (within the app's grace period).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from sundial.executor.convert import to_outcome
from sundial.executor.model import Report
from sundial.v1 import ledger_pb2, ledger_pb2_grpc, run_pb2

__all__ = ["Completer", "Completion"]

log = logging.getLogger(__name__)

_RETRYABLE_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        # The ledger maps anything unexpected (a lost database connection mid-call) to
        # INTERNAL; UNKNOWN is what a proxy or a crashing handler yields. Both are
        # transient far more often than not, and a retry is harmless (idempotent).
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)
_SERVER_ERROR_CODES = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})
# Retries of INTERNAL/UNKNOWN before the batch is split (a lone outcome: given up, its
# lease expires and the ledger retries the run): about 1.5 s of backoff.
_SERVER_ERROR_RETRIES = 4


@dataclass(frozen=True)
class Completion:
    """The ledger's answer to one report."""

    accepted: bool
    next_status: str
    fence_reason: str = ""


_DROPPED = Completion(accepted=False, next_status="", fence_reason="NOT_SENT")


class Completer:
    """Lifecycle component batching reports into CompleteRuns calls."""

    name = "completer"

    def __init__(
        self,
        stub: ledger_pb2_grpc.RunLedgerStub,
        *,
        executor_id: str,
        flush_ms: float = 5.0,
        batch_size: int = 500,
        timeout_s: float = 10.0,
    ) -> None:
        self._stub = stub
        self._executor_id = executor_id
        self._flush_s = flush_ms / 1000.0
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._queue: list[tuple[Report, asyncio.Future[Completion]]] = []
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self.on_complete: Callable[[Report, Completion], None] | None = None
        """Test and metrics hook: called with every answered report."""

    async def submit(self, report: Report) -> Completion:
        """Queue ``report`` and wait until the ledger answered it."""
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._queue.append((report, future))
        self._wakeup.set()
        return await future

    async def run(self, started: Callable[[], None]) -> None:
        """Send batches until stopped and the queue is empty."""
        started()
        try:
            while True:
                if not self._queue:
                    if self._stopping.is_set():
                        return
                    self._wakeup.clear()
                    await _first(self._wakeup, self._stopping)
                    continue
                if len(self._queue) < self._batch_size and not self._stopping.is_set():
                    # Let concurrent outcomes join this call.
                    await asyncio.sleep(self._flush_s)
                batch = self._queue[: self._batch_size]
                del self._queue[: self._batch_size]
                try:
                    await self._send(batch)
                except Exception:
                    # A bug, not the ledger's answer: never let it stop reporting. The
                    # submitters learn their outcome was not sent; the leases expire and
                    # the ledger retries those runs.
                    log.exception(
                        "sending outcomes failed unexpectedly; %d not reported",
                        len(batch),
                        extra={"action": "complete.error", "outcomes": len(batch)},
                    )
                    _resolve(batch, _DROPPED)
        finally:
            for _, future in self._queue:
                if not future.done():
                    future.set_result(_DROPPED)
            self._queue.clear()

    async def stop(self) -> None:
        """Send what is queued, then make :meth:`run` return."""
        self._stopping.set()

    async def _send(self, batch: list[tuple[Report, asyncio.Future[Completion]]]) -> None:
        request = ledger_pb2.CompleteRunsRequest(
            executor_id=self._executor_id,
            outcomes=[to_outcome(report) for report, _ in batch],
        )
        delay = 0.1
        server_errors = 0
        while True:
            try:
                response = await self._stub.CompleteRuns(request, timeout=self._timeout_s)
                break
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                if code in _SERVER_ERROR_CODES:
                    server_errors += 1
                # One bad outcome fails the whole call: isolate it by halves (log2(batch)
                # extra calls), so the good ones are still recorded. An INTERNAL/UNKNOWN
                # that outlasts a few retries may be one outcome the ledger chokes on:
                # retried forever it would stall every report behind it, so it is
                # isolated the same way (and a lone one given up below).
                persistent = server_errors > _SERVER_ERROR_RETRIES
                if (code == grpc.StatusCode.INVALID_ARGUMENT or persistent) and len(batch) > 1:
                    log.warning(
                        "CompleteRuns refused a batch of %d (%s); splitting it",
                        len(batch),
                        exc.details(),
                        extra={"action": "complete.split", "outcomes": len(batch)},
                    )
                    half = len(batch) // 2
                    await self._send(batch[:half])
                    await self._send(batch[half:])
                    return
                if code not in _RETRYABLE_CODES or persistent:
                    report = batch[0][0] if len(batch) == 1 else None
                    log.error(
                        "CompleteRuns refused %d outcome(s): %s",
                        len(batch),
                        exc.details(),
                        extra={
                            "action": "complete.refused",
                            "grpc_code": exc.code().name,
                            "run_key": report.run.key if report else None,
                            "attempt": report.attempt if report else None,
                        },
                    )
                    _resolve(batch, _DROPPED)
                    return
                log.warning(
                    "CompleteRuns failed (%s); retrying in %.1f s",
                    exc.code().name,
                    delay,
                    extra={"action": "complete", "outcomes": len(batch)},
                )
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 5.0)
        for (report, future), result in zip(batch, response.results, strict=False):
            completion = Completion(
                accepted=result.accepted,
                next_status=run_pb2.RunStatus.Name(result.next_status),
                fence_reason=ledger_pb2.FenceReason.Name(result.fence_reason)
                if not result.accepted
                else "",
            )
            if not result.accepted:
                log.info(
                    "outcome fenced out (%s)",
                    completion.fence_reason,
                    extra={
                        "action": "complete.fenced",
                        "run_key": report.run.key,
                        "attempt": report.attempt,
                    },
                )
            if self.on_complete is not None:
                self.on_complete(report, completion)
            if not future.done():
                future.set_result(completion)
        _resolve(batch, _DROPPED)  # a short answer: never leave a submitter waiting


def _resolve(batch: list[tuple[Report, asyncio.Future[Completion]]], answer: Completion) -> None:
    """Answer every submitter of ``batch`` not answered yet."""
    for _, future in batch:
        if not future.done():
            future.set_result(answer)


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
