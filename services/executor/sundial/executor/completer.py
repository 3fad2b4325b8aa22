"""Reports attempt outcomes to the ledger in batches (RunLedgerService.CompleteRuns).

An outcome waits at most ``complete_flush_ms`` for others to share its call, and a full
batch (``complete_batch_size``) is sent at once. Calls go through
:class:`~sundial.executor.ledger.LedgerClient`, which retries them under its policy:
CompleteRuns is idempotent per attempt (a repeated report is answered
FENCE_REASON_NOT_RUNNING and changes nothing), so a retry never records twice, and
dropping an outcome costs a whole attempt (its lease expires as a failure). A batch
refused INVALID_ARGUMENT, or failing INTERNAL/UNKNOWN past the policy's few retries
(:attr:`~sundial.executor.ledger.LedgerError.request_suspect`), is split in halves
until the bad outcome is alone, so one poisonous report never drops or stalls the
others. Each submitter waits for its own answer, so its run stays held (and
heartbeated) until the ledger has it. An unexpected error (a bug) resolves the batch's
submitters as not sent: the completer keeps running and the runs' leases expire, so
the ledger retries them later.

On stop, what is queued is still sent (within the app's grace period).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sundial.core.clock import Clock, SystemClock
from sundial.executor.config import ExecutorConfig
from sundial.executor.ledger import LedgerClient, LedgerError
from sundial.executor.model import NOT_SENT, Answer
from sundial.run import Completion

__all__ = ["Completer"]

log = logging.getLogger(__name__)

_Queued = tuple[Completion, asyncio.Future[Answer]]
"""An outcome waiting for its call, and where its submitter waits for the answer."""


class Completer:
    """Lifecycle component batching outcomes into CompleteRuns calls.

    Args:
        config: Supplies ``complete_flush_ms`` and ``complete_batch_size``.
        ledger: Sends the batches.
        clock: Times the wait for a batch to fill.
    """

    name = "completer"

    def __init__(
        self, config: ExecutorConfig, ledger: LedgerClient, *, clock: Clock | None = None
    ) -> None:
        self._ledger = ledger
        self._flush_s = config.complete_flush_ms / 1000.0
        self._batch_size = config.complete_batch_size
        self._clock = clock or SystemClock()
        self._queue: list[_Queued] = []
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self.on_complete: Callable[[Completion, Answer], None] | None = None
        """Test and metrics hook: called with every answered outcome."""

    async def submit(self, completion: Completion) -> Answer:
        """Queue ``completion`` and wait until the ledger answered it."""
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._queue.append((completion, future))
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
                    await self._clock.sleep(self._flush_s)
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
                    _resolve(batch, NOT_SENT)
        finally:
            _resolve(self._queue, NOT_SENT)
            self._queue.clear()

    async def stop(self) -> None:
        """Send what is queued, then make :meth:`run` return."""
        self._stopping.set()

    async def _send(self, batch: list[_Queued]) -> None:
        try:
            answers = await self._ledger.complete_runs([completion for completion, _ in batch])
        except LedgerError as exc:
            # One bad outcome fails the whole call: isolate it by halves (log2(batch)
            # extra calls), so the good ones are still recorded. An INTERNAL/UNKNOWN
            # that outlasts its retries may be one outcome the ledger chokes on: retried
            # forever it would stall every report behind it, so it is isolated the same
            # way (and a lone one given up below).
            if exc.request_suspect and len(batch) > 1:
                log.warning(
                    "CompleteRuns refused a batch of %d (%s); splitting it",
                    len(batch),
                    exc.details,
                    extra={"action": "complete.split", "outcomes": len(batch)},
                )
                half = len(batch) // 2
                await self._send(batch[:half])
                await self._send(batch[half:])
                return
            lone = batch[0][0] if len(batch) == 1 else None
            log.error(
                "CompleteRuns refused %d outcome(s): %s",
                len(batch),
                exc.details,
                extra={
                    "action": "complete.refused",
                    "grpc_code": exc.code_name,
                    "run_key": lone.ref.key if lone else None,
                    "attempt": lone.attempt if lone else None,
                },
            )
            _resolve(batch, NOT_SENT)
            return
        for (completion, future), answer in zip(batch, answers, strict=False):
            if not answer.accepted:
                reason = answer.fence_reason
                log.info(
                    "outcome fenced out (%s)",
                    reason.name if reason is not None else "unknown reason",
                    extra={
                        "action": "complete.fenced",
                        "run_key": completion.ref.key,
                        "attempt": completion.attempt,
                    },
                )
            if self.on_complete is not None:
                self.on_complete(completion, answer)
            if not future.done():
                future.set_result(answer)
        _resolve(batch, NOT_SENT)  # a short answer: never leave a submitter waiting


def _resolve(batch: list[_Queued], answer: Answer) -> None:
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
