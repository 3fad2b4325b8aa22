"""LeaseRuns calls shared by every run whose call slot is reserved (docs/design.md
section 7, "Flow control").

The consumer reserves call slots per tenant, a few at a time as they free up
(:meth:`~sundial.executor.inflight.InFlight.reserve`), and asks for a lease of each
handful at once, so that waiting out one LeaseRuns does not hand the slots freed meanwhile
to another tenant. Sent as they come, those asks were one LeaseRuns each: dozens at once
behind a herd, queued on the ledger's connections, and a quiet tenant's ask waited behind
them all. :class:`LeaseBatcher` keeps at most ``calls`` LeaseRuns in flight; an ask made
while they are busy waits and goes out with every other ask queued by then (up to 500
runs a call), when a call ends. Nothing waits on a timer: an idle executor's ask goes out
at once, a busy one's asks share calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from sundial.executor.model import LeaseResult
from sundial.run import RunRef

__all__ = ["MAX_LEASE_BATCH", "LeaseBatcher"]

MAX_LEASE_BATCH = 500
"""Runs per LeaseRuns call at most (the RPC takes 1-500)."""

Lease = Callable[[list[RunRef]], Awaitable[list[LeaseResult] | None]]
"""One LeaseRuns call: a result per run in order, or None (refused, given up, stopping)."""


class LeaseBatcher:
    """Asks for leases, sent together in at most ``calls`` LeaseRuns at once.

    Args:
        lease: Makes one LeaseRuns call (the consumer's, with its retries and logging).
        calls: LeaseRuns calls in flight at most.
    """

    def __init__(self, lease: Lease, *, calls: int = 2) -> None:
        self._lease = lease
        self._idle_calls = calls
        self._asks: list[tuple[Sequence[RunRef], asyncio.Future[list[LeaseResult] | None]]] = []
        self._calls: set[asyncio.Task[None]] = set()
        self._closed = False

    async def lease(self, refs: Sequence[RunRef]) -> list[LeaseResult] | None:
        """Lease ``refs`` (1-500 runs, each once), alone or with other asks: a result
        per run in order, or None when the call carrying them was refused or given up.
        """
        answer: asyncio.Future[list[LeaseResult] | None] = (
            asyncio.get_running_loop().create_future()
        )
        self._asks.append((refs, answer))
        self._send()
        return await answer

    def _send(self) -> None:
        """Start calls while some are idle and asks wait: each takes the waiting asks
        in order up to 500 runs, leaving for the next call an ask that would name a run
        twice (a message redelivered into two batches) or overflow it."""
        while self._idle_calls and self._asks and not self._closed:
            taken: list[tuple[Sequence[RunRef], asyncio.Future[list[LeaseResult] | None]]] = []
            named: set[RunRef] = set()
            left = []
            for ask in self._asks:
                refs, answer = ask
                if answer.done():  # its asker was cancelled
                    continue
                fits = len(named) + len(refs) <= MAX_LEASE_BATCH or not taken
                if fits and named.isdisjoint(refs):
                    taken.append(ask)
                    named.update(refs)
                else:
                    left.append(ask)
            self._asks = left
            if not taken:
                return
            self._idle_calls -= 1
            call = asyncio.create_task(self._call(taken))
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)

    async def _call(
        self, taken: list[tuple[Sequence[RunRef], asyncio.Future[list[LeaseResult] | None]]]
    ) -> None:
        try:
            results = await self._lease([ref for refs, _ in taken for ref in refs])
            position = 0
            for refs, answer in taken:
                mine = None if results is None else results[position : position + len(refs)]
                position += len(refs)
                if not answer.done():
                    answer.set_result(mine)
        except BaseException as exc:
            for _, answer in taken:
                if not answer.done():
                    if isinstance(exc, asyncio.CancelledError):
                        answer.cancel()
                    else:
                        answer.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._idle_calls += 1
            self._send()

    async def close(self) -> None:
        """Cancel the calls in flight and the asks waiting (the consumer stopped)."""
        self._closed = True
        for _, answer in self._asks:
            answer.cancel()
        self._asks = []
        for call in list(self._calls):
            call.cancel()
        if self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)
