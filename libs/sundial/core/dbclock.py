"""One time source for every scheduler: PostgreSQL's clock (docs/design.md section 6).

Due times, ``check_at`` and lease deadlines are compared and computed from "now". Taken
from each host's wall clock, one scheduler 60 s behind would dispatch its partitions 60 s
late and grant leases the other schedulers' sweepers already consider expired; 60 s ahead
it would call targets before their nominal time. So a scheduler reads "now" from an
:class:`~sundial.core.clock.OffsetClock` whose offset :class:`DatabaseTime` keeps at the
difference between the host's clock and the database's ``clock_timestamp()``, measured
as NTP does (the database's instant against the midpoint of the query's round trip,
kept only from round trips short enough to bound the error by half of them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import asyncpg

from sundial.core.clock import Clock, OffsetClock
from sundial.core.loop import PassLoop

__all__ = ["DatabaseTime"]

log = logging.getLogger(__name__)

MAX_ROUND_TRIP = timedelta(seconds=1)
"""A sample whose round trip is longer is dropped: its error could be half of it."""


class DatabaseTime(PassLoop):
    """Keeps ``clock``'s offset at the database's time, every ``interval_s``.

    A lifecycle component; :meth:`measure` is called once before it reports started, so
    the components after it never see the host's own clock.

    Args:
        pool: A pool on the Sundial database.
        clock: The clock to correct (its base is the host's clock).
        interval_s: Seconds between measurements.
        samples: Round trips per measurement; the shortest counts.
    """

    name = "database-time"
    transient = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError)

    def __init__(
        self, pool: asyncpg.Pool, clock: OffsetClock, *, interval_s: float = 10.0, samples: int = 3
    ) -> None:
        super().__init__()
        self._pool = pool
        self.clock = clock
        self._interval_s = interval_s
        self._samples = samples

    @property
    def error_wait_s(self) -> float:
        return self._interval_s

    async def measure(self) -> timedelta | None:
        """Measure and apply the offset; None (offset unchanged) if no sample was good."""
        base: Clock = self.clock.base
        best: tuple[timedelta, timedelta] | None = None  # (round trip, offset)
        async with self._pool.acquire() as conn:
            for _ in range(self._samples):
                before = base.now()
                db_now = await conn.fetchval("SELECT clock_timestamp()")
                after = base.now()
                trip = after - before
                offset = db_now - (before + trip / 2)
                if best is None or trip < best[0]:
                    best = (trip, offset)
        if best is None or best[0] > MAX_ROUND_TRIP:
            log.warning(
                "database time not measured: round trips too slow",
                extra={"action": "clock.skipped"},
            )
            return None
        previous, self.clock.offset = self.clock.offset, best[1]
        if abs(best[1] - previous) > timedelta(seconds=1):
            log.warning(
                "this host's clock is %.3f s %s the database's; using the database's",
                abs(best[1].total_seconds()),
                "behind" if best[1] > timedelta(0) else "ahead of",
                extra={"action": "clock.offset", "offset_s": best[1].total_seconds()},
            )
        return best[1]

    async def run(self, started: Callable[[], None]) -> None:
        """Measure once, report started, then keep measuring until stopped."""
        try:
            await self.measure()
        except self.transient as exc:  # the database is needed anyway; the loop retries
            log.warning("database time not measured: %s", exc, extra={"action": "clock.error"})
        await super().run(started)

    async def pass_once(self) -> float:
        await self.measure()
        return self._interval_s
