"""The executor's call slots (sundial.executor.inflight.InFlight.reserve): freed slots go
to the waiting tenant holding the fewest, so a quiet tenant's runs fetched behind a
herd's start next; among one tenant's batches in the order they were fetched, a batch
that has just leased cannot lose its place, and no one tenant takes the slots kept free
for the others (as many as another tenant needed at once lately, at most half)."""

from __future__ import annotations

import asyncio

from sundial.core.clock import ManualClock
from sundial.executor.config import ExecutorConfig
from sundial.executor.inflight import RECENT_NEED_S, InFlight
from sundial.run import Completion


async def _unused_submit(completion: Completion) -> object:
    raise AssertionError("no run is started in these tests")


def slots(max_in_flight: int = 2, clock: ManualClock | None = None, **config: int) -> InFlight:
    """Slots of an executor configured so (its other settings unused here)."""
    return InFlight(
        ExecutorConfig(
            nats_url="nats://127.0.0.1:4222",
            ledger_address="127.0.0.1:50051",
            ledger_token="executor-token",
            max_in_flight=max_in_flight,
            **config,  # type: ignore[arg-type]
        ),
        runner=None,  # type: ignore[arg-type]
        submit=_unused_submit,
        clock=clock,
    )


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
    assert sorted(w.ticket for w in inflight._waiting) == [quiet, herd]
    inflight.release(1)
    assert await more == 1  # ...so the freed slot is its own
    assert not later.done()
    inflight.release(2)
    assert await later == 2
    # A caller without a ticket queues behind every one handed out, and a slot freed
    # while it waits is its own: a caller coming after cannot take it.
    newest = asyncio.create_task(inflight.reserve(1, stop=stop))
    await until_waiting(inflight, 1)
    inflight.release(1)
    assert inflight.free_slots == 0
    assert await newest == 1


async def test_freed_slots_go_to_the_tenant_holding_the_fewest() -> None:
    inflight, stop = slots(), asyncio.Event()
    herd, quiet = inflight.ticket(), inflight.ticket()  # the herd's batch fetched first
    assert await inflight.reserve(2, stop=stop, ticket=herd, tenant="a") == 2
    herd_more = asyncio.create_task(inflight.reserve(5, stop=stop, ticket=herd, tenant="a"))
    await until_waiting(inflight, 1)
    quiet_runs = asyncio.create_task(inflight.reserve(1, stop=stop, ticket=quiet, tenant="b"))
    await until_waiting(inflight, 2)
    # The herd's waiter is older, but its tenant holds both slots: b's gets the first.
    inflight.release(1, "a")
    assert await quiet_runs == 1
    assert not herd_more.done()
    assert (inflight.taken("a"), inflight.taken("b")) == (1, 1)
    # Back for more: the slot "a" frees leaves it holding fewer, so it is a's...
    quiet_more = asyncio.create_task(inflight.reserve(1, stop=stop, ticket=quiet, tenant="b"))
    await until_waiting(inflight, 2)
    inflight.release(1, "a")
    assert await herd_more == 1
    assert not quiet_more.done()
    # ...and the one "b" frees is b's: the two tenants take turns.
    inflight.release(1, "b")
    assert await quiet_more == 1
    assert (inflight.taken("a"), inflight.taken("b")) == (1, 1)


async def test_a_waiter_takes_every_slot_freed_before_it_runs_again() -> None:
    inflight, stop = slots(), asyncio.Event()
    assert await inflight.reserve(2, stop=stop, tenant="a") == 2
    waiting = asyncio.create_task(inflight.reserve(5, stop=stop, tenant="b"))
    await until_waiting(inflight, 1)
    inflight.release(1, "a")
    inflight.release(1, "a")
    # Both slots freed before it ran: one LeaseRuns for two runs, not two of one.
    assert await waiting == 2
    assert (inflight.taken("a"), inflight.taken("b")) == (0, 2)


async def test_a_cancelled_waiter_gives_back_the_slots_it_was_given() -> None:
    inflight, stop = slots(), asyncio.Event()
    assert await inflight.reserve(2, stop=stop, tenant="a") == 2
    waiting = asyncio.create_task(inflight.reserve(2, stop=stop, tenant="b"))
    await until_waiting(inflight, 1)
    inflight.release(1, "a")  # given to the waiter, which is cancelled before it runs
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert inflight.free_slots == 1 and inflight.taken("b") == 0


async def test_tenants_share_freed_slots_in_proportion_to_their_weights() -> None:
    inflight, stop = slots(8, slots_kept_free=0), asyncio.Event()
    assert await inflight.reserve(8, stop=stop, tenant="busy") == 8
    light = asyncio.create_task(inflight.reserve(8, stop=stop, tenant="c", weight=1))
    heavy = asyncio.create_task(inflight.reserve(8, stop=stop, tenant="d", weight=3))
    await until_waiting(inflight, 2)
    inflight.release(8, "busy")  # eight freed at once: shared 1 to 3
    assert (await light, await heavy) == (2, 6)


async def test_weighted_shares_hold_beside_the_slots_kept_for_another_tenant() -> None:
    # Eight slots, one kept free (an eighth). "busy" needed eight at once just now, so
    # half are kept free of each other tenant while it is remembered; and c and d each
    # ask for eight. Both backlogged, d may still hold its weighted share of the slots
    # (six of eight), and the weights decide, not the half kept for "busy" or for c.
    inflight, stop = slots(8), asyncio.Event()
    assert await inflight.reserve(8, stop=stop, tenant="busy") == 7
    assert await inflight.reserve(1, stop=stop, tenant="other") == 1
    light = asyncio.create_task(inflight.reserve(8, stop=stop, tenant="c", weight=1))
    heavy = asyncio.create_task(inflight.reserve(8, stop=stop, tenant="d", weight=3))
    await until_waiting(inflight, 2)
    inflight.release(1, "other")
    inflight.release(7, "busy")  # all eight free: shared 1 to 3
    assert (await light, await heavy) == (2, 6)
    assert (inflight.tenant_cap("c"), inflight.tenant_cap("d")) == (4, 6)


async def test_a_tenant_never_takes_the_slots_kept_free_for_another() -> None:
    inflight, stop = slots(16, slots_kept_free=2), asyncio.Event()
    # A herd's batch asks for every slot: it gets all but the two kept free...
    assert await inflight.reserve(16, stop=stop, tenant="a") == 14
    assert inflight.free_slots == 2 and inflight.idle_slots == 2
    herd_more = asyncio.create_task(inflight.reserve(5, stop=stop, tenant="a"))
    await until_waiting(inflight, 1)
    # ...and waits for its own to end, though two are free (busy in all but name).
    assert inflight.idle_slots == 0
    # Another tenant's runs take the kept slots at once, not after a call of a's ends.
    assert await inflight.reserve(3, stop=stop, tenant="b") == 2
    # b needed three at once: from now on three are kept free of a.
    assert inflight.tenant_cap("a") == 13
    inflight.release(2, "a")  # a holds 12 of its 13: one of the two goes to a's batch...
    assert inflight.taken("a") == 13 and inflight.free_slots == 1
    # ...and one stays free for b's third run.
    assert await inflight.reserve(1, stop=stop, tenant="b") == 1
    herd_more.cancel()  # the slot it was given goes back
    await asyncio.gather(herd_more, return_exceptions=True)
    assert (inflight.taken("a"), inflight.taken("b"), inflight.free_slots) == (12, 3, 1)
    # At most an eighth of the slots are kept, whatever is asked for.
    assert await slots(16, slots_kept_free=10).reserve(16, stop=stop, tenant="a") == 14


async def test_the_slots_kept_for_a_tenant_follow_its_recent_bursts_up_to_half() -> None:
    clock = ManualClock()
    inflight, stop = slots(64, clock=clock), asyncio.Event()
    # Alone, a herd holds all but the eight kept free (SUNDIAL_SLOTS_KEPT_FREE).
    assert inflight.tenant_cap("a") == 56
    # A quiet tenant's burst of 20 (a cron every second at 20 jobs): 20 are kept from
    # now on, so its next burst finds them free behind the herd.
    assert await inflight.reserve(20, stop=stop, tenant="b") == 20
    inflight.release(20, "b")
    assert inflight.tenant_cap("a") == 44
    assert await inflight.reserve(64, stop=stop, tenant="a") == 44
    assert inflight.free_slots == 20
    # A burst larger than half the slots: half are kept, the herd keeps the rest.
    assert await inflight.reserve(20, stop=stop, tenant="c") == 20
    inflight.release(20, "c")
    assert await inflight.reserve(40, stop=stop, tenant="b") == 20
    assert inflight.tenant_cap("a") == 32
    # The herd is another tenant to b: b may hold all but half.
    assert inflight.tenant_cap("b") == 32
    inflight.release(20, "b")
    # Forgotten after RECENT_NEED_S without such a burst: the eight kept again.
    clock.advance(RECENT_NEED_S + 1.5)
    assert inflight.tenant_cap("a") == 56
    # None kept when SUNDIAL_SLOTS_KEPT_FREE is 0, however large the bursts.
    none_kept = slots(64, slots_kept_free=0)
    assert await none_kept.reserve(20, stop=stop, tenant="b") == 20
    none_kept.release(20, "b")
    assert await none_kept.reserve(64, stop=stop, tenant="a") == 64
