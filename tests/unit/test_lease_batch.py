"""Asks for leases share LeaseRuns calls (sundial.executor.lease_batch.LeaseBatcher): at
most ``calls`` in flight per tenant, the tenant's asks made meanwhile go out together in
the next, each ask gets its own runs' results, a run is never named twice in one call,
and tenants never share a call or wait for each other's."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from sundial.executor.lease_batch import MAX_LEASE_BATCH, LeaseBatcher
from sundial.executor.model import LeaseResult, Rejected
from sundial.run import RejectReason, RunRef

T0 = datetime(2030, 1, 1, tzinfo=UTC)
A, B = "tenant-a", "tenant-b"


def refs(count: int) -> list[RunRef]:
    return [RunRef(uuid.uuid4(), T0) for _ in range(count)]


class Ledger:
    """Records each call and answers it when the test says."""

    def __init__(self) -> None:
        self.calls: list[list[RunRef]] = []
        self.answers: list[asyncio.Future[bool]] = []

    async def lease(self, asked: list[RunRef]) -> list[LeaseResult] | None:
        self.calls.append(asked)
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        if not await answer:
            return None
        return [Rejected(ref, RejectReason.FINISHED, detail=str(ref.job_id)) for ref in asked]

    async def calls_made(self, count: int) -> None:
        for _ in range(10):  # turns of the loop, no timing involved
            await asyncio.sleep(0)
        assert len(self.calls) == count, self.calls


async def one_call_busy() -> tuple[Ledger, LeaseBatcher, asyncio.Task[list[LeaseResult] | None]]:
    """A batcher of one call per tenant, and tenant A's one-run ask in flight on it."""
    ledger = Ledger()
    batcher = LeaseBatcher(ledger.lease, calls=1)
    busy = asyncio.create_task(batcher.lease(A, refs(1)))
    await ledger.calls_made(1)
    return ledger, batcher, busy


async def test_asks_made_while_the_calls_are_busy_share_the_next_call() -> None:
    ledger = Ledger()
    batcher = LeaseBatcher(ledger.lease, calls=1)
    first = refs(2)
    one = asyncio.create_task(batcher.lease(A, first))
    await ledger.calls_made(1)  # idle: sent at once, alone
    later = [refs(1), refs(3), refs(2)]
    waiting = [asyncio.create_task(batcher.lease(A, asked)) for asked in later]
    await ledger.calls_made(1)  # the one call is busy: they wait
    ledger.answers[0].set_result(True)
    assert [r.run for r in await one] == first  # type: ignore[union-attr]
    await ledger.calls_made(2)
    assert ledger.calls[1] == [ref for asked in later for ref in asked]
    ledger.answers[1].set_result(True)
    for asked, task in zip(later, waiting, strict=True):
        assert [r.run for r in await task] == asked  # type: ignore[union-attr]


async def test_a_refused_call_answers_none_to_every_ask_it_carried() -> None:
    ledger, batcher, busy = await one_call_busy()
    carried = [asyncio.create_task(batcher.lease(A, refs(2))) for _ in range(2)]
    ledger.answers[0].set_result(True)
    await busy
    await ledger.calls_made(2)
    ledger.answers[1].set_result(False)
    assert [await task for task in carried] == [None, None]


async def test_a_call_holds_500_runs_at_most_and_never_a_run_twice() -> None:
    ledger, batcher, busy = await one_call_busy()
    twice = refs(1)
    big, again, small = refs(MAX_LEASE_BATCH - 10), twice + refs(1), refs(20)
    asks = [asyncio.create_task(batcher.lease(A, asked)) for asked in (twice, big, again, small)]
    ledger.answers[0].set_result(True)
    await busy
    await ledger.calls_made(2)
    # `again` names a run of `twice` and `small` would overflow: both wait for the next.
    assert ledger.calls[1] == twice + big
    ledger.answers[1].set_result(True)
    await ledger.calls_made(3)
    assert ledger.calls[2] == again + small
    ledger.answers[2].set_result(True)
    for asked, task in zip((twice, big, again, small), asks, strict=True):
        assert [r.run for r in await task] == asked  # type: ignore[union-attr]


async def test_close_cancels_the_waiting_asks() -> None:
    ledger, batcher, busy = await one_call_busy()
    waiting = asyncio.create_task(batcher.lease(A, refs(1)))
    await asyncio.sleep(0)
    await batcher.close()
    outcomes = await asyncio.gather(busy, waiting, return_exceptions=True)
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes), outcomes
    assert len(ledger.calls) == 1  # the waiting ask was never sent


async def test_a_tenant_never_waits_for_another_tenants_calls_nor_shares_them() -> None:
    ledger, batcher, busy = await one_call_busy()
    a_waiting = asyncio.create_task(batcher.lease(A, refs(2)))
    b_asked = refs(1)
    b = asyncio.create_task(batcher.lease(B, b_asked))
    # A's one call is busy, so A's second ask waits; B's goes out at once, alone.
    await ledger.calls_made(2)
    assert ledger.calls[1] == b_asked
    ledger.answers[1].set_result(True)
    assert [r.run for r in await b] == b_asked  # type: ignore[union-attr]
    assert not a_waiting.done()
    ledger.answers[0].set_result(True)
    await busy
    await ledger.calls_made(3)
    ledger.answers[2].set_result(True)
    assert len(await a_waiting or []) == 2
    assert batcher._tenants == {}  # nothing kept for tenants with nothing in flight
