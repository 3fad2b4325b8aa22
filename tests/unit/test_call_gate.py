"""The API's per-tenant gate on calls executing at once (sundial.api.ratelimit)."""

from __future__ import annotations

import asyncio

import pytest

from sundial.api.ratelimit import RateLimited, TenantCallGate


async def test_a_tenants_calls_past_its_slots_wait_for_its_own_and_past_its_queue_are_refused() -> (
    None
):
    gate = TenantCallGate(calls=1, waiting=1)
    inside = {name: asyncio.Event() for name in ("a1", "a2", "b1")}
    release = asyncio.Event()
    entered: list[str] = []

    async def call(tenant: str, name: str) -> None:
        async with gate.slot(tenant):
            entered.append(name)
            inside[name].set()
            await release.wait()

    first = asyncio.create_task(call("a", "a1"))
    await inside["a1"].wait()
    second = asyncio.create_task(call("a", "a2"))
    await asyncio.sleep(0)  # one turn of the loop: the new task runs up to the gate
    assert gate.users("a") == 2  # one executing, one waiting
    with pytest.raises(RateLimited) as refused:
        async with gate.slot("a"):
            pass
    assert refused.value.retry_delay_s == 1.0
    other = asyncio.create_task(call("b", "b1"))  # B's slot is its own
    await inside["b1"].wait()
    assert entered == ["a1", "b1"]
    release.set()
    await asyncio.gather(first, second, other)
    assert entered == ["a1", "b1", "a2"]
    assert gate.users("a") == gate.users("b") == 0


def test_a_gate_of_zero_calls_is_off() -> None:
    assert not TenantCallGate(calls=0).enabled
    assert TenantCallGate(calls=4).enabled
