"""The source of "now", injected so tests control time instead of sleeping.

Wall-clock time (:meth:`Clock.now`) decides which runs are due and is what SQL receives
as its optional "now" parameter; monotonic time (:meth:`Clock.monotonic`) measures
durations and deadlines, which must not jump when NTP steps the wall clock.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "OffsetClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What a component needs to know about time."""

    def now(self) -> datetime:
        """The current instant as an aware UTC datetime."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; only differences mean anything."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time (returns at once for ``seconds <= 0``)."""
        ...


class SystemClock:
    """The real clocks of the machine."""

    def now(self) -> datetime:
        """The current instant as an aware UTC datetime."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep(seconds)``."""
        await asyncio.sleep(max(seconds, 0.0))


class ManualClock:
    """A clock that moves only when told to, for tests.

    ``sleep`` waits until :meth:`advance` has moved the clock past the sleeper's deadline,
    so a loop under test runs exactly as often as the test advances time.

    Args:
        start: The initial wall-clock instant (must be timezone-aware).
    """

    def __init__(self, start: datetime | None = None) -> None:
        if start is not None and start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = (start or datetime(2030, 1, 1, tzinfo=UTC)).astimezone(UTC)
        self._monotonic = 0.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        """The instant the clock is set to."""
        return self._now

    def monotonic(self) -> float:
        """Seconds advanced since the clock was made."""
        return self._monotonic

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been advanced by ``seconds``."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._monotonic + seconds, future))
        try:
            await future
        finally:
            self._sleepers = [(d, f) for d, f in self._sleepers if f is not future]

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds`` and wake the sleepers now due."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        self._monotonic += seconds
        self._now += timedelta(seconds=seconds)
        for deadline, future in self._sleepers:
            if deadline <= self._monotonic and not future.done():
                future.set_result(None)


class OffsetClock:
    """Another clock's wall time moved by an offset that can be updated; monotonic time
    and sleeping are the base clock's.

    :class:`sundial.core.dbclock.DatabaseTime` keeps the offset at what separates the
    base clock from PostgreSQL's, so every scheduler decides due times and lease
    deadlines on one time source, however wrong its host's clock is.
    """

    def __init__(self, base: Clock | None = None) -> None:
        self.base: Clock = base or SystemClock()
        self.offset = timedelta(0)
        """Added to the base clock's wall time."""

    def now(self) -> datetime:
        """The base clock's instant plus :attr:`offset`."""
        return self.base.now() + self.offset

    def monotonic(self) -> float:
        """The base clock's monotonic time (offsets never move it)."""
        return self.base.monotonic()

    async def sleep(self, seconds: float) -> None:
        """The base clock's sleep."""
        await self.base.sleep(seconds)
