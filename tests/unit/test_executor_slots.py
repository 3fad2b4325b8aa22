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
    async with asyncio.timeout(5):
        while len(inflight._waiting) < count:
            await asyncio.sleep(0)  # one turn of the loop: the waiters queue up


async def test_waiting_callers_are_served_first_come_first_served() -> None:
    inflight, stop = slots(), asyncio.Event()
    assert inflight.take(5) == 2
    first = asyncio.create_task(inflight.reserve(5, stop=stop))
    await until_waiting(inflight, 1)
    second = asyncio.create_task(inflight.reserve(5, stop=stop))
    await until_waiting(inflight, 2)
    # A caller that does not wait takes nothing while others wait.
    inflight.release(1)
    assert inflight.take(5) == 0
    assert await first == 1
    assert not second.done()
    inflight.release(1)
    assert await second == 1
    assert inflight.free_slots == 0


async def test_slots_left_by_the_first_go_on_to_the_next_and_a_timeout_gives_up_its_turn() -> None:
    inflight, stop = slots(), asyncio.Event()
    assert inflight.take(2) == 2
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
