"""The executor's call slots are handed out in the order callers began waiting
(sundial.executor.inflight.InFlight.reserve): a batch fetched behind others gets the
next free slots after them, and a batch that has just leased cannot jump the queue."""

from __future__ import annotations

import asyncio

from sundial.executor.config import ExecutorConfig
from sundial.executor.inflight import InFlight
from sundial.run import Completion

CONFIG = ExecutorConfig(
    nats_url="nats://127.0.0.1:4222",
    ledger_address="127.0.0.1:50051",
    ledger_token="executor-token",
    max_in_flight=2,
)


async def _unused_submit(completion: Completion) -> object:
    raise AssertionError("no run is started in these tests")


def slots() -> InFlight:
    return InFlight(CONFIG, runner=None, submit=_unused_submit)  # type: ignore[arg-type]


async def until_waiting(inflight: InFlight, count: int) -> None:
    # One turn of the loop runs the task just created up to its wait (asyncio runs a new
    # task's first step on the next turn): no timing involved.
    await asyncio.sleep(0)
    assert len(inflight._waiting) == count


async def test_waiting_callers_are_served_first_come_first_served() -> None:
    inflight, stop = slots(), asyncio.Event()
    assert await inflight.reserve(5, stop=stop) == 2
    first = asyncio.create_task(inflight.reserve(5, stop=stop))
    await until_waiting(inflight, 1)
    second = asyncio.create_task(inflight.reserve(5, stop=stop))
    await until_waiting(inflight, 2)
    # A newcomer takes nothing while others wait: it queues behind them.
    inflight.release(1)
    third = asyncio.create_task(inflight.reserve(5, stop=stop))
    await until_waiting(inflight, 3)
    assert await first == 1
    assert not second.done() and not third.done()
    inflight.release(1)
    assert await second == 1
    inflight.release(1)
    assert await third == 1
    assert inflight.free_slots == 0


async def test_slots_left_by_the_first_go_on_to_the_next_and_a_timeout_gives_up_its_turn() -> None:
    inflight, stop = slots(), asyncio.Event()
    assert await inflight.reserve(2, stop=stop) == 2
    gives_up = asyncio.create_task(inflight.reserve(1, stop=stop, timeout_s=0.01))
    await until_waiting(inflight, 1)
    assert await gives_up == 0  # nothing freed within its wait
    first = asyncio.create_task(inflight.reserve(1, stop=stop))
    await until_waiting(inflight, 1)
    second = asyncio.create_task(inflight.reserve(1, stop=stop))
    await until_waiting(inflight, 2)
    inflight.release(2)  # one for each, in order
    assert (await first, await second) == (1, 1)
    stop.set()
    assert await inflight.reserve(1, stop=stop) == 0


async def test_a_batch_keeps_its_place_ahead_of_batches_fetched_after_it() -> None:
    inflight, stop = slots(), asyncio.Event()
    quiet, herd = inflight.ticket(), inflight.ticket()  # fetched in this order
    assert await inflight.reserve(5, stop=stop, ticket=quiet) == 2  # leases two runs
    later = asyncio.create_task(inflight.reserve(5, stop=stop, ticket=herd))
    await until_waiting(inflight, 1)
    # Back for more slots after its lease: it waits ahead of the batch fetched later...
    more = asyncio.create_task(inflight.reserve(5, stop=stop, ticket=quiet))
    await until_waiting(inflight, 2)
    assert [place for place, _ in inflight._waiting] == [quiet, herd]
    inflight.release(1)
    assert await more == 1  # ...so the freed slot is its own
    assert not later.done()
    inflight.release(2)
    assert await later == 2
    # A caller without a ticket queues behind every one handed out, and one whose
    # ticket is older than every waiter takes free slots at once.
    newest = asyncio.create_task(inflight.reserve(1, stop=stop))
    await until_waiting(inflight, 1)
    inflight.release(1)  # wakes the waiter...
    assert await inflight.reserve(1, stop=stop, ticket=quiet) == 1  # ...which loses it
    for _ in range(20):  # turns of the loop: the waiter runs, finds no slot, waits on
        await asyncio.sleep(0)
    assert not newest.done()
    inflight.release(1)
    assert await newest == 1
