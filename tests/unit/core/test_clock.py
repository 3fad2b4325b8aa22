"""Clocks: the system clock is aware UTC; the manual clock moves only when told."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from sundial.core.clock import Clock, ManualClock, SystemClock


def test_system_clock_is_aware_utc_and_monotonic() -> None:
    clock = SystemClock()
    assert isinstance(clock, Clock)
    now = clock.now()
    assert now.tzinfo is UTC
    assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)
    assert clock.monotonic() <= clock.monotonic()


async def test_manual_clock_wakes_sleepers_only_when_advanced_past_their_deadline() -> None:
    start = datetime(2030, 3, 10, 6, 59, tzinfo=UTC)
    clock = ManualClock(start)
    assert isinstance(clock, Clock)
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper("short", 5)), asyncio.create_task(sleeper("long", 60))]
    await asyncio.sleep(0)
    clock.advance(4)
    await asyncio.sleep(0)
    assert woke == []
    clock.advance(1)
    await asyncio.wait_for(tasks[0], timeout=5)
    assert woke == ["short"]
    clock.advance(100)
    await asyncio.wait_for(tasks[1], timeout=5)
    assert woke == ["short", "long"]
    assert clock.now() == start + timedelta(seconds=105)
    assert clock.monotonic() == 105


def test_manual_clock_refuses_naive_times_and_going_back() -> None:
    with pytest.raises(ValueError):
        ManualClock(datetime(2030, 1, 1))
    with pytest.raises(ValueError):
        ManualClock().advance(-1)
