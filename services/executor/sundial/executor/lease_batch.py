"""LeaseRuns calls shared by every run of a tenant whose call slot is reserved
(docs/design.md section 7, "Flow control").

The consumer reserves call slots per tenant, a few at a time as they free up
(:meth:`~sundial.executor.inflight.InFlight.reserve`), and asks for a lease of each
handful at once, so that waiting out one LeaseRuns does not hand the slots freed meanwhile
to another tenant. Sent as they come, those asks were one LeaseRuns each: dozens at once
behind a herd, queued on the ledger's connections, and a quiet tenant's ask waited behind
them all. :class:`LeaseBatcher` keeps at most ``calls`` LeaseRuns in flight **per
tenant**; an ask made while its tenant's calls are busy waits and goes out with every
other ask of that tenant queued by then (up to 500 runs a call), when one of them ends.
Tenants never share a call: the ledger serialises a tenant's grants on that tenant's
lock, so a quiet tenant's runs in a call with a busy tenant's waited for the busy
tenant's other call to commit (B's lease 0.06-0.19 s behind A's herd, the ledger's own
transaction 7 ms). Nothing waits on a timer: an idle tenant's ask goes out at once, a
busy one's asks share calls.
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


Ask = tuple[Sequence[RunRef], asyncio.Future[list[LeaseResult] | None]]


class _Tenant:
    """One tenant's asks waiting and its calls idle."""

    __slots__ = ("asks", "idle_calls")

    def __init__(self, calls: int) -> None:
        self.asks: list[Ask] = []
        self.idle_calls = calls


class LeaseBatcher:
    """Asks for leases, sent together in at most ``calls`` LeaseRuns per tenant at once.

    Args:
        lease: Makes one LeaseRuns call (the consumer's, with its retries and logging).
        calls: LeaseRuns calls in flight at most for one tenant.
    """

    def __init__(self, lease: Lease, *, calls: int = 2) -> None:
        self._lease = lease
        self._calls_per_tenant = calls
        # Only tenants with asks waiting or calls in flight (forgotten when both end).
        self._tenants: dict[str, _Tenant] = {}
        self._calls: set[asyncio.Task[None]] = set()
        self._closed = False

    async def lease(self, tenant: str, refs: Sequence[RunRef]) -> list[LeaseResult] | None:
        """Lease ``refs`` (1-500 runs of ``tenant``, each once), alone or with the
        tenant's other asks: a result per run in order, or None when the call carrying
        them was refused or given up.
        """
        answer: asyncio.Future[list[LeaseResult] | None] = (
            asyncio.get_running_loop().create_future()
        )
        state = self._tenants.get(tenant)
        if state is None:
            state = self._tenants[tenant] = _Tenant(self._calls_per_tenant)
        state.asks.append((refs, answer))
        self._send(tenant, state)
        return await answer

    def _send(self, tenant: str, state: _Tenant) -> None:
        """Start calls while the tenant has some idle and asks wait: each takes the
        waiting asks in order up to 500 runs, leaving for the next call an ask that would
        name a run twice (a message redelivered into two batches) or overflow it."""
        while state.idle_calls and state.asks and not self._closed:
            taken: list[Ask] = []
            named: set[RunRef] = set()
            left = []
            for ask in state.asks:
                refs, answer = ask
                if answer.done():  # its asker was cancelled
                    continue
                fits = len(named) + len(refs) <= MAX_LEASE_BATCH or not taken
                if fits and named.isdisjoint(refs):
                    taken.append(ask)
                    named.update(refs)
                else:
                    left.append(ask)
            state.asks = left
            if not taken:
                break
            state.idle_calls -= 1
            call = asyncio.create_task(self._call(tenant, state, taken))
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)
        if not state.asks and state.idle_calls == self._calls_per_tenant:
            self._tenants.pop(tenant, None)

    async def _call(self, tenant: str, state: _Tenant, taken: list[Ask]) -> None:
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
            state.idle_calls += 1
            self._send(tenant, state)

    async def close(self) -> None:
        """Cancel the calls in flight and the asks waiting (the consumer stopped)."""
        self._closed = True
        for state in self._tenants.values():
            for _, answer in state.asks:
                answer.cancel()
            state.asks = []
        for call in list(self._calls):
            call.cancel()
        if self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)
