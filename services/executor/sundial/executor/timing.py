"""Waiting on the injected clock: jittered backoff, and sleeps that end early.

Every wait of the executor's loops goes through :class:`~sundial.core.clock.Clock`, so a
test can drive them with a ``ManualClock`` instead of sleeping.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from sundial.core.clock import Clock

__all__ = ["Backoff", "sleep_unless"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Jittered exponential delays: ``first_s * 2**(n - 1)`` capped at ``max_s``, each
    drawn from its upper half so that many executors retrying at once spread out."""

    first_s: float = 0.1
    max_s: float = 5.0

    def delay(self, failures: int, rng: random.Random) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (1-based)."""
        exponent = min(max(failures - 1, 0), 30)  # past 2**30 the cap has long won
        return min(self.max_s, self.first_s * 2**exponent) * rng.uniform(0.5, 1.0)


async def sleep_unless(
    clock: Clock, seconds: float, *wake: asyncio.Event | asyncio.Future[Any]
) -> bool:
    """Sleep ``seconds`` of ``clock``'s time, or less if an event of ``wake`` is set (or
    a task of it ends) first. The tasks are only watched, never cancelled.

    Returns:
        True when woken early by ``wake``, False when the time ran out.
    """
    if any(w.is_set() if isinstance(w, asyncio.Event) else w.done() for w in wake):
        return True
    timer = asyncio.ensure_future(clock.sleep(seconds))
    ours = [asyncio.ensure_future(w.wait()) for w in wake if isinstance(w, asyncio.Event)]
    watched = [w for w in wake if not isinstance(w, asyncio.Event)]
    try:
        await asyncio.wait([timer, *ours, *watched], return_when=asyncio.FIRST_COMPLETED)
        return not timer.done()
    finally:
        for waiter in (timer, *ours):
            waiter.cancel()
